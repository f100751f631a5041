package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
	"github.com/idemgo/idem/memstore"
)

// reserveOnly is a store without the Acquirer capability: the runner
// reserves with Reserve and a decision.
type reserveOnly struct{ s *memstore.Store }

func (r reserveOnly) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	return r.s.Reserve(ctx, rec, prev, now)
}

func (r reserveOnly) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	return r.s.Complete(ctx, rec)
}

func (r reserveOnly) Get(ctx context.Context, key string, now time.Time) (core.Record, error) {
	return r.s.Get(ctx, key, now)
}

// TestAcquirerSavesTheSecondReservation runs a retry of a retryable
// failure, a takeover of an expired lease, a duplicate and a run past
// retention through a store with the Acquirer capability (memstore) and
// through the same store without it: the outcomes are the same, and with
// Acquire a retry and a takeover make two store calls, as a first run does.
func TestAcquirerSavesTheSecondReservation(t *testing.T) {
	type step struct {
		name     string
		advance  time.Duration
		fail     bool
		verdict  idem.Verdict
		attempts int
		tookOver bool
		withAcq  int // store calls with Acquire
		without  int // store calls without it
	}
	steps := []step{
		{name: "first run fails transiently", fail: true, verdict: idem.FailedTransiently, attempts: 1, withAcq: 2, without: 2},
		{name: "retry of the retryable failure", advance: time.Second, verdict: idem.Executed, attempts: 2, withAcq: 2, without: 3},
		{name: "duplicate", advance: time.Second, verdict: idem.Replayed, attempts: 2, withAcq: 1, without: 1},
		{name: "past retention", advance: 2 * time.Hour, verdict: idem.Executed, attempts: 1, withAcq: 2, without: 2},
	}
	for _, acquirer := range []bool{true, false} {
		clock := fakeclock.New(t0)
		mem := memstore.New()
		var store idem.Store = mem
		if !acquirer {
			store = reserveOnly{mem}
		}
		var seen idem.Observation
		r, err := idem.New(store, idem.WithClock(clock.Now), idem.WithSleep(clock.Sleep), idem.WithRetry(1, base, maxDelay),
			idem.WithMaxAttempts(3), idem.WithRetention(time.Hour), idem.WithLease(time.Second, time.Minute),
			idem.WithObserver(idem.ObserverFunc(func(_ context.Context, o idem.Observation) { seen = o })))
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range steps {
			clock.Advance(s.advance)
			fn := func(context.Context) ([]byte, error) { return []byte(`"ok"`), nil }
			if s.fail {
				fn = func(context.Context) ([]byte, error) { return nil, core.MarkTransient(errors.New("try later")) }
			}
			out, err := r.Do(context.Background(), "evt:acq:1", []byte(`{}`), fn)
			want := s.withAcq
			if !acquirer {
				want = s.without
			}
			if out.Verdict != s.verdict || out.Attempts != s.attempts || out.TookOver != s.tookOver || seen.StoreCalls != want {
				t.Errorf("acquirer %v, step %d (%s): %v attempt %d took over %v, %d store calls (%v); want %v attempt %d took over %v, %d store calls",
					acquirer, i, s.name, out.Verdict, out.Attempts, out.TookOver, seen.StoreCalls, err, s.verdict, s.attempts, s.tookOver, want)
			}
		}
	}
}

// TestAcquirerTakesOver checks a takeover of an expired lease through
// Acquire: two store calls in all, as a first run, reported as a takeover
// at the next attempt, and the stale holder's completion refused.
func TestAcquirerTakesOver(t *testing.T) {
	var seen idem.Observation
	f := newFixture(t, idem.WithLease(time.Second, time.Minute),
		idem.WithObserver(idem.ObserverFunc(func(_ context.Context, o idem.Observation) { seen = o })))
	fp, _ := core.Fingerprint([]byte(`{}`))
	dead := core.Reserve("evt:acq:2", fp, "dead-token", nil, t0, t0.Add(11*time.Second), time.Hour)
	if err := f.store.Reserve(context.Background(), dead, nil, t0); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(11 * time.Second)
	h := &counter{result: []byte(`"x"`)}
	out, err := f.runner.Do(f.ctx(t, 10*time.Second), "evt:acq:2", []byte(`{}`), h.handler)
	if err != nil || !out.TookOver || out.Attempts != 2 || h.n.Load() != 1 || seen.StoreCalls != 2 {
		t.Fatalf("after lease end: %+v %v after %d runs, %d store calls; want a takeover at attempt 2 in 2 calls", out, err, h.n.Load(), seen.StoreCalls)
	}
	if _, err := f.store.Complete(context.Background(), core.Succeed(dead, nil, f.clock.Now(), time.Hour)); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("late completion of the dead holder = %v, want ErrLeaseLost", err)
	}
}
