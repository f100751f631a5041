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

// renewCases run for stores that implement idem.LeaseRenewer: a renewal
// extends the lease and retention of its holder's record only, a retried
// renewal is recognised, and a runner with idem.WithLeaseRenewal keeps a
// long handler's key and frees a crashed holder's soon.
var renewCases = []testCase{
	{"RenewExtendsLeaseAndRetention", "RenewLease by the holder extends the lease, and the retention if it would end first, and returns the record as stored; the renewed lease blocks a takeover until its new end, when the key is free", func(e *env) {
		k := e.key()
		now := e.at(0)
		rec := core.Reserve(k, fp, "tok-a", nil, now, e.at(30), time.Minute) // expires at t0+60
		if err := e.s.Reserve(context.Background(), rec, nil, now); err != nil {
			e.t.Fatal(err)
		}
		renewed := e.mustRenew(rec, 600, 20)
		want := core.Renew(rec, e.at(600), e.at(20))
		e.equalRecord("RenewLease's record", renewed, want)
		e.equalRecord("Get after RenewLease", e.mustGet(k, 100), want)
		// The old lease end and the old retention end are past: the
		// renewed lease still blocks, with or without prev.
		_, err := e.reserve(k, "tok-b", nil, 100, 30)
		seen := e.conflict(err, "tok-a", core.StatusInProgress)
		_, err = e.reserve(k, "tok-b", &seen, 599, 30)
		e.conflict(err, "tok-a", core.StatusInProgress)
		// At its end, the renewed lease and the retention it extended
		// end together: the key is free.
		fresh := e.mustReserve(k, "tok-b", nil, 600, 30)
		if fresh.Attempts != 1 {
			e.t.Fatalf("reservation at the renewed lease's end = attempt %d, want 1", fresh.Attempts)
		}
	}},
	{"RenewRefusedWithoutTheLease", "RenewLease is refused with ErrLeaseLost and writes nothing for an absent key, another lease token, a lease taken over, a lease that has ended, and a completed record", func(e *env) {
		k := e.key()
		absent := core.Reserve(k, fp, "tok-a", nil, e.at(0), e.at(30), retention)
		e.renewLost("an absent key", absent, 60, 1)
		rec := e.mustReserve(k, "tok-a", nil, 0, 10)
		forged := rec
		forged.LeaseToken = "tok-forged"
		e.renewLost("another token", forged, 60, 1)
		e.renewLost("at the lease's end", rec, 60, 10)
		seen := e.mustGet(k, 11)
		taken := e.mustReserve(k, "tok-b", &seen, 11, 30)
		e.renewLost("after a takeover", rec, 60, 12)
		e.equalRecord("Get after refused renewals", e.mustGet(k, 13), taken)
		done := e.mustComplete(core.Succeed(taken, []byte(`1`), e.at(14), retention))
		e.renewLost("a completed record", taken, 60, 15)
		e.equalRecord("Get after a refused renewal", e.mustGet(k, 16), done)
	}},
	{"RetriedRenewalRecognised", "a renewal retried after its answer was lost, or one that would shorten the lease, returns the stored record and writes nothing", func(e *env) {
		k := e.key()
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		first := e.mustRenew(rec, 90, 10)
		again := e.mustRenew(rec, 90, 11)
		e.equalRecord("retried RenewLease's record", again, first)
		shorter := e.mustRenew(first, 50, 12)
		e.equalRecord("shorter RenewLease's record", shorter, first)
		e.equalRecord("Get after the retried renewals", e.mustGet(k, 13), first)
	}},
	{"RenewalKeepsALongHandlersKey", "a runner with WithLeaseRenewal keeps the key of a handler that runs for many leases: a duplicate gets in_progress, the lease follows the renewals, and the outcome is recorded", runnerRenewalKeepsTheKey},
	{"CrashedHolderFreesTheKey", "when a holder's renewals stop, its handler's context is cancelled (ErrLeaseLost) at its last renewal plus 2·interval, the key is free at that plus the lease margin and is taken over, and the old holder's completion is refused", runnerCrashedHolderFreesTheKey},
}

func (e *env) renewer() idem.LeaseRenewer {
	r, ok := e.s.(idem.LeaseRenewer)
	if !ok {
		e.t.Fatalf("store %T is not an idem.LeaseRenewer", e.s)
	}
	return r
}

// mustRenew renews rec's lease until t0+untilSec at t0+sec.
func (e *env) mustRenew(rec core.Record, untilSec, sec int) core.Record {
	e.t.Helper()
	got, err := e.renewer().RenewLease(context.Background(), rec, e.at(untilSec), e.at(sec))
	if err != nil {
		e.t.Fatalf("RenewLease(%s, token %s) until t0+%ds at t0+%ds = %v, want nil", rec.Key, rec.LeaseToken, untilSec, sec, err)
	}
	return got
}

func (e *env) renewLost(what string, rec core.Record, untilSec, sec int) {
	e.t.Helper()
	if _, err := e.renewer().RenewLease(context.Background(), rec, e.at(untilSec), e.at(sec)); !errors.Is(err, idem.ErrLeaseLost) {
		e.t.Fatalf("RenewLease of %s = %v, want ErrLeaseLost", what, err)
	}
}

// Timing of the runner cases: renewals every renewEvery, a lease margin of
// renewMargin, so every lease lasts renewTerm.
const (
	renewEvery  = 10 * time.Second
	renewMargin = 2 * time.Second
	renewTerm   = 2*renewEvery + renewMargin
)

// renewStore is the store under test, whose renewals fail (transiently, as
// if they no longer reached it) once crashed is set.
type renewStore struct {
	idem.Store
	crashed atomic.Bool
}

var errCrashed = errors.New("storetest: the holder has crashed: its renewals stop")

func (s *renewStore) RenewLease(ctx context.Context, rec core.Record, until, now time.Time) (core.Record, error) {
	if s.crashed.Load() {
		return core.Record{}, core.MarkTransient(errCrashed)
	}
	return s.Store.(idem.LeaseRenewer).RenewLease(ctx, rec, until, now)
}

// renewRunner is a runner with lease renewal over s, on a fake clock whose
// sleeps block until the test moves it.
func (e *env) renewRunner(s idem.Store, clock *fakeclock.Clock) *idem.Runner {
	e.t.Helper()
	r, err := idem.New(s, idem.WithClock(clock.Now), idem.WithSleep(clock.Block), idem.WithRand(func() float64 { return 0.5 }),
		idem.WithLease(renewMargin, time.Hour), idem.WithLeaseRenewal(renewEvery))
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func runnerRenewalKeepsTheKey(e *env) {
	clock := fakeclock.New(e.t0)
	r := e.renewRunner(e.s, clock)
	k := e.key()
	const intervals = 6 // a minute: the first lease ended long ago
	handler := func(ctx context.Context) ([]byte, error) {
		for range intervals {
			if err := clock.WaitBlocked(ctx, 1); err != nil { // the renewals wait for the clock
				return nil, err
			}
			clock.Advance(renewEvery)
		}
		if err := clock.WaitBlocked(ctx, 1); err != nil {
			return nil, err
		}
		_, err := r.Do(context.Background(), k, []byte(`{}`), func(context.Context) ([]byte, error) { return nil, errors.New("duplicate ran") })
		if v := idem.VerdictOf(err); v != idem.InProgress {
			return nil, fmt.Errorf("a duplicate during the handler = %s (%v), want in_progress", v, err)
		}
		rec, err := e.s.Get(context.Background(), k, clock.Now())
		if want := e.at(intervals * int(renewEvery/time.Second)).Add(renewTerm); err != nil || !rec.LeaseUntil.Equal(want) {
			return nil, fmt.Errorf("stored lease during the handler = %v, %v; want lease until %s", rec, err, want)
		}
		return []byte(`"long"`), nil
	}
	out, err := r.Do(context.Background(), k, []byte(`{}`), handler)
	if err != nil || out.Verdict != idem.Executed {
		e.t.Fatalf("Do of a handler that outlives its first lease = %s, %v; want executed", out.Verdict, err)
	}
	clock.Advance(time.Second)
	out, err = r.Do(context.Background(), k, []byte(`{}`), handler)
	if err != nil || out.Verdict != idem.Replayed || string(out.Result) != `"long"` {
		e.t.Fatalf("a duplicate afterwards = %s %q, %v; want replayed", out.Verdict, out.Result, err)
	}
}

func runnerCrashedHolderFreesTheKey(e *env) {
	clock := fakeclock.New(e.t0)
	s := &renewStore{Store: e.s}
	r := e.renewRunner(s, clock)
	k := e.key()
	started, lost, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var cause error
	var lostAt time.Time
	type result struct {
		out idem.Outcome
		err error
	}
	first := make(chan result, 1)
	go func() {
		out, err := r.Do(context.Background(), k, []byte(`{}`), func(ctx context.Context) ([]byte, error) {
			close(started)
			<-ctx.Done()
			cause, lostAt = context.Cause(ctx), clock.Now()
			close(lost)
			<-release // a handler that goes on despite the cancellation
			return []byte(`"first"`), nil
		})
		first <- result{out, err}
	}()
	<-started
	bg := context.Background()
	_ = clock.WaitBlocked(bg, 1)
	clock.Advance(renewEvery) // one renewal, at t0+10s
	_ = clock.WaitBlocked(bg, 1)
	last := clock.Now()
	s.crashed.Store(true)
	lostCtx, cancel := context.WithCancel(bg)
	defer cancel()
	go func() { <-lost; cancel() }()
	for i := 0; clock.WaitBlocked(lostCtx, 1) == nil; i++ {
		if i > 100 {
			e.t.Fatalf("the holder's lease was not lost by %s", clock.Now())
		}
		clock.Advance(time.Second)
	}
	if !errors.Is(cause, idem.ErrLeaseLost) || lostAt.After(last.Add(2*renewEvery)) {
		e.t.Fatalf("the crashed holder's context was cancelled at %s with cause %v; want by %s with ErrLeaseLost", lostAt, cause, last.Add(2*renewEvery))
	}
	e.freedAtTheTermsEnd(r, clock, k, last.Add(renewTerm), func() (idem.Outcome, error) {
		close(release)
		res := <-first
		return res.out, res.err
	})
}

// freedAtTheTermsEnd checks that the key k of a crashed holder is in
// progress until free and taken over from then on, and that the holder's
// late success (holder lets it finish) is then refused.
func (e *env) freedAtTheTermsEnd(r *idem.Runner, clock *fakeclock.Clock, k string, free time.Time, holder func() (idem.Outcome, error)) {
	bg := context.Background()
	second := func(context.Context) ([]byte, error) { return []byte(`"second"`), nil }
	clock.Advance(free.Sub(clock.Now()) - time.Millisecond)
	if _, err := r.Do(bg, k, []byte(`{}`), second); idem.VerdictOf(err) != idem.InProgress {
		e.t.Fatalf("a duplicate just before the crashed holder's lease ends = %v, want in_progress", err)
	}
	clock.Advance(time.Millisecond)
	out, err := r.Do(bg, k, []byte(`{}`), second)
	if err != nil || out.Verdict != idem.Executed || !out.TookOver || string(out.Result) != `"second"` {
		e.t.Fatalf("a duplicate at the lease's end = %s took over %v, %v; want executed, taking over", out.Verdict, out.TookOver, err)
	}
	if out, err := holder(); out.Verdict != idem.OutcomeNotRecorded || !errors.Is(err, idem.ErrLeaseLost) {
		e.t.Fatalf("the crashed holder's late success = %s, %v; want outcome_not_recorded with ErrLeaseLost", out.Verdict, err)
	}
	if rec := e.mustGet(k, int(clock.Now().Sub(e.t0)/time.Second)+1); string(rec.Result) != `"second"` {
		e.t.Fatalf("stored result = %q, want the second execution's", rec.Result)
	}
}
