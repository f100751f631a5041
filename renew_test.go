package idem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
	"github.com/idemgo/idem/memstore"
)

const (
	every  = 10 * time.Second
	margin = 2 * time.Second
	term   = 2*every + margin // the lease of a reservation or a renewal
)

// renewing is a memstore whose renewals are counted and may be failed: fail,
// if set, answers renewal number n (1-based) instead of the store when it
// returns an error. Safe for concurrent use.
type renewing struct {
	*memstore.Store
	mu    sync.Mutex
	calls []time.Time // the times renewals were asked at
	fail  func(n int) error
	done  chan error // each renewal's answer, once given (buffered)
}

func (s *renewing) RenewLease(ctx context.Context, rec core.Record, until, now time.Time) (core.Record, error) {
	s.mu.Lock()
	s.calls = append(s.calls, now)
	n, fail := len(s.calls), s.fail
	s.mu.Unlock()
	var err error
	if fail != nil {
		err = fail(n)
	}
	if err == nil {
		rec, err = s.Store.RenewLease(ctx, rec, until, now)
	}
	select {
	case s.done <- err:
	default: // no test reads this many
	}
	return rec, err
}

func (s *renewing) renewals() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.calls...)
}

type renewFixture struct {
	t     *testing.T
	clock *fakeclock.Clock
	store *renewing
	r     *idem.Runner
}

// newRenewFixture is a runner renewing every `every` over a renewing store,
// on a fake clock whose sleeps (renewals and backoffs alike) wait for the
// test to move it.
func newRenewFixture(t *testing.T, opts ...idem.Option) *renewFixture {
	t.Helper()
	f := &renewFixture{t: t, clock: fakeclock.New(t0), store: &renewing{Store: memstore.New(), done: make(chan error, 100)}}
	r, err := idem.New(f.store, append([]idem.Option{idem.WithClock(f.clock.Now), idem.WithSleep(f.clock.Block),
		idem.WithRand(func() float64 { return 0.5 }), idem.WithLease(margin, time.Hour), idem.WithLeaseRenewal(every)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.r = r
	return f
}

// run lets the clock pass by steps of step, each once the renewals wait,
// until n steps are done or ctx is done.
func (f *renewFixture) run(ctx context.Context, n int, step time.Duration) error {
	for range n {
		if err := f.clock.WaitBlocked(ctx, 1); err != nil {
			return err
		}
		f.clock.Advance(step)
	}
	return f.clock.WaitBlocked(ctx, 1)
}

func (f *renewFixture) lease(key string) time.Time {
	f.t.Helper()
	rec, err := f.store.Get(context.Background(), key, f.clock.Now())
	if err != nil {
		f.t.Fatal(err)
	}
	return rec.LeaseUntil
}

func TestWithLeaseRenewalNeedsARenewingStore(t *testing.T) {
	type plain struct{ idem.Store }
	for _, tc := range []struct {
		name  string
		store idem.Store
		every time.Duration
	}{
		{"store without LeaseRenewer", plain{memstore.New()}, time.Second},
		{"zero interval", memstore.New(), 0},
		{"interval under a millisecond", memstore.New(), time.Microsecond},
	} {
		if _, err := idem.New(tc.store, idem.WithLeaseRenewal(tc.every)); err == nil {
			t.Errorf("%s: New succeeded, want an error", tc.name)
		}
	}
	if _, err := idem.New(memstore.New(), idem.WithLeaseRenewal(time.Millisecond)); err != nil {
		t.Errorf("New with a renewing store = %v", err)
	}
}

// TestRenewalTimeline follows the lease of a handler without a deadline
// through its renewals, each step checked.
func TestRenewalTimeline(t *testing.T) {
	var seen idem.Observation
	f := newRenewFixture(t, idem.WithObserver(idem.ObserverFunc(func(_ context.Context, o idem.Observation) { seen = o })))
	var leases []time.Time
	out, err := f.r.Do(context.Background(), "evt:renew:timeline", []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		leases = append(leases, f.lease("evt:renew:timeline"))
		for range 3 {
			if err := f.run(ctx, 1, every); err != nil {
				return nil, err
			}
			leases = append(leases, f.lease("evt:renew:timeline"))
		}
		return []byte(`1`), nil
	})
	if err != nil || out.Verdict != idem.Executed {
		t.Fatalf("Do = %s, %v; want executed", out.Verdict, err)
	}
	for i, got := range leases {
		if want := t0.Add(time.Duration(i) * every).Add(term); !got.Equal(want) {
			t.Errorf("step %d: lease until %s, want %s", i, got, want)
		}
	}
	if n := len(f.store.renewals()); n != 3 || seen.StoreCalls != 5 {
		t.Errorf("renewals = %d, observed store calls %d; want 3, and 5 with the reservation and the completion", n, seen.StoreCalls)
	}
}

// TestRenewalStopsAtTheDeadline: with a deadline, the lease never ends
// after the deadline plus the margin, and renewals stop there.
func TestRenewalStopsAtTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		name      string
		deadline  time.Duration
		renewals  int
		lastLease time.Duration
	}{
		{"deadline within the first lease: no renewal", term - margin - time.Second, 0, term - time.Second},
		{"deadline after two renewals", 2*every + 5*time.Second, 1, 2*every + 5*time.Second + margin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRenewFixture(t)
			ctx := &deadlineCtx{Context: context.Background(), deadline: t0.Add(tc.deadline)}
			key := "evt:renew:deadline"
			var lease time.Time
			_, err := f.r.Do(ctx, key, []byte(`{}`), func(ctx context.Context) ([]byte, error) {
				for range tc.renewals {
					if err := f.clock.WaitBlocked(ctx, 1); err != nil {
						return nil, err
					}
					f.clock.Advance(every)
					if err := <-f.store.done; err != nil {
						return nil, fmt.Errorf("renewal: %w", err)
					}
				}
				lease = f.lease(key)
				return []byte(`1`), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(f.store.renewals()); n != tc.renewals || !lease.Equal(t0.Add(tc.lastLease)) {
				t.Errorf("renewals = %d and lease until %s, want %d and %s", n, lease, tc.renewals, t0.Add(tc.lastLease))
			}
		})
	}
}

// TestFailedRenewalsAreRetried: transient failures are retried with
// backoff within the lease, and the handler keeps running.
func TestFailedRenewalsAreRetried(t *testing.T) {
	f := newRenewFixture(t)
	f.store.fail = func(n int) error {
		if n <= 3 {
			return core.MarkTransient(fmt.Errorf("renewal %d: throttled", n))
		}
		return nil
	}
	key := "evt:renew:retried"
	var lease time.Time
	out, err := f.r.Do(context.Background(), key, []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		if err := f.run(ctx, 1, every); err != nil { // the renewal is due
			return nil, err
		}
		if err := f.run(ctx, 3, time.Second); err != nil { // three retries
			return nil, err
		}
		lease = f.lease(key)
		return []byte(`1`), ctx.Err()
	})
	if err != nil || out.Verdict != idem.Executed {
		t.Fatalf("Do = %s, %v; want executed", out.Verdict, err)
	}
	calls := f.store.renewals()
	if len(calls) < 4 || !lease.Equal(calls[3].Add(term)) {
		t.Fatalf("renewals at %v, lease until %s; want a fourth renewal that extended the lease", calls, lease)
	}
}

// TestLostLease: when the lease can no longer be held, the handler's
// context is cancelled with a cause wrapping ErrLeaseLost, and the call is
// a transient failure left to a later delivery (no in-process retry).
func TestLostLease(t *testing.T) {
	lost := errors.New("taken over")
	for _, tc := range []struct {
		name string
		fail func(n int) error
		// steps of one second from the first renewal's time
		steps int
	}{
		{"store says the lease is lost", func(int) error { return fmt.Errorf("%w: %w", idem.ErrLeaseLost, lost) }, 0},
		{"store refuses permanently", func(int) error { return core.MarkPermanent(errors.New("access denied")) }, 0},
		{"renewals fail until the lease's end", func(int) error { return core.MarkTransient(errors.New("unreachable")) }, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRenewFixture(t, idem.WithRetry(3, 100*time.Millisecond, time.Second))
			f.store.fail = tc.fail
			key := "evt:renew:lost"
			var cause error
			var at time.Time
			runs := 0
			out, err := f.r.Do(context.Background(), key, []byte(`{}`), func(ctx context.Context) ([]byte, error) {
				runs++
				_ = f.run(ctx, 1, every)
				for i := 0; i < tc.steps && ctx.Err() == nil; i++ {
					_ = f.run(ctx, 1, time.Second)
				}
				<-ctx.Done()
				cause, at = context.Cause(ctx), f.clock.Now()
				return nil, ctx.Err()
			})
			if !errors.Is(cause, idem.ErrLeaseLost) || at.After(t0.Add(2*every)) {
				t.Errorf("handler cancelled at %s with cause %v, want by %s with ErrLeaseLost", at, cause, t0.Add(2*every))
			}
			if out.Verdict != idem.FailedTransiently || !errors.Is(err, idem.ErrLeaseLost) || !errors.Is(err, idem.ErrTransientFailure) || runs != 1 {
				t.Errorf("Do = %s, %v after %d runs; want failed_transiently wrapping ErrLeaseLost, one run", out.Verdict, err, runs)
			}
			rec, gerr := f.store.Get(context.Background(), key, f.clock.Now())
			if gerr != nil || rec.Status != core.StatusFailed || !rec.Retryable {
				t.Errorf("stored = %v, %v; want a retryable failure", rec, gerr)
			}
		})
	}
}

// TestRenewalEndsWithAPanic: a handler's panic ends its renewals before it
// leaves Do.
func TestRenewalEndsWithAPanic(t *testing.T) {
	f := newRenewFixture(t)
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the handler's panic", p)
			}
		}()
		_, _ = f.r.Do(context.Background(), "evt:renew:panic", []byte(`{}`), func(ctx context.Context) ([]byte, error) {
			_ = f.run(ctx, 1, every)
			panic("boom")
		})
	}()
	before := len(f.store.renewals())
	f.clock.Advance(10 * every)
	if after := len(f.store.renewals()); before != 1 || after != before {
		t.Errorf("renewals = %d during the handler, %d after its panic; want 1 and no more", before, after)
	}
}

// TestRetryRenewsTheLeaseHeld: an in-process retry runs under the call's
// reservation (its token and attempt), with the lease the last renewal
// left, and renews that lease in turn.
func TestRetryRenewsTheLeaseHeld(t *testing.T) {
	f := newRenewFixture(t, idem.WithRetryReserve(0), idem.WithBackoff(func(int, float64) time.Duration { return 0 }))
	key := "evt:renew:retry"
	var held []core.Record
	runs := 0
	out, err := f.r.Do(context.Background(), key, []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		runs++
		rec, err := f.store.Get(context.Background(), key, f.clock.Now())
		if err != nil {
			return nil, err
		}
		held = append(held, rec)
		step := every // to the first renewal, one interval after the reservation
		if runs > 1 {
			step = every - 3*time.Second // to the next, one interval after the last
		}
		if err := f.run(ctx, 1, step); err != nil {
			return nil, err
		}
		if runs == 1 {
			f.clock.Advance(3 * time.Second) // before the next renewal is due
			return nil, core.MarkTransient(errors.New("flaky"))
		}
		return []byte(`2`), nil
	})
	if err != nil || out.Verdict != idem.Executed || runs != 2 || out.Attempts != 1 {
		t.Fatalf("Do = %+v, %v after %d runs; want executed at attempt 1 after 2 runs", out, err, runs)
	}
	if len(held) != 2 || held[1].LeaseToken != held[0].LeaseToken || held[1].Attempts != 1 || held[1].Status != core.StatusInProgress {
		t.Fatalf("records at each try's start = %v, want the same reservation (token, attempt 1), in progress", held)
	}
	if want := t0.Add(every + term); !held[1].LeaseUntil.Equal(want) {
		t.Errorf("the retry started with a lease until %s, want the first try's renewal's, %s", held[1].LeaseUntil, want)
	}
	if got, want := f.store.renewals(), []time.Time{t0.Add(every), t0.Add(2 * every)}; len(got) != 2 || !got[0].Equal(want[0]) || !got[1].Equal(want[1]) {
		t.Errorf("renewals at %v, want %v: the retry renews the lease held, when its renewal is due", got, want)
	}
}
