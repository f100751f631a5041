package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
)

// rig is an idem.Runner over the faulted store, on a fake clock that starts
// at the case's t0, with a handler that counts its runs, and one key.
type rig struct {
	e     *fenv
	r     *idem.Runner
	clock *fakeclock.Clock
	key   string
	runs  atomic.Int32
	// during, if set, is called while the handler runs: after the
	// reservation, before the completion.
	during func()
	// flaky is the number of first runs that fail transiently.
	flaky int32
}

// rig returns a new rig, its runner made with opts after its own options.
func (e *fenv) rig(opts ...idem.Option) *rig {
	e.t.Helper()
	g := &rig{e: e, clock: fakeclock.New(e.t0), key: e.key()}
	r, err := idem.New(e.s, append([]idem.Option{idem.WithClock(g.clock.Now), idem.WithSleep(g.clock.Sleep),
		idem.WithRand(func() float64 { return 0.5 }), idem.WithLease(0, runnerLease)}, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	g.r = r
	return g
}

func (g *rig) handler(context.Context) ([]byte, error) {
	n := g.runs.Add(1)
	if g.during != nil {
		g.during()
	}
	if n <= g.flaky {
		return nil, core.MarkTransient(fmt.Errorf("run %d: flaky", n))
	}
	return fmt.Appendf(nil, `"run %d"`, n), nil
}

// do calls Do on the rig's key and returns its verdict and result. A call
// that failed must have failed as the faults allow: its outcome not recorded
// (ErrOutcomeNotRecorded, not ErrLeaseLost: the lease is the caller's own),
// in progress, or a transient store error before the handler ran.
func (g *rig) do() (idem.Verdict, []byte) {
	g.e.t.Helper()
	out, err := g.r.Do(context.Background(), g.key, []byte(`{}`), g.handler)
	v := out.Verdict
	switch {
	case err == nil && (v == idem.Executed || v == idem.Replayed):
		return v, out.Result
	case v == idem.OutcomeNotRecorded && errors.Is(err, idem.ErrOutcomeNotRecorded) && !errors.Is(err, idem.ErrLeaseLost),
		v == idem.InProgress,
		v == idem.StoreFailed && g.e.transient(err):
		return v, nil
	}
	g.e.t.Fatalf("Do = verdict %s, %v (classified %s); want executed, replayed, in_progress, outcome_not_recorded (ErrOutcomeNotRecorded) or store_failed with a transient error",
		v, err, core.Classify(err, core.DefaultClassifiers...))
	return v, nil
}

// want calls Do and fails the test unless it came to want with the result
// of run number run (0: no result), and the handler has run runs times in
// all.
func (g *rig) want(step string, want idem.Verdict, run, runs int) {
	g.e.t.Helper()
	got, result := g.do()
	wantResult := ""
	if run > 0 {
		wantResult = fmt.Sprintf(`"run %d"`, run)
	}
	if got != want || string(result) != wantResult {
		g.e.t.Fatalf("%s: Do = %s with result %q, want %s with %q", step, got, result, want, wantResult)
	}
	if n := g.runs.Load(); int(n) != runs {
		g.e.t.Fatalf("%s: the handler ran %d times, want %d", step, n, runs)
	}
}

// stored fails the test unless the key's record is a success with the
// result of run number run.
func (g *rig) stored(run int) {
	g.e.t.Helper()
	rec, err := g.e.s.Get(context.Background(), g.key, g.clock.Now())
	if want := fmt.Sprintf(`"run %d"`, run); err != nil || rec.Status != core.StatusSucceeded || string(rec.Result) != want {
		g.e.t.Fatalf("stored record = %v result %q, %v; want succeeded with %s", rec, rec.Result, err, want)
	}
}

// reached fails the test unless a write fault reached the store's transport.
func (g *rig) reached() {
	g.e.t.Helper()
	if g.e.f.Injected(Write) == 0 {
		g.e.t.Fatalf("no write reached the store's transport under the fault: newStore must build a store whose every request asks Faults.Next")
	}
}

func runnerReserveNotApplied(e *fenv, fault Fault) {
	g := e.rig()
	var got idem.Verdict
	e.under(fault, NoFault, func() { got, _ = g.do() })
	if got != idem.StoreFailed || g.runs.Load() != 0 {
		e.t.Fatalf("Do with its reservation under %s = %s, the handler ran %d times; want store_failed and no run", fault, got, g.runs.Load())
	}
	e.state("after the refused reservation", g.key, 0, nil)
	g.clock.Advance(time.Second)
	g.want("the next delivery", idem.Executed, 1, 1)
	g.clock.Advance(time.Second)
	g.want("a duplicate", idem.Replayed, 1, 1)
}

func runnerReserveAnswerLost(e *fenv, _ Fault) {
	for _, reads := range []Fault{NoFault, FailBefore} {
		g := e.rig()
		g.during = e.f.Clear // the faults end when the handler runs
		var first idem.Verdict
		e.under(AnswerLost, reads, func() { first, _ = g.do() })
		g.during = nil
		switch first {
		case idem.Executed:
			g.clock.Advance(time.Second)
			g.want("a duplicate", idem.Replayed, 1, 1)
			g.clock.Advance(runnerLease + time.Second)
			g.want("a duplicate after the lease", idem.Replayed, 1, 1)
		case idem.StoreFailed:
			g.clock.Advance(time.Second)
			g.want("a duplicate while the lost reservation's lease lives", idem.InProgress, 0, 0)
			g.clock.Advance(runnerLease + time.Second)
			g.want("a delivery after the lease", idem.Executed, 1, 1)
		default:
			e.t.Fatalf("reads %s: Do with its reservation's answer lost = %s, want executed or store_failed", reads, first)
		}
		g.stored(1)
	}
}

func runnerCompleteNotApplied(e *fenv, fault Fault) {
	g := e.rig()
	g.during = func() { e.f.Set(Write, fault) }
	g.want("Do with its completion refused once", idem.Executed, 1, 1)
	g.reached()
	g.during = nil
	g.clock.Advance(time.Second)
	g.want("a duplicate", idem.Replayed, 1, 1)
	g.stored(1)
}

func runnerCompleteNeverApplied(e *fenv, fault Fault) {
	g := e.rig()
	g.during = func() { e.f.Always(Write, fault) }
	g.want("Do with every completion refused", idem.OutcomeNotRecorded, 0, 1)
	g.reached()
	g.during = nil
	e.f.Clear()
	g.clock.Advance(time.Second)
	g.want("a duplicate while the lease lives", idem.InProgress, 0, 1)
	g.clock.Advance(runnerLease + time.Second)
	g.want("a delivery after the lease", idem.Executed, 2, 2)
	g.clock.Advance(time.Second)
	g.want("a duplicate", idem.Replayed, 2, 2)
	g.stored(2)
}

func runnerCompleteAnswerLost(e *fenv, _ Fault) {
	g := e.rig()
	g.during = func() { e.f.Set(Write, AnswerLost) }
	g.want("Do with its completion's answer lost once", idem.Executed, 1, 1)
	g.reached()
	g.during = nil
	g.clock.Advance(time.Second)
	g.want("a duplicate", idem.Replayed, 1, 1)
	g.stored(1)
}

func runnerCompleteAnswerLostAlways(e *fenv, _ Fault) {
	g := e.rig()
	g.during = func() { e.f.Always(Write, AnswerLost) }
	got, result := g.do()
	g.reached()
	g.during = nil
	e.f.Clear()
	if (got != idem.Executed || string(result) != `"run 1"`) && got != idem.OutcomeNotRecorded {
		e.t.Fatalf("Do with every completion's answer lost = %s with result %q, want executed with \"run 1\" or outcome_not_recorded", got, result)
	}
	g.clock.Advance(time.Second)
	g.want("a duplicate", idem.Replayed, 1, 1)
	g.stored(1)
}

func runnerRetryAnswersLost(e *fenv, _ Fault) {
	g := e.rig()
	g.flaky = 1
	between := false // a write fault was set for the time between the tries
	g.during = func() {
		switch g.runs.Load() {
		case 1:
			// A write between the tries would meet this fault.
			e.f.Set(Write, FailBefore)
			between = true
		case 2:
			if n := e.f.Pending(Write); between && n != 1 {
				e.t.Errorf("the store was written between the tries (%d of 1 write faults left)", n)
			}
			e.f.Clear()
			e.f.Set(Write, AnswerLost) // the retry's success
		}
	}
	out, err := g.r.Do(context.Background(), g.key, []byte(`{}`), g.handler)
	g.during = nil
	if n := e.f.Pending(Write); n > 0 {
		e.t.Fatalf("the retry's completion never reached the store's transport (Do = %s, %v)", out.Verdict, err)
	}
	if err != nil || out.Verdict != idem.Executed || string(out.Result) != `"run 2"` || out.Attempts != 1 || g.runs.Load() != 2 {
		e.t.Fatalf("Do = %s at attempt %d with result %q, %v, the handler ran %d times; want executed at attempt 1 with \"run 2\" after 2 runs",
			out.Verdict, out.Attempts, out.Result, err, g.runs.Load())
	}
	g.clock.Advance(time.Second)
	g.want("a duplicate", idem.Replayed, 2, 2)
	g.stored(2)
}
