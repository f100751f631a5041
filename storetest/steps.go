package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
)

// stepCases run for stores that implement idem.StepRecorder: steps are
// recorded under the lease token only, carried to a takeover and a retry,
// and dropped by a success; through idem.Runner, a takeover resumes after
// the last completed step.
var stepCases = []testCase{
	{"StepRecordedUnderTheLease", "RecordStep appends steps in order under the holder's lease token; an identical retried write returns nil and adds nothing; the same name with another result is ErrStepConflict", func(e *env) {
		k := e.key()
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		charge, email := core.Step{Name: "charge", Result: []byte(`{"id":"ch_1"}`)}, core.Step{Name: "email"}
		e.mustRecordStep(k, "tok-a", charge, 1)
		e.mustRecordStep(k, "tok-a", email, 2)
		e.mustRecordStep(k, "tok-a", charge, 3) // a retried write
		err := e.recordStep(k, "tok-a", core.Step{Name: "charge", Result: []byte(`{"id":"ch_2"}`)}, 4)
		if !errors.Is(err, idem.ErrStepConflict) {
			e.t.Fatalf("RecordStep of a recorded name with another result = %v, want ErrStepConflict", err)
		}
		got := e.mustGet(k, 5)
		e.equalRecord("Get after the steps", got, rec)
		e.equalSteps("Get after the steps", got, charge, email)
	}},
	{"StepRefusedWithoutTheLease", "RecordStep is refused with ErrLeaseLost and writes nothing for an absent key, another lease token, a lease that ended, and a completed record", func(e *env) {
		k := e.key()
		step := core.Step{Name: "charge", Result: []byte(`1`)}
		if err := e.recordStep(k, "tok-a", step, 0); !errors.Is(err, idem.ErrLeaseLost) {
			e.t.Fatalf("RecordStep on an absent key = %v, want ErrLeaseLost", err)
		}
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		for _, c := range []struct {
			what, token string
			sec         int
		}{{"another token", "tok-b", 1}, {"at the lease's end", "tok-a", 30}, {"after the lease", "tok-a", 31}} {
			if err := e.recordStep(k, c.token, step, c.sec); !errors.Is(err, idem.ErrLeaseLost) {
				e.t.Fatalf("RecordStep with %s = %v, want ErrLeaseLost", c.what, err)
			}
		}
		e.equalSteps("Get after the refused steps", e.mustGet(k, 2))
		e.mustComplete(core.Succeed(rec, []byte(`1`), e.at(3), retention))
		if err := e.recordStep(k, "tok-a", step, 4); !errors.Is(err, idem.ErrLeaseLost) {
			e.t.Fatalf("RecordStep on a succeeded record = %v, want ErrLeaseLost", err)
		}
		e.equalSteps("Get of the succeeded record", e.mustGet(k, 5))
	}},
	{"StepsCarriedToATakeover", "a takeover of an ended lease carries the record's steps into the new reservation (Get shows them), the new holder appends after them, and the old holder's steps are refused with ErrLeaseLost", func(e *env) {
		k := e.key()
		e.mustReserve(k, "tok-old", nil, 0, 10)
		charge := core.Step{Name: "charge", Result: []byte(`"ch_1"`)}
		e.mustRecordStep(k, "tok-old", charge, 1)
		seen := e.mustGet(k, 11)
		taken := e.mustReserve(k, "tok-new", &seen, 11, 30)
		e.equalSteps("the takeover's record", taken, charge)
		e.equalSteps("Get after the takeover", e.mustGet(k, 12), charge)
		email := core.Step{Name: "email", Result: []byte(`"sent"`)}
		if err := e.recordStep(k, "tok-old", email, 12); !errors.Is(err, idem.ErrLeaseLost) {
			e.t.Fatalf("the old holder's RecordStep after the takeover = %v, want ErrLeaseLost", err)
		}
		e.mustRecordStep(k, "tok-new", email, 13)
		e.equalSteps("Get after the new holder's step", e.mustGet(k, 14), charge, email)
	}},
	{"TakeoverAfterALateStepRefused", "a takeover decided on a record that has since gained a step (the holder's write landed late) conflicts, with the record and its step, whatever the takeover's payload; decided again on that record, it carries the step", func(e *env) {
		k := e.key()
		e.mustReserve(k, "tok-old", nil, 0, 10)
		seen := e.mustGet(k, 9)
		charge := core.Step{Name: "charge", Result: []byte(`"ch_1"`)}
		e.mustRecordStep(k, "tok-old", charge, 9)
		// Another payload's reservation carries no steps.
		other := core.Reserve(k, strings.Repeat("0", len(fp)), "tok-other", &seen, e.at(11), e.at(41), retention)
		e.conflict(e.s.Reserve(context.Background(), other, &seen, e.at(11)), "tok-old", core.StatusInProgress)
		_, err := e.reserve(k, "tok-new", &seen, 11, 30)
		again := e.conflict(err, "tok-old", core.StatusInProgress)
		e.equalSteps("the conflict's record", again, charge)
		taken := e.mustReserve(k, "tok-new", &again, 12, 30)
		e.equalSteps("Get after the takeover", e.mustGet(k, 13), charge)
		e.equalSteps("the takeover's record", taken, charge)
	}},
	{"StepsKeptByFailureDroppedBySuccess", "a retryable failure keeps the steps (Get shows them) and its re-reservation carries them; a success drops them", func(e *env) {
		k := e.key()
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		charge := core.Step{Name: "charge", Result: []byte{0xff, 0x00, 'x'}}
		e.mustRecordStep(k, "tok-a", charge, 1)
		rec.Steps = []core.Step{charge}
		failed := e.mustComplete(core.Fail(rec, errors.New("throttled"), true, e.at(2), retention))
		e.equalSteps("the stored failure", failed, charge)
		seen := e.mustGet(k, 3)
		e.equalSteps("Get of the failure", seen, charge)
		retry := e.mustReserve(k, "tok-b", &seen, 4, 30)
		e.equalSteps("Get of the re-reservation", e.mustGet(k, 5), charge)
		done := e.mustComplete(core.Succeed(retry, []byte(`"ok"`), e.at(6), retention))
		e.equalSteps("the stored success", done)
		e.equalSteps("Get of the success", e.mustGet(k, 7))
	}},
	{"FailureWithAnUnconfirmedStep", "a retryable failure that carries fewer steps than the record holds (a step write landed, its answer lost) replaces the record's steps with its own (idem.Store.Complete), and its re-reservation carries those", func(e *env) {
		k := e.key()
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		mail, charge := core.Step{Name: "mail", Result: []byte(`1`)}, core.Step{Name: "charge", Result: []byte(`"ch_1"`)}
		e.mustRecordStep(k, "tok-a", mail, 1)
		e.mustRecordStep(k, "tok-a", charge, 2)
		rec.Steps = []core.Step{mail}
		failed := e.mustComplete(core.Fail(rec, errors.New("throttled"), true, e.at(3), retention))
		e.equalSteps("the stored failure", failed, mail)
		seen := e.mustGet(k, 4)
		e.equalSteps("Get of the failure", seen, mail)
		e.mustReserve(k, "tok-b", &seen, 5, 30)
		e.equalSteps("Get of the re-reservation", e.mustGet(k, 6), mail)
	}},
	{"ExpiredStepsNotCarried", "a reservation past the retention of a retryable failure with steps (Reserve, and Acquire where the store has it; the failure written in the current encoding and, where the store under test implements storetest.PreviousEncoding, in the previous one) carries no step, and the same step name with another result is then recorded", func(e *env) {
		expiredStepsDropped(e)
	}},
	{"RunnerResumesAfterTheLastStep", "through idem.Runner: a handler whose holder dies after its first step is taken over after the lease; the takeover gets the first step's recorded result without running it and runs the second; each step's function ran once", func(e *env) {
		runnerResumes(e)
	}},
	{"RunnerRetryResumesAfterTheLastStep", "through idem.Runner: a handler that fails transiently after its first step is retried in the call, under its reservation (attempt 1); the retry gets the first step's recorded result without running it", func(e *env) {
		runnerRetryResumes(e)
	}},
}

func (e *env) recordStep(key, token string, step core.Step, sec int) error {
	return e.s.(idem.StepRecorder).RecordStep(context.Background(), key, token, step, e.at(sec))
}

func (e *env) mustRecordStep(key, token string, step core.Step, sec int) {
	e.t.Helper()
	if err := e.recordStep(key, token, step, sec); err != nil {
		e.t.Fatalf("RecordStep(%s, token %s, step %s) at t0+%ds = %v, want nil", key, token, step.Name, sec, err)
	}
}

func (e *env) equalSteps(what string, rec core.Record, want ...core.Step) {
	e.t.Helper()
	ok := len(rec.Steps) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = rec.Steps[i].Name == want[i].Name && bytes.Equal(rec.Steps[i].Result, want[i].Result)
	}
	if !ok {
		e.t.Fatalf("%s: steps %q, want %q", what, rec.Steps, want)
	}
}

// stepRig is a runner over the store on a fake clock, and a handler of two
// steps that counts the runs of each step's function.
type stepRig struct {
	e      *env
	r      *idem.Runner
	clock  *fakeclock.Clock
	key    string
	charge int
	email  int
	// after, if set, runs after the first step and may end the handler.
	after func(ctx context.Context) error
}

func (e *env) stepRig() *stepRig {
	g := &stepRig{e: e, clock: fakeclock.New(e.t0), key: e.key()}
	r, err := idem.New(e.s, idem.WithClock(g.clock.Now), idem.WithSleep(g.clock.Sleep),
		idem.WithRand(func() float64 { return 0.5 }), idem.WithLease(0, runnerLease))
	if err != nil {
		e.t.Fatal(err)
	}
	g.r = r
	return g
}

func (g *stepRig) handler(ctx context.Context) ([]byte, error) {
	id, err := idem.Step(ctx, "charge", func(context.Context) ([]byte, error) {
		g.charge++
		return fmt.Appendf(nil, "ch_%d", g.charge), nil
	})
	if err != nil {
		return nil, err
	}
	if g.after != nil {
		if err := g.after(ctx); err != nil {
			return nil, err
		}
	}
	if _, err := idem.Step(ctx, "email", func(context.Context) ([]byte, error) {
		g.email++
		return nil, nil
	}); err != nil {
		return nil, err
	}
	return append([]byte("charged "), id...), nil
}

func (g *stepRig) do() (idem.Outcome, error) {
	return g.r.Do(context.Background(), g.key, []byte(`{"order":42}`), g.handler)
}

func (g *stepRig) check(what string, out idem.Outcome, err error, want idem.Verdict, charges, emails int) {
	g.e.t.Helper()
	if err != nil || out.Verdict != want || string(out.Result) != "charged ch_1" || g.charge != charges || g.email != emails {
		g.e.t.Fatalf("%s: Do = %s result %q, %v; charge ran %d times, email %d; want %s with \"charged ch_1\", %d and %d",
			what, out.Verdict, out.Result, err, g.charge, g.email, want, charges, emails)
	}
}

func runnerResumes(e *env) {
	g := e.stepRig()
	var took idem.Outcome
	var tookErr error
	died := errors.New("the holder died")
	g.after = func(context.Context) error {
		g.after = nil
		// The holder stops here (a crash, a timeout): after its lease, the
		// next delivery takes the key over while it is gone.
		g.clock.Advance(runnerLease + time.Second)
		took, tookErr = g.do()
		return died
	}
	_, err := g.do()
	if !errors.Is(err, idem.ErrLeaseLost) {
		e.t.Fatalf("the dead holder's Do = %v, want ErrLeaseLost (its record was taken over)", err)
	}
	g.check("the takeover", took, tookErr, idem.Executed, 1, 1)
	if !took.TookOver || took.Attempts != 2 {
		e.t.Fatalf("the takeover: TookOver %v attempts %d, want true and 2", took.TookOver, took.Attempts)
	}
	g.clock.Advance(time.Second)
	out, err := g.do()
	g.check("a duplicate", out, err, idem.Replayed, 1, 1)
	rec, err := e.s.Get(context.Background(), g.key, g.clock.Now())
	if err != nil || rec.Status != core.StatusSucceeded || len(rec.Steps) != 0 {
		e.t.Fatalf("stored record %v with steps %q, %v; want succeeded without steps", rec, rec.Steps, err)
	}
}

func runnerRetryResumes(e *env) {
	g := e.stepRig()
	g.after = func(context.Context) error {
		g.after = nil
		return core.MarkTransient(errors.New("mail server unavailable"))
	}
	out, err := g.do()
	g.check("Do with a transient failure after the first step", out, err, idem.Executed, 1, 1)
	if out.Attempts != 1 {
		e.t.Fatalf("attempts = %d, want 1: the call's tries are one execution", out.Attempts)
	}
}
