package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/ddbstore"
)

// defaultSweepRate is how many items a second sweep deletes unless --rate
// says otherwise: each delete is a write of at least one capacity unit.
const defaultSweepRate = 100

// sweepFlags are sweep's own flags.
type sweepFlags struct {
	dryRun bool
	rate   float64
	max    int
	scan   scanFlags
}

func (f *sweepFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.dryRun, "dry-run", false, "list the items past retention, and delete nothing")
	fs.Float64Var(&f.rate, "rate", defaultSweepRate, "delete at most this many `items` a second (0: no limit)")
	fs.IntVar(&f.max, "max", 0, "delete (or, with --dry-run, list) at most this many `items` (0: every one)")
	f.scan.register(fs)
}

// sweepView is what a sweep reports.
type sweepView struct {
	Table   string      `json:"table"`
	DryRun  bool        `json:"dry_run"`
	Found   int         `json:"found"`   // past retention when the scan read them
	Deleted int         `json:"deleted"` // of those, deleted
	Left    int         `json:"left"`    // of those, live again (renewed, written anew) or gone at their delete
	Live    int         `json:"live"`    // the store's items the filter returned that are not past retention (a live lease)
	Items   []sweptView `json:"items,omitempty"`
	Scanned int         `json:"scanned"`
	RCU     float64     `json:"consumed_rcu"`
	Next    string      `json:"next,omitempty"`
	Stopped string      `json:"stopped,omitempty"`
}

// sweptView is an item a dry run would delete.
type sweptView struct {
	KeyHash   string    `json:"key_hash"`
	Kind      string    `json:"kind"` // "record", "step" or "result"
	Status    string    `json:"status,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
}

// sweep deletes the store's items past retention (ddbstore's ScanExpired
// and DeleteExpired): for tables whose Time to Live deletes nothing.
func (c *cli) sweep(ctx context.Context, args []string) error {
	o := c.flags("sweep", "--table TABLE [--dry-run] [--rate N] [--max N] [--max-rcu N] [--next TOKEN] [--json]")
	var f sweepFlags
	f.register(o.fs)
	if err := o.parse(args); err != nil {
		return err
	}
	if f.rate < 0 || f.max < 0 {
		return usageErrorf("--rate and --max want 0 or more")
	}
	if err := f.scan.check(); err != nil {
		return err
	}
	store, err := c.open(ctx, o)
	if err != nil {
		return err
	}
	r := sweepRun{c: c, f: f, store: store, pace: c.newPacer(f.rate), sc: newScanner(store, f.scan, "", newProgress(c.stderr, c.now, !o.json))}
	r.view = sweepView{Table: store.Table(), DryRun: f.dryRun}
	runErr := r.run(ctx)
	if errors.Is(runErr, context.Canceled) {
		r.view.Stopped = stoppedInterrupted
	}
	r.sc.progress.clear()
	r.view.Next, r.view.Scanned, r.view.RCU = r.sc.next, r.sc.scanned, r.sc.consumed
	if err := r.write(c.stdout, o.json); err != nil && runErr == nil {
		runErr = err
	}
	if runErr == nil && r.view.Next != "" {
		runErr = &leftBehindError{continuation(r.view.Stopped, r.view.Next)}
	}
	return runErr
}

// sweepRun is one sweep.
type sweepRun struct {
	c     *cli
	f     sweepFlags
	store *ddbstore.Store
	pace  *pacer
	sc    *scanner
	view  sweepView
}

// run scans until the table ends, the budget or --max is reached, or ctx
// ends, deleting what it finds as it goes. Each page's items are past
// retention when it is read; each delete checks again at its own time.
func (r *sweepRun) run(ctx context.Context) error {
	for {
		items, live, err := r.sc.expired(ctx, rest(r.f.max, r.view.Found), r.c.now())
		if err != nil {
			return err
		}
		r.view.Live += live
		for _, e := range items {
			if err := r.one(ctx, e); err != nil {
				return err
			}
		}
		r.sc.progress.show(func(elapsed time.Duration) string {
			return fmt.Sprintf("sweep: %d items scanned, %.1f RCU, %d past retention, %d deleted, %d left, %s",
				r.sc.scanned, r.sc.consumed, r.view.Found, r.view.Deleted, r.view.Left, elapsed.Round(time.Second))
		})
		if stop, why := r.sc.stops(r.f.max, r.view.Found); stop {
			r.view.Stopped = why
			return nil
		}
	}
}

// one deletes e if it is still past retention, or in a dry run notes it.
func (r *sweepRun) one(ctx context.Context, e ddbstore.Expired) error {
	r.view.Found++
	if r.f.dryRun {
		v := sweptView{KeyHash: idem.HashKey(e.Key), Kind: "record", Status: string(e.Record.Status), ExpiresAt: e.ExpiresAt.UTC()}
		switch {
		case e.Step:
			v.Kind, v.Status = "step", ""
		case e.Result:
			v.Kind, v.Status = "result", ""
		}
		r.view.Items = append(r.view.Items, v)
		return nil
	}
	if err := r.pace.wait(ctx); err != nil {
		return err
	}
	err := r.store.DeleteExpired(ctx, e, r.c.now())
	switch {
	case errors.Is(err, idem.ErrRecordChanged):
		r.view.Left++
	case err != nil:
		return err
	default:
		r.view.Deleted++
	}
	return nil
}

func (r *sweepRun) write(w io.Writer, asJSON bool) error {
	v := r.view
	if asJSON {
		return writeJSON(w, v)
	}
	if len(v.Items) > 0 {
		rows := [][]string{{"KIND", "KEY HASH", "STATUS", "EXPIRED"}}
		for _, it := range v.Items {
			rows = append(rows, []string{it.Kind, it.KeyHash, orDash(it.Status), stamp(&it.ExpiresAt)})
		}
		if err := table(w, rows); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	what := fmt.Sprintf("deleted %s past retention, left %d (live again since the scan read them, or gone)", count(v.Deleted, "item"), v.Left)
	if v.DryRun {
		what = fmt.Sprintf("dry run: would delete %s past retention; nothing changed", count(v.Found, "item"))
	}
	fmt.Fprintf(w, "%s in %s (%s; %d under a live lease kept)\n", what, v.Table, scanSummary(v.Scanned, v.RCU, r.sc.corrupt, 0), v.Live)
	_, err := fmt.Fprintln(w, continuation(v.Stopped, v.Next))
	return err
}
