package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
)

const (
	// defaultMaxRCU bounds the read capacity one list or stats consumes,
	// unless --max-rcu says otherwise.
	defaultMaxRCU = 1000
	// maxPageItems bounds the items one Scan call evaluates.
	maxPageItems = 1000
	// assumedRCUPerItem is what an item is assumed to cost before a page
	// has shown the table's real cost: an eventually consistent read of an
	// item of up to 4 KB. It also stands in for a server that reports no
	// consumed capacity, so that the bound still holds there.
	assumedRCUPerItem = 0.5
)

// Reasons a scan stopped before the end of the table.
const (
	stoppedLimit       = "limit"
	stoppedMax         = "max"
	stoppedMaxRCU      = "max-rcu"
	stoppedInterrupted = "interrupted"
)

// scanFlags bound a scan.
type scanFlags struct {
	next   string
	maxRCU float64
}

func (s *scanFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.next, "next", "", "continue a scan where an earlier one stopped (the `token` it printed)")
	fs.Float64Var(&s.maxRCU, "max-rcu", defaultMaxRCU, "stop once the scan has consumed this many read capacity `units` (0: no bound)")
}

func (s *scanFlags) check() error {
	if s.maxRCU < 0 {
		return usageErrorf("--max-rcu %v: want 0 (no bound) or more", s.maxRCU)
	}
	return nil
}

// scanner reads the table page by page within a read capacity budget,
// sizing each Scan call from the capacity per item seen so far, so that
// the budget is passed by at most one call's worth.
type scanner struct {
	store    *ddbstore.Store
	status   core.Status // server-side filter; empty for all
	maxRCU   float64     // 0: no bound
	progress *progress

	next             string
	consumed         float64
	scanned, corrupt int
	// apart are the results of the records read that are kept outside
	// their record (ddbstore.ListPage.ResultsApart), by key.
	apart map[string]ddbstore.ResultApart
}

func newScanner(store *ddbstore.Store, f scanFlags, status core.Status, p *progress) *scanner {
	return &scanner{store: store, status: status, maxRCU: f.maxRCU, next: f.next, progress: p}
}

// page reads the next page, of at most want items (0: no bound but the
// budget's).
func (s *scanner) page(ctx context.Context, want int) ([]core.Record, error) {
	p, err := s.store.List(ctx, ddbstore.ListInput{Limit: s.limit(want), Next: s.next, Status: s.status})
	if err != nil {
		return nil, err
	}
	s.account(p.Next, p.ConsumedRCU, p.Scanned, p.Corrupt)
	for k, a := range p.ResultsApart {
		if s.apart == nil {
			s.apart = map[string]ddbstore.ResultApart{}
		}
		s.apart[k] = a
	}
	return p.Records, nil
}

// expired reads the next page of the store's items past retention at now
// (ddbstore.Store.ScanExpired), of at most want items evaluated, and the
// number of the store's items it returned that are not.
func (s *scanner) expired(ctx context.Context, want int, now time.Time) ([]ddbstore.Expired, int, error) {
	p, err := s.store.ScanExpired(ctx, ddbstore.ListInput{Limit: s.limit(want), Next: s.next}, now)
	if err != nil {
		return nil, 0, err
	}
	s.account(p.Next, p.ConsumedRCU, p.Scanned, p.Corrupt)
	return p.Items, p.Live, nil
}

// account adds a page to the scan: its continuation, its cost (assumed
// where the server reports none), the items it evaluated and those that did
// not decode.
func (s *scanner) account(next string, rcu float64, scanned, corrupt int) {
	if rcu == 0 && scanned > 0 {
		rcu = assumedRCUPerItem * float64(scanned)
	}
	s.next = next
	s.consumed += rcu
	s.scanned += scanned
	s.corrupt += corrupt
}

// view is viewOf(rec, now), with the size and place of a result kept
// outside its record, which the scan did not read.
func (s *scanner) view(rec core.Record, now time.Time) recordView {
	v := viewOf(rec, now)
	if a, ok := s.apart[rec.Key]; ok {
		v.ResultBytes, v.ResultKept = int(a.Size), "result item"
		if a.InBlobStore {
			v.ResultKept = "blob store"
		}
	}
	return v
}

// resultSize is the size of rec's result: as stored where it is kept
// outside the record, and else as read.
func (s *scanner) resultSize(rec core.Record) int {
	if a, ok := s.apart[rec.Key]; ok {
		return int(a.Size)
	}
	return len(rec.Result)
}

func (s *scanner) limit(want int) int32 {
	n := maxPageItems
	if want > 0 {
		n = min(n, want)
	}
	if s.maxRCU > 0 {
		perItem := assumedRCUPerItem
		if s.scanned > 0 && s.consumed > 0 {
			perItem = s.consumed / float64(s.scanned)
		}
		n = min(n, max(1, int((s.maxRCU-s.consumed)/perItem)))
	}
	return int32(n)
}

// rest is how many items the next page of a run may evaluate that has taken
// done items of at most most (0: no bound): the rest, so that its token to
// continue skips none; 0 for no bound.
func rest(most, done int) int {
	if most > 0 {
		return most - done
	}
	return 0
}

// stops reports whether a run that has taken done items of at most most (0:
// no bound) stops after the page just read, and why: at the table's end
// (""), at --max (stoppedMax), or at the budget (stoppedMaxRCU).
func (s *scanner) stops(most, done int) (bool, string) {
	switch {
	case s.next == "":
		return true, ""
	case most > 0 && done >= most:
		return true, stoppedMax
	case s.overBudget():
		return true, stoppedMaxRCU
	}
	return false, ""
}

// overBudget reports whether the budget is used up.
func (s *scanner) overBudget() bool { return s.maxRCU > 0 && s.consumed >= s.maxRCU }

// Progress is shown once a scan has run for progressAfter: on a terminal,
// one line rewritten after each page; elsewhere (a log file, a pipe), a
// line at most every progressEvery.
const (
	progressAfter = time.Second
	progressEvery = 5 * time.Second
)

// progress writes what a scan (or a redrive, a bulk release) has done so
// far to stderr, by the command's clock, unless it is off (--json).
type progress struct {
	w     io.Writer
	now   func() time.Time
	on    bool
	tty   bool
	start time.Time
	last  time.Time // when a line was last written; zero before the first
	shown bool      // a terminal line is on screen
}

// newProgress returns the progress of a scan that starts now; on is false
// to write nothing.
func newProgress(w io.Writer, now func() time.Time, on bool) *progress {
	return &progress{w: w, now: now, on: on, tty: isTerminal(w), start: now()}
}

func (p *progress) update(scanned int, rcu float64, matched int) {
	p.show(func(elapsed time.Duration) string {
		return fmt.Sprintf("scanning: %d items, %.1f RCU, %d matching, %s", scanned, rcu, matched, elapsed.Round(time.Second))
	})
}

// show writes the line that line makes of the time elapsed, when it is
// time to (see progress).
func (p *progress) show(line func(elapsed time.Duration) string) {
	if !p.on {
		return
	}
	t := p.now()
	elapsed := t.Sub(p.start)
	if elapsed < progressAfter {
		return
	}
	switch {
	case p.tty:
		fmt.Fprintf(p.w, "\r\033[K%s", line(elapsed))
		p.shown = true
	case p.last.IsZero() || t.Sub(p.last) >= progressEvery:
		fmt.Fprintf(p.w, "idem: %s\n", line(elapsed))
	default:
		return
	}
	p.last = t
}

// clear erases the terminal line, if one was written.
func (p *progress) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
