package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
)

// releaseStates are release --status's values: list's, but in_progress,
// whose live leases a handler may still hold (a stuck record is released
// with stuck; one live record with --key and --force), and succeeded,
// whose release runs a handler that did its work again (one at a time,
// with --key).
var releaseStates = []string{stateStuck, string(core.StatusFailed), stateFailedRetryable, stateFailedPermanent}

// releaseVerdicts are release --verdict's values: the verdicts of the
// records no delivery runs again, each with the state its records are in.
var releaseVerdicts = map[string]string{
	idem.FailedPermanently.String(): stateFailedPermanent,
	idem.ReplayedFailure.String():   stateFailedPermanent,
	idem.RetriesExhausted.String():  "", // by the decision: failed-retryable or stuck, attempts used up
}

// bulkFlags select the records a bulk release deletes.
type bulkFlags struct {
	state, verdict string
	since, until   string
	dryRun         bool
	rate           float64
	max            int
	scan           scanFlags
}

func (b *bulkFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&b.state, "status", "", "release every record in this `state`: "+strings.Join(releaseStates, ", ")+" (instead of one key)")
	fs.StringVar(&b.verdict, "verdict", "", "release every record whose deliveries get this `verdict`: failed_permanently or replayed_failure (failed-permanent records), retries_exhausted (by --max-attempts)")
	fs.StringVar(&b.since, "since", "", "with --status or --verdict: only records written at or after this `time` (RFC 3339, or a duration before now: 6h)")
	fs.StringVar(&b.until, "until", "", "with --status or --verdict: only records written before this `time` (RFC 3339, or a duration before now)")
	fs.BoolVar(&b.dryRun, "dry-run", false, "with --status or --verdict: list what would be released, and release nothing")
	fs.Float64Var(&b.rate, "rate", defaultRedriveRate, "with --status or --verdict: release at most this many `records` a second (0: no limit)")
	fs.IntVar(&b.max, "max", 0, "with --status or --verdict: release at most this many `records` (0: every one)")
	b.scan.register(fs)
}

// set reports whether the flags ask for a bulk release.
func (b *bulkFlags) set() bool { return b.state != "" || b.verdict != "" }

// window is a bulk release's time window on the records' last write.
type window struct{ since, until time.Time }

func (w window) holds(t time.Time) bool {
	return (w.since.IsZero() || !t.Before(w.since)) && (w.until.IsZero() || t.Before(w.until))
}

// check checks the flags of a bulk release and returns its window.
func (b *bulkFlags) check(now time.Time) (window, error) {
	var w window
	switch {
	case b.state != "" && b.verdict != "":
		return w, usageErrorf("give --status or --verdict, not both")
	case b.state != "" && !slices.Contains(releaseStates, b.state):
		return w, usageErrorf("--status %q: want one of %s (records in progress under a live lease, and successes, are never released in bulk)", b.state, strings.Join(releaseStates, ", "))
	case b.verdict != "":
		if _, ok := releaseVerdicts[b.verdict]; !ok {
			return w, usageErrorf("--verdict %q: want failed_permanently, replayed_failure or retries_exhausted: a record keeps no verdict, and these name the records no delivery runs again", b.verdict)
		}
	}
	if b.rate < 0 || b.max < 0 {
		return w, usageErrorf("--rate and --max want 0 or more")
	}
	var err error
	if w.since, err = timeFlag("--since", b.since, now); err != nil {
		return w, err
	}
	if w.until, err = timeFlag("--until", b.until, now); err != nil {
		return w, err
	}
	return w, b.scan.check()
}

// timeFlag reads a time given as RFC 3339 or as a duration before now.
func timeFlag(name, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usageErrorf("%s %q: want an RFC 3339 time (2026-12-03T10:00:00Z) or a duration before now (6h)", name, s)
}

// selects reports whether a bulk release selects rec, in state st at now.
func (b *bulkFlags) selects(rec core.Record, st string, w window, now time.Time, maxAttempts int) bool {
	if st == stateExpired || st == stateInProgress || st == stateSucceeded || !w.holds(rec.UpdatedAt) {
		return false
	}
	if b.state != "" {
		return selects(b.state, st)
	}
	if want := releaseVerdicts[b.verdict]; want != "" {
		return st == want
	}
	return dispose(&rec, now, maxAttempts).why == whyExhausted
}

// serverStatus is the stored status a bulk release's scan filters on
// (empty: none).
func (b *bulkFlags) serverStatus() core.Status {
	if b.state != "" {
		return storedStatus(b.state)
	}
	if want := releaseVerdicts[b.verdict]; want != "" {
		return storedStatus(want)
	}
	return ""
}

// bulkView is what a bulk release reports.
type bulkView struct {
	Table    string       `json:"table"`
	DryRun   bool         `json:"dry_run"`
	Released int          `json:"released"`
	Left     int          `json:"left"` // changed since the scan read them: not released
	Records  []bulkRecord `json:"records"`
	Scanned  int          `json:"scanned"`
	RCU      float64      `json:"consumed_rcu"`
	Next     string       `json:"next,omitempty"`
	Stopped  string       `json:"stopped,omitempty"`
}

// bulkRecord is a record a bulk release selected, and what became of it:
// "released", "release" (a dry run) or "left" (it changed since read).
type bulkRecord struct {
	recordView
	Action string `json:"action"`
}

// releaseAll deletes every record b selects, each fenced as the scan read
// it (ddbstore.Store.Release): a record that changed since is left.
func (c *cli) releaseAll(ctx context.Context, o *common, b bulkFlags, yes bool, maxAttempts int) error {
	now := c.now()
	w, err := b.check(now)
	if err != nil {
		return err
	}
	store, err := c.open(ctx, o)
	if err != nil {
		return err
	}
	if !b.dryRun && !yes {
		if err := c.confirm(fmt.Sprintf("Release (delete) every record %s in %s? Their keys' next calls run the handlers again.", b.describe(w), store.Table())); err != nil {
			return err
		}
	}
	r := bulkRun{c: c, b: b, w: w, store: store, maxAttempts: maxAttempts, pace: c.newPacer(b.rate),
		sc: newScanner(store, b.scan, b.serverStatus(), newProgress(c.stderr, c.now, !o.json))}
	r.view = bulkView{Table: store.Table(), DryRun: b.dryRun, Records: []bulkRecord{}}
	runErr := r.run(ctx)
	r.sc.progress.clear()
	r.view.Next, r.view.Scanned, r.view.RCU = r.sc.next, r.sc.scanned, r.sc.consumed
	if err := r.write(c.stdout, o.json); err != nil && runErr == nil {
		runErr = err
	}
	if runErr == nil && (r.view.Left > 0 || r.view.Next != "") {
		runErr = &leftBehindError{fmt.Sprintf("%s left (changed since read); %s", count(r.view.Left, "record"), continuation(r.view.Stopped, r.view.Next))}
	}
	return runErr
}

// describe says what b selects, for the confirmation.
func (b *bulkFlags) describe(w window) string {
	s := "in state " + b.state
	if b.verdict != "" {
		s = "whose deliveries get " + b.verdict
	}
	if !w.since.IsZero() {
		s += " written since " + w.since.UTC().Format(time.RFC3339)
	}
	if !w.until.IsZero() {
		s += " written before " + w.until.UTC().Format(time.RFC3339)
	}
	return s
}

// confirm asks question and reads yes; anything else is a notReleasedError.
func (c *cli) confirm(question string) error {
	fmt.Fprintf(c.stderr, "\n%s Type yes to confirm: ", question)
	answer, _ := bufio.NewReader(c.stdin).ReadString('\n')
	if !strings.HasSuffix(answer, "\n") {
		fmt.Fprintln(c.stderr) // end the prompt's line when the answer did not
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "yes", "y":
		return nil
	}
	return &notReleasedError{"not released: not confirmed (pass --yes to release without asking)"}
}

// bulkRun is one bulk release.
type bulkRun struct {
	c           *cli
	b           bulkFlags
	w           window
	store       *ddbstore.Store
	maxAttempts int
	pace        *pacer
	sc          *scanner
	view        bulkView
}

// run scans until the table ends, the budget or --max is reached, or ctx
// ends, releasing what it selects as it goes. With --max, each Scan
// evaluates at most the records still wanted, so that the token to
// continue skips none.
func (r *bulkRun) run(ctx context.Context) error {
	for {
		recs, err := r.sc.page(ctx, rest(r.b.max, len(r.view.Records)))
		if err != nil {
			return err
		}
		for _, rec := range recs {
			now := r.c.now()
			if !r.b.selects(rec, stateOf(rec, now), r.w, now, r.maxAttempts) {
				continue
			}
			if err := r.one(ctx, rec, now); err != nil {
				return err
			}
		}
		r.sc.progress.show(func(elapsed time.Duration) string {
			return fmt.Sprintf("release: %d items scanned, %.1f RCU, %d released, %d left, %s",
				r.sc.scanned, r.sc.consumed, r.view.Released, r.view.Left, elapsed.Round(time.Second))
		})
		if stop, why := r.sc.stops(r.b.max, len(r.view.Records)); stop {
			r.view.Stopped = why
			return nil
		}
	}
}

// one releases rec, fenced as read, or in a dry run notes it.
func (r *bulkRun) one(ctx context.Context, rec core.Record, now time.Time) error {
	br := bulkRecord{recordView: r.sc.view(rec, now), Action: "release"}
	if r.b.dryRun {
		r.view.Records = append(r.view.Records, br)
		return nil
	}
	if err := r.pace.wait(ctx); err != nil {
		return err
	}
	err := r.store.Release(ctx, rec)
	switch {
	case errors.Is(err, idem.ErrRecordChanged) || errors.Is(err, idem.ErrNotFound):
		br.Action = "left"
		r.view.Left++
	case err != nil:
		return err
	default:
		br.Action = "released"
		r.view.Released++
	}
	r.view.Records = append(r.view.Records, br)
	return nil
}

func (r *bulkRun) write(w io.Writer, asJSON bool) error {
	v := r.view
	if asJSON {
		return writeJSON(w, v)
	}
	if len(v.Records) > 0 {
		rows := [][]string{{"ACTION", "KEY HASH", "STATE", "ATTEMPTS", "UPDATED", "ERROR"}}
		for _, rec := range v.Records {
			rows = append(rows, []string{rec.Action, rec.KeyHash, rec.State, strconv.Itoa(rec.Attempts), stamp(rec.UpdatedAt), orDash(clip(rec.Error, 60))})
		}
		if err := table(w, rows); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	what := fmt.Sprintf("released %s, left %d (changed since the scan read them)", count(v.Released, "record"), v.Left)
	if v.DryRun {
		what = fmt.Sprintf("dry run: would release %s; nothing changed", count(len(v.Records), "record"))
	}
	fmt.Fprintf(w, "%s in %s (%s)\n", what, v.Table, scanSummary(v.Scanned, v.RCU, 0, 0))
	_, err := fmt.Fprintln(w, continuation(v.Stopped, v.Next))
	return err
}
