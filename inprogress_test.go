package idem_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
	"github.com/idemgo/idem/memstore"
)

// discard is a logger that records nothing: a storm logs every call.
var discard = slog.New(slog.DiscardHandler)

// callStore counts the store calls that reach memstore (Acquire included)
// and can fail them: while fail is set, every Acquire fails with a
// transient error, not applied (a throttled write).
type callStore struct {
	*memstore.Store
	writes, reads atomic.Int64
	fail          atomic.Bool
	// during, if set, is called inside each Acquire before it is applied;
	// onRead inside each Get.
	during, onRead func()
}

var errThrottled = core.MarkTransient(errors.New("throttled"))

func (s *callStore) Acquire(ctx context.Context, rec core.Record, now time.Time, p core.Policy) (core.Record, *core.Record, error) {
	s.writes.Add(1)
	if s.during != nil {
		s.during()
	}
	if s.fail.Load() {
		return core.Record{}, nil, errThrottled
	}
	return s.Store.Acquire(ctx, rec, now, p)
}

func (s *callStore) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	s.writes.Add(1)
	return s.Store.Reserve(ctx, rec, prev, now)
}

func (s *callStore) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	s.writes.Add(1)
	return s.Store.Complete(ctx, rec)
}

func (s *callStore) Get(ctx context.Context, key string, now time.Time) (core.Record, error) {
	s.reads.Add(1)
	if s.onRead != nil {
		s.onRead()
	}
	return s.Store.Get(ctx, key, now)
}

// stormLease is the lease of the storm's holder: a Lambda's 30-second
// deadline plus the default margin.
const stormLease = 30*time.Second + idem.DefaultLeaseMargin

// holdElsewhere writes key in progress in s at now, for lease, as another
// process would, and returns the record.
func holdElsewhere(t *testing.T, s idem.Store, key, payload string, now time.Time, lease time.Duration) core.Record {
	t.Helper()
	fp, err := core.Fingerprint([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	rec := core.Reserve(key, fp, "tok-elsewhere", nil, now, now.Add(lease), time.Hour)
	if err := s.Reserve(context.Background(), rec, nil, now); err != nil {
		t.Fatal(err)
	}
	return rec
}

// wantInProgress fails the test unless err is *core.InProgressError with
// RetryAt at, the lease end (from the memory: at or before it, the next
// recheck), and out does not say the handler ran.
func wantInProgress(t *testing.T, what string, out idem.Outcome, err error, at time.Time) {
	t.Helper()
	var ipe *core.InProgressError
	if !errors.As(err, &ipe) || out.Verdict != idem.InProgress || out.Replayed ||
		!(ipe.RetryAt.Equal(at) || out.Cached && ipe.RetryAt.Before(at) && !ipe.RetryAt.IsZero()) {
		t.Fatalf("%s = %s cached %v, %v; want in_progress with RetryAt %s (the lease end; from memory, the next recheck before it)", what, out.Verdict, out.Cached, err, at)
	}
}

// TestStormCostsAFewWritesPerSecondOfLease delivers one key 10,000 times to
// 4 runners (sandboxes), 2 ms apart, while another process holds it under a
// 35-second lease. Every delivery is answered in progress with the lease
// end, and the storm costs at most about one store write per sandbox per
// recheck interval: far under 5 writes per second of lease, where a write
// per delivery would be 285.
func TestStormCostsAFewWritesPerSecondOfLease(t *testing.T) {
	const n, sandboxes, gap = 10000, 4, 2 * time.Millisecond
	clock := fakeclock.New(t0)
	s := &callStore{Store: memstore.New()}
	key, payload := "evt:storm:charge", `{"id":"storm","amount":100}`
	held := holdElsewhere(t, s.Store, key, payload, t0, stormLease)
	runners := make([]*idem.Runner, sandboxes)
	for i := range runners {
		r, err := idem.New(s, idem.WithClock(clock.Now), idem.WithLogger(discard))
		if err != nil {
			t.Fatal(err)
		}
		runners[i] = r
	}
	runs := 0
	for i := range n {
		out, err := runners[i%sandboxes].Do(context.Background(), key, []byte(payload), func(context.Context) ([]byte, error) {
			runs++
			return nil, nil
		})
		wantInProgress(t, fmt.Sprintf("delivery %d", i), out, err, held.LeaseUntil)
		clock.Advance(gap)
	}
	writes := s.writes.Load()
	perSecond := float64(writes) / stormLease.Seconds()
	t.Logf("%d deliveries over %v to %d sandboxes: %d store writes (%.4f per delivery, %.2f per second of a %v lease)",
		n, time.Duration(n)*gap, sandboxes, writes, float64(writes)/n, perSecond, stormLease)
	if runs != 0 {
		t.Fatalf("the handler ran %d times, want 0", runs)
	}
	span := time.Duration(n) * gap
	bound := int64(sandboxes) * (int64(span/idem.DefaultInProgressRecheck) + 1)
	if perSecond > 5 || writes > bound {
		t.Fatalf("the storm cost %d store writes (%.1f per second of lease), want at most %d (one per sandbox per %v recheck) and 5 per second of lease",
			writes, perSecond, bound, idem.DefaultInProgressRecheck)
	}
}

// memoryFixture is a runner over a counting memstore on a fake clock, with
// a key held in progress by another process.
type memoryFixture struct {
	t       *testing.T
	clock   *fakeclock.Clock
	s       *callStore
	r       *idem.Runner
	key     string
	payload string
	held    core.Record
	runs    atomic.Int32
}

func newMemoryFixture(t *testing.T, opts ...idem.Option) *memoryFixture {
	t.Helper()
	f := &memoryFixture{t: t, clock: fakeclock.New(t0), s: &callStore{Store: memstore.New()}, key: "evt:mem:notify", payload: `{"id":"mem"}`}
	f.held = holdElsewhere(t, f.s.Store, f.key, f.payload, t0, stormLease)
	all := append([]idem.Option{idem.WithClock(f.clock.Now), idem.WithSleep(f.clock.Sleep), idem.WithLogger(discard),
		idem.WithRand(func() float64 { return math.Nextafter(1, 0) })}, opts...)
	r, err := idem.New(f.s, all...)
	if err != nil {
		t.Fatal(err)
	}
	f.r = r
	return f
}

func (f *memoryFixture) do(ctx context.Context, payload string) (idem.Outcome, error) {
	return f.r.Do(ctx, f.key, []byte(payload), func(context.Context) ([]byte, error) {
		n := f.runs.Add(1)
		return fmt.Appendf(nil, `"run %d"`, n), nil
	})
}

// wantCalls fails the test unless the store's writes are writes.
func (f *memoryFixture) wantWrites(what string, writes int64) {
	f.t.Helper()
	if got := f.s.writes.Load(); got != writes {
		f.t.Fatalf("%s: %d store writes in all, want %d", what, got, writes)
	}
}

// completeElsewhere records the holder's success in the store.
func (f *memoryFixture) completeElsewhere(result string) {
	f.t.Helper()
	if _, err := f.s.Store.Complete(context.Background(), core.Succeed(f.held, []byte(result), f.clock.Now(), time.Hour)); err != nil {
		f.t.Fatal(err)
	}
}

// TestInProgressMemoryAnswersOnlyInProgress: the runner answers a key it
// saw in progress from memory, with the lease end, until the recheck; a
// success recorded elsewhere meanwhile is replayed from the store at the
// recheck, never from memory; another payload is key reused (from the
// store); and once the lease has ended, the key is taken over, not answered
// from memory.
func TestInProgressMemoryAnswersOnlyInProgress(t *testing.T) {
	t.Run("replay after the recheck", func(t *testing.T) {
		f := newMemoryFixture(t)
		out, err := f.do(context.Background(), f.payload)
		wantInProgress(t, "first duplicate", out, err, f.held.LeaseUntil)
		f.wantWrites("first duplicate", 1)
		f.clock.Advance(500 * time.Millisecond)
		out, err = f.do(context.Background(), f.payload)
		wantInProgress(t, "second duplicate", out, err, f.held.LeaseUntil)
		if !out.Cached {
			t.Fatalf("second duplicate: Cached = false, want the memory's answer")
		}
		var ipe *core.InProgressError
		if recheck := t0.Add(idem.DefaultInProgressRecheck); !errors.As(err, &ipe) || !ipe.RetryAt.Equal(recheck) {
			t.Fatalf("second duplicate: %v, want RetryAt %s: the memory's next recheck, when a retry may find the outcome", err, recheck)
		}
		f.wantWrites("second duplicate", 1)
		f.completeElsewhere(`"done"`)
		out, err = f.do(context.Background(), f.payload)
		wantInProgress(t, "a duplicate within the recheck after the outcome", out, err, f.held.LeaseUntil)
		f.clock.Advance(idem.DefaultInProgressRecheck)
		out, err = f.do(context.Background(), f.payload)
		if err != nil || out.Verdict != idem.Replayed || out.Cached || string(out.Result) != `"done"` {
			t.Fatalf("a duplicate after the recheck = %s cached %v %q, %v; want the stored success replayed from the store", out.Verdict, out.Cached, out.Result, err)
		}
		f.wantWrites("the recheck", 2)
		if out, err = f.do(context.Background(), f.payload); out.Verdict != idem.Replayed || f.runs.Load() != 0 {
			t.Fatalf("the next duplicate = %s, %v after %d runs; want a replay (the key forgotten), no run", out.Verdict, err, f.runs.Load())
		}
	})
	t.Run("another payload", func(t *testing.T) {
		f := newMemoryFixture(t)
		_, _ = f.do(context.Background(), f.payload)
		_, err := f.do(context.Background(), `{"id":"other"}`)
		if !errors.Is(err, core.ErrKeyReused) {
			t.Fatalf("another payload = %v, want core.ErrKeyReused", err)
		}
		f.wantWrites("another payload", 2)
		out, err := f.do(context.Background(), f.payload)
		wantInProgress(t, "the first payload again", out, err, f.held.LeaseUntil)
		f.wantWrites("the first payload again", 2)
	})
	t.Run("lease end", func(t *testing.T) {
		f := newMemoryFixture(t, idem.WithInProgressRecheck(time.Hour))
		_, _ = f.do(context.Background(), f.payload)
		f.clock.Advance(stormLease - time.Millisecond)
		out, err := f.do(context.Background(), f.payload)
		wantInProgress(t, "just before the lease end", out, err, f.held.LeaseUntil)
		f.wantWrites("until the lease end", 1)
		f.clock.Advance(time.Millisecond)
		out, err = f.do(context.Background(), f.payload)
		if err != nil || out.Verdict != idem.Executed || !out.TookOver || f.runs.Load() != 1 {
			t.Fatalf("at the lease end = %s took over %v, %v after %d runs; want a takeover that runs the handler", out.Verdict, out.TookOver, err, f.runs.Load())
		}
	})
	t.Run("off", func(t *testing.T) {
		f := newMemoryFixture(t, idem.WithInProgressMemory(0))
		for i := range 5 {
			out, err := f.do(context.Background(), f.payload)
			wantInProgress(t, fmt.Sprintf("duplicate %d", i), out, err, f.held.LeaseUntil)
		}
		f.wantWrites("without the memory", 5)
	})
}

// TestInProgressMemoryRespectsWaits: a call with a wait is not answered from
// memory: it asks the store, waits within its bound, and replays the
// outcome recorded elsewhere while it waited, within the recheck interval.
func TestInProgressMemoryRespectsWaits(t *testing.T) {
	f := newMemoryFixture(t)
	_, _ = f.do(context.Background(), f.payload)
	f.s.onRead = func() { f.s.onRead = nil; f.completeElsewhere(`"done"`) }
	out, err := f.do(idem.ContextWithWait(context.Background(), 5*time.Second), f.payload)
	if err != nil || out.Verdict != idem.Replayed || !out.Waited || out.Cached || string(out.Result) != `"done"` {
		t.Fatalf("a waiting duplicate = %s waited %v cached %v %q, %v; want the success replayed after a wait", out.Verdict, out.Waited, out.Cached, out.Result, err)
	}
	if f.s.reads.Load() == 0 || f.clock.Now().Sub(t0) >= idem.DefaultInProgressRecheck {
		t.Fatalf("the waiter read %d times and ended at t0+%v; want reads within the recheck interval", f.s.reads.Load(), f.clock.Now().Sub(t0))
	}
	f.wantWrites("a waiter", 2)
}

// TestInProgressMemoryKnowsItsOwnKey: while a call of the runner executes a
// key, duplicates in the same runner are answered in progress with its
// lease end (the last renewal's, with WithLeaseRenewal) and no store call,
// whatever the handler does (stage writes, record steps); once it has
// recorded its outcome, the next duplicate reads the store, or the cache,
// and replays it, with no recheck to wait for.
func TestInProgressMemoryKnowsItsOwnKey(t *testing.T) {
	const every = 10 * time.Second
	lease := t0.Add(30*time.Second + idem.DefaultLeaseMargin)
	for _, tc := range []struct {
		name string
		opts func(clock *fakeclock.Clock) []idem.Option
		// during runs in the handler before the duplicate.
		during func(ctx context.Context, clock *fakeclock.Clock) error
		// retryAt is the lease end the duplicate gets; cached, that the
		// duplicate after the holder is answered from the cache.
		retryAt time.Time
		cached  bool
		// deadline is the holder's (default 30 s).
		deadline time.Duration
	}{
		{name: "plain", retryAt: lease},
		{name: "cache", opts: func(*fakeclock.Clock) []idem.Option { return []idem.Option{idem.WithCache(8)} }, retryAt: lease, cached: true},
		{name: "staged writes", retryAt: lease, during: func(ctx context.Context, _ *fakeclock.Clock) error {
			return memstore.Stage(ctx, memstore.Write{Apply: func() {}})
		}},
		{name: "steps", retryAt: lease, during: func(ctx context.Context, _ *fakeclock.Clock) error {
			_, err := idem.Step(ctx, "charge", func(context.Context) ([]byte, error) { return []byte(`1`), nil })
			return err
		}},
		{name: "lease renewal", retryAt: t0.Add(3*every + 2*every + idem.DefaultLeaseMargin), deadline: time.Hour,
			opts: func(clock *fakeclock.Clock) []idem.Option {
				return []idem.Option{idem.WithLeaseRenewal(every), idem.WithSleep(clock.Block)}
			},
			during: func(ctx context.Context, clock *fakeclock.Clock) error {
				for range 3 { // three renewals: the first lease ended long ago
					if err := clock.WaitBlocked(ctx, 1); err != nil {
						return err
					}
					clock.Advance(every)
				}
				return clock.WaitBlocked(ctx, 1)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := fakeclock.New(t0)
			s := &callStore{Store: memstore.New()}
			opts := []idem.Option{idem.WithClock(clock.Now), idem.WithLogger(discard)}
			if tc.opts != nil {
				opts = append(opts, tc.opts(clock)...)
			}
			r, err := idem.New(s, opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx := (&fixture{clock: clock}).ctx(t, cmp.Or(tc.deadline, 30*time.Second))
			key, payload := "evt:own:notify", []byte(`{"id":"own"}`)
			never := func(context.Context) ([]byte, error) { return nil, errors.New("ran twice") }
			var inner idem.Outcome
			var innerErr error
			var innerWrites int64
			out, err := r.Do(ctx, key, payload, func(hctx context.Context) ([]byte, error) {
				if tc.during != nil {
					if err := tc.during(hctx, clock); err != nil {
						return nil, err
					}
				}
				before := s.writes.Load()
				inner, innerErr = r.Do(context.Background(), key, payload, never)
				innerWrites = s.writes.Load() - before
				return []byte(`"own"`), nil
			})
			if err != nil || out.Verdict != idem.Executed {
				t.Fatalf("holder = %s, %v; want executed", out.Verdict, err)
			}
			wantInProgress(t, "a duplicate while the holder runs", inner, innerErr, tc.retryAt)
			if innerWrites != 0 || !inner.Cached {
				t.Fatalf("a duplicate while the holder runs made %d store writes (cached %v), want 0", innerWrites, inner.Cached)
			}
			before := s.writes.Load()
			out, err = r.Do(ctx, key, payload, never)
			if err != nil || out.Verdict != idem.Replayed || string(out.Result) != `"own"` || out.Cached != tc.cached || (s.writes.Load() == before) != tc.cached {
				t.Fatalf("a duplicate after the holder = %s %q cached %v, %v, %d store writes; want its success replayed (from the cache: %v)",
					out.Verdict, out.Result, out.Cached, err, s.writes.Load()-before, tc.cached)
			}
		})
	}
}

// TestInProgressMemoryIsBounded: a memory of 2 keys forgets the least
// recently used: a third key in progress makes the first cost a store call
// again, not the other two.
func TestInProgressMemoryIsBounded(t *testing.T) {
	clock := fakeclock.New(t0)
	s := &callStore{Store: memstore.New()}
	r, err := idem.New(s, idem.WithClock(clock.Now), idem.WithLogger(discard), idem.WithInProgressMemory(2))
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"evt:b1:notify", "evt:b2:notify", "evt:b3:notify"}
	for _, k := range keys {
		holdElsewhere(t, s.Store, k, `{}`, t0, stormLease)
	}
	do := func(k string) int64 {
		before := s.writes.Load()
		_, err := r.Do(context.Background(), k, []byte(`{}`), func(context.Context) ([]byte, error) { return nil, nil })
		if !errors.Is(err, core.ErrInProgress) {
			t.Fatalf("%s = %v, want in progress", k, err)
		}
		return s.writes.Load() - before
	}
	for _, k := range keys {
		if w := do(k); w != 1 {
			t.Fatalf("first sight of %s: %d writes, want 1", k, w)
		}
	}
	for i, want := range []int64{1, 0} { // b1 forgotten; then b3 (kept) costs nothing
		k := []string{keys[0], keys[2]}[i]
		if w := do(k); w != want {
			t.Fatalf("%s again: %d writes, want %d", k, w, want)
		}
	}
}

// TestInProgressMemoryBacksOffWhenThrottled: while the store throttles the
// rechecks of a key known in progress, each failed recheck gets the store's
// error and the next comes twice as late (the jitter pinned at its top),
// never past the lease end; duplicates in between are answered from
// memory. Once the store answers again, rechecks are back to the interval.
func TestInProgressMemoryBacksOffWhenThrottled(t *testing.T) {
	f := newMemoryFixture(t)
	_, _ = f.do(context.Background(), f.payload) // remembered at t0
	f.s.fail.Store(true)
	var failedAt []time.Duration
	for f.clock.Now().Before(f.held.LeaseUntil) {
		before := f.s.writes.Load()
		out, err := f.do(context.Background(), f.payload)
		switch {
		case f.s.writes.Load() > before && errors.Is(err, errThrottled) && out.Verdict == idem.StoreFailed:
			failedAt = append(failedAt, f.clock.Now().Sub(t0))
		case f.s.writes.Load() == before:
			wantInProgress(t, "between rechecks", out, err, f.held.LeaseUntil)
		default:
			t.Fatalf("at %v: %s, %v; want the store's error on a recheck", f.clock.Now().Sub(t0), out.Verdict, err)
		}
		f.clock.Advance(100 * time.Millisecond)
	}
	// Rechecks at 1 s, then 1+2, 3+4, 7+8, 15+16 (31 s), and the lease
	// ends at 35 s.
	want := []time.Duration{time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second, 31 * time.Second}
	if fmt.Sprint(failedAt) != fmt.Sprint(want) {
		t.Fatalf("throttled rechecks at %v, want at %v", failedAt, want)
	}
}

// TestInProgressMemoryOneRecheckAtATime: while one call rechecks a key in
// the store, the other calls of the runner are answered from memory.
func TestInProgressMemoryOneRecheckAtATime(t *testing.T) {
	f := newMemoryFixture(t)
	_, _ = f.do(context.Background(), f.payload)
	f.clock.Advance(idem.DefaultInProgressRecheck)
	var concurrent idem.Outcome
	var concurrentErr error
	var writesDuring int64
	f.s.during = func() {
		f.s.during = nil
		before := f.s.writes.Load()
		concurrent, concurrentErr = f.do(context.Background(), f.payload)
		writesDuring = f.s.writes.Load() - before
	}
	out, err := f.do(context.Background(), f.payload)
	wantInProgress(t, "the recheck", out, err, f.held.LeaseUntil)
	wantInProgress(t, "a call during the recheck", concurrent, concurrentErr, f.held.LeaseUntil)
	if writesDuring != 0 {
		t.Fatalf("a call during the recheck made %d store writes, want 0", writesDuring)
	}
	f.wantWrites("one recheck", 2)
}

// TestInProgressMemoryAndDownstreamKeys: a duplicate answered from memory
// runs no handler, so asks for no downstream key; the memory never answers
// past the lease end, even with a recheck longer than the lease, and the
// call that then takes the key over gets the downstream key the holder
// had.
func TestInProgressMemoryAndDownstreamKeys(t *testing.T) {
	f := newMemoryFixture(t, idem.WithInProgressRecheck(time.Hour))
	var keys []string
	handler := func(ctx context.Context) ([]byte, error) {
		k, err := idem.DownstreamKey(ctx, "charge")
		keys = append(keys, k)
		return []byte(`"charged"`), err
	}
	for i := range 2 {
		out, err := f.r.Do(context.Background(), f.key, []byte(f.payload), handler)
		wantInProgress(t, fmt.Sprintf("duplicate %d", i), out, err, f.held.LeaseUntil)
		if out.Cached != (i == 1) {
			t.Fatalf("duplicate %d cached %v, want %v (the second from memory)", i, out.Cached, i == 1)
		}
	}
	f.wantWrites("two duplicates, the second from memory", 1)
	f.clock.Advance(f.held.LeaseUntil.Sub(f.clock.Now()))
	out, err := f.r.Do(context.Background(), f.key, []byte(f.payload), handler)
	if err != nil || out.Verdict != idem.Executed || !out.TookOver || out.Cached {
		t.Fatalf("a delivery at the lease end = %s took over %v cached %v, %v; want a takeover, not the memory's answer", out.Verdict, out.TookOver, out.Cached, err)
	}
	if want := core.DownstreamKey(f.key, "charge"); len(keys) != 1 || keys[0] != want {
		t.Fatalf("downstream keys asked = %q, want one, the holder's %q", keys, want)
	}
}
