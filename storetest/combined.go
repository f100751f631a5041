package storetest

import (
	"context"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
)

// combinedCases run for stores that implement idem.LeaseRenewer and
// idem.StepRecorder: the runner's capabilities together.
var combinedCases = []testCase{
	{"RunnerCapabilitiesTogether", "through idem.Runner with lease renewal, a bounded wait and a cache: a call waits for a crashed holder that completed a step, takes the key over at its lease's end, resumes after the step (its recorded result, the execution's downstream key), runs through renewals and records a step after its first lease's end; a duplicate is then answered from the cache, and one in another runner from the store", runnerCapabilitiesTogether},
}

func runnerCapabilitiesTogether(e *env) {
	k, payload := e.key(), []byte(`{"order":7}`)
	fpOrder, err := core.Fingerprint(payload)
	if err != nil {
		e.t.Fatal(err)
	}
	dk := []byte(core.DownstreamKey(k, "charge")) // what the crashed holder charged with
	e.crashedWithStep(k, fpOrder, core.Step{Name: "charge", Result: dk})

	clock := fakeclock.New(e.t0.Add(2 * time.Second))
	r, err := idem.New(e.s, idem.WithClock(clock.Now), idem.WithSleep(clock.Block), idem.WithRand(func() float64 { return 0.5 }),
		idem.WithLease(renewMargin, time.Hour), idem.WithLeaseRenewal(renewEvery), idem.WithWait(time.Minute), idem.WithCache(8))
	if err != nil {
		e.t.Fatal(err)
	}
	charges, emails := 0, 0
	setWaiters, stop := clock.Drive(time.Second, 1) // the waiting call
	handler := func(ctx context.Context) ([]byte, error) {
		setWaiters(2) // the handler and its renewals
		key, err := idem.DownstreamKey(ctx, "charge")
		if err != nil || key != string(dk) {
			return nil, fmt.Errorf("downstream key %q, %v; want %q", key, err, dk)
		}
		charge, err := idem.Step(ctx, "charge", func(context.Context) ([]byte, error) { charges++; return []byte("ch_again"), nil })
		if err != nil {
			return nil, err
		}
		if err := clock.Block(ctx, renewTerm+5*time.Second); err != nil { // past the first lease, renewed twice
			return nil, err
		}
		if _, err := idem.Step(ctx, "email", func(context.Context) ([]byte, error) { emails++; return nil, nil }); err != nil {
			return nil, err
		}
		return append([]byte("order charged with "), charge...), nil
	}
	out, err := r.Do(context.Background(), k, payload, handler)
	stop()
	want := "order charged with " + string(dk)
	if err != nil || out.Verdict != idem.Executed || !out.TookOver || !out.Waited || out.Attempts != 2 || string(out.Result) != want || charges != 0 || emails != 1 {
		e.t.Fatalf("Do = %s (took over %v, waited %v, attempt %d) %q, %v; charge ran %d times, email %d; want executed, taken over after waiting, attempt 2, %q, 0 and 1",
			out.Verdict, out.TookOver, out.Waited, out.Attempts, out.Result, err, charges, emails, want)
	}
	if out, err := r.Do(context.Background(), k, payload, handler); err != nil || !out.Cached || string(out.Result) != want {
		e.t.Fatalf("a duplicate in the same runner = %s cached %v %q, %v; want replayed from the cache", out.Verdict, out.Cached, out.Result, err)
	}
	other, err := idem.New(e.s, idem.WithClock(clock.Now))
	if err != nil {
		e.t.Fatal(err)
	}
	if out, err := other.Do(context.Background(), k, payload, handler); err != nil || out.Verdict != idem.Replayed || out.Cached || string(out.Result) != want {
		e.t.Fatalf("a duplicate in another runner = %s cached %v %q, %v; want replayed from the store", out.Verdict, out.Cached, out.Result, err)
	}
	if rec := e.mustGet(k, int(clock.Now().Sub(e.t0)/time.Second)); rec.Status != core.StatusSucceeded || len(rec.Steps) != 0 {
		e.t.Fatalf("stored %v with steps %q; want succeeded without steps", rec, rec.Steps)
	}
}

// crashedWithStep writes the record of a holder of k that reserved it at
// t0 with a lease until t0+15s, completed step and crashed.
func (e *env) crashedWithStep(k, fingerprint string, step core.Step) {
	e.t.Helper()
	crashed := core.Reserve(k, fingerprint, "tok-crashed", nil, e.at(0), e.at(15), retention)
	if err := e.s.Reserve(context.Background(), crashed, nil, e.at(0)); err != nil {
		e.t.Fatal(err)
	}
	e.mustRecordStep(k, "tok-crashed", step, 1)
}
