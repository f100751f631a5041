package idem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/memstore"
)

const (
	waitKey     = "evt:w1:charge"
	waitPayload = `{"amount":42}`
)

// opCounts counts a store's calls by method. Safe for concurrent use.
type opCounts struct {
	idem.Store
	reserve, complete, get atomic.Int32
}

func (s *opCounts) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	s.reserve.Add(1)
	return s.Store.Reserve(ctx, rec, prev, now)
}

func (s *opCounts) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	s.complete.Add(1)
	return s.Store.Complete(ctx, rec)
}

func (s *opCounts) Get(ctx context.Context, key string, now time.Time) (core.Record, error) {
	s.get.Add(1)
	return s.Store.Get(ctx, key, now)
}

func (s *opCounts) counts() [3]int32 {
	return [3]int32{s.reserve.Load(), s.complete.Load(), s.get.Load()}
}

// holdKey stores an in-progress record of waitKey, as another process that
// runs the handler would, with a lease that ends at leaseEnd.
func holdKey(t *testing.T, store idem.Store, leaseEnd time.Time) core.Record {
	t.Helper()
	fp, err := core.Fingerprint([]byte(waitPayload))
	if err != nil {
		t.Fatal(err)
	}
	rec := core.Reserve(waitKey, fp, "other-process", nil, t0, leaseEnd, time.Hour)
	if err := store.Reserve(context.Background(), rec, nil, t0); err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestWaitPollsTheStore waits for an execution held by another process,
// whose progress the store shows: the fixture's jitter draw is just under 1,
// so the polls come at the backoff's cap (100 ms, 200 ms, then 400 ms).
func TestWaitPollsTheStore(t *testing.T) {
	tests := []struct {
		name      string
		opts      []idem.Option
		ctxWait   time.Duration // > 0: ContextWithWait; < 0: ContextWithWait(0)
		deadline  time.Duration
		leaseEnd  time.Duration
		onSleep   func(t *testing.T, store idem.Store, held core.Record, n int) // after the n-th sleep
		wantVerd  idem.Verdict
		wantErr   error
		wantRes   string
		wantRuns  int32
		wantSleep []time.Duration
		wantCalls int // the call's store calls: 1 Reserve, the Gets, a Complete if it ran
		wantWait  bool
	}{
		{
			name: "holder completes within the bound: replayed", opts: []idem.Option{idem.WithWait(5 * time.Second)},
			deadline: 30 * time.Second, leaseEnd: 30 * time.Second,
			onSleep: completeAt(2, nil), wantVerd: idem.Replayed, wantRes: `"done"`,
			wantSleep: ms(100, 200), wantCalls: 3, wantWait: true,
		},
		{
			name: "holder fails permanently: its failure replayed", opts: []idem.Option{idem.WithWait(5 * time.Second)},
			deadline: 30 * time.Second, leaseEnd: 30 * time.Second,
			onSleep: completeAt(1, errors.New("card declined")), wantVerd: idem.ReplayedFailure, wantErr: core.ErrPermanentFailure,
			wantSleep: ms(100), wantCalls: 2, wantWait: true,
		},
		{
			name: "bound reached: in progress", opts: []idem.Option{idem.WithWait(time.Second)},
			deadline: 30 * time.Second, leaseEnd: 30 * time.Second,
			wantVerd: idem.InProgress, wantErr: core.ErrInProgress,
			wantSleep: ms(100, 200, 400, 300), wantCalls: 5, wantWait: true,
		},
		{
			name: "deadline before the bound: answered a retry reserve before it", opts: []idem.Option{idem.WithWait(10 * time.Second)},
			deadline: 2500 * time.Millisecond, leaseEnd: 30 * time.Second,
			wantVerd: idem.InProgress, wantErr: core.ErrInProgress,
			wantSleep: ms(100, 200, 400, 400, 400), wantCalls: 6, wantWait: true,
		},
		{
			name: "holder crashed: polled at its lease end, taken over", opts: []idem.Option{idem.WithWait(5 * time.Second)},
			deadline: 30 * time.Second, leaseEnd: 500 * time.Millisecond,
			wantVerd: idem.Executed, wantRes: `"mine"`, wantRuns: 1,
			wantSleep: ms(100, 200, 200), wantCalls: 6, wantWait: true,
		},
		{
			name: "holder's record released: executed afresh", opts: []idem.Option{idem.WithWait(5 * time.Second)},
			deadline: 30 * time.Second, leaseEnd: 30 * time.Second,
			onSleep: releaseAt(1), wantVerd: idem.Executed, wantRes: `"mine"`, wantRuns: 1,
			wantSleep: ms(100), wantCalls: 4, wantWait: true,
		},
		{
			name: "no wait by default: in progress at once", deadline: 30 * time.Second, leaseEnd: 30 * time.Second,
			wantVerd: idem.InProgress, wantErr: core.ErrInProgress, wantCalls: 1,
		},
		{
			name: "per-call wait over a runner without one", ctxWait: 5 * time.Second,
			deadline: 30 * time.Second, leaseEnd: 30 * time.Second,
			onSleep: completeAt(1, nil), wantVerd: idem.Replayed, wantRes: `"done"`,
			wantSleep: ms(100), wantCalls: 2, wantWait: true,
		},
		{
			name: "per-call wait of 0 turns the runner's off", opts: []idem.Option{idem.WithWait(5 * time.Second)}, ctxWait: -1,
			deadline: 30 * time.Second, leaseEnd: 30 * time.Second,
			wantVerd: idem.InProgress, wantErr: core.ErrInProgress, wantCalls: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f *fixture
			var held core.Record
			var slept int
			sleep := func(ctx context.Context, d time.Duration) error {
				err := f.clock.Sleep(ctx, d)
				slept++
				if tt.onSleep != nil {
					tt.onSleep(t, f.store, held, slept)
				}
				return err
			}
			var obs idem.Observation
			opts := append([]idem.Option{idem.WithSleep(sleep), idem.WithObserver(idem.ObserverFunc(func(_ context.Context, o idem.Observation) { obs = o }))}, tt.opts...)
			f = newFixture(t, opts...)
			held = holdKey(t, f.store, t0.Add(tt.leaseEnd))
			ctx := f.ctx(t, tt.deadline)
			switch {
			case tt.ctxWait > 0:
				ctx = idem.ContextWithWait(ctx, tt.ctxWait)
			case tt.ctxWait < 0:
				ctx = idem.ContextWithWait(ctx, 0)
			}
			h := &counter{result: []byte(`"mine"`)}
			out, err := f.runner.Do(ctx, waitKey, []byte(waitPayload), h.handler)
			if out.Verdict != tt.wantVerd || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("Do = %v, %v; want %v, %v", out.Verdict, err, tt.wantVerd, tt.wantErr)
			}
			if string(out.Result) != tt.wantRes || h.n.Load() != tt.wantRuns || out.Waited != tt.wantWait {
				t.Errorf("result %q, runs %d, waited %v; want %q, %d, %v", out.Result, h.n.Load(), out.Waited, tt.wantRes, tt.wantRuns, tt.wantWait)
			}
			if got := f.clock.Sleeps(); !slices.Equal(got, tt.wantSleep) {
				t.Errorf("sleeps = %v, want %v", got, tt.wantSleep)
			}
			if obs.StoreCalls != tt.wantCalls || obs.Waited != tt.wantWait {
				t.Errorf("observed store calls %d, waited %v; want %d, %v", obs.StoreCalls, obs.Waited, tt.wantCalls, tt.wantWait)
			}
			var ip *core.InProgressError
			if errors.As(err, &ip) {
				if !ip.RetryAt.Equal(held.LeaseUntil) {
					t.Errorf("RetryAt = %v, want the holder's lease end %v", ip.RetryAt, held.LeaseUntil)
				}
				if limit := t0.Add(tt.deadline - idem.DefaultRetryReserve); f.clock.Now().After(limit) {
					t.Errorf("answered at %v, after the deadline less the retry reserve %v", f.clock.Now(), limit)
				}
			}
			if tt.wantVerd == idem.Executed && (!out.TookOver && tt.leaseEnd < time.Second) {
				t.Errorf("TookOver = false after the holder's lease ended")
			}
		})
	}
}

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, n := range v {
		out[i] = time.Duration(n) * time.Millisecond
	}
	return out
}

// completeAt completes the held record after the n-th sleep: a success
// ("done") if herr is nil, else a permanent failure.
func completeAt(n int, herr error) func(*testing.T, idem.Store, core.Record, int) {
	return func(t *testing.T, store idem.Store, held core.Record, slept int) {
		if slept != n {
			return
		}
		rec := core.Succeed(held, []byte(`"done"`), t0.Add(time.Millisecond), time.Hour)
		if herr != nil {
			rec = core.Fail(held, herr, false, t0.Add(time.Millisecond), time.Hour)
		}
		if _, err := store.Complete(context.Background(), rec); err != nil {
			t.Errorf("complete the held record: %v", err)
		}
	}
}

// releaseAt deletes the held record after the n-th sleep (an operator's
// release, or the record's expiry).
func releaseAt(n int) func(*testing.T, idem.Store, core.Record, int) {
	return func(t *testing.T, store idem.Store, held core.Record, slept int) {
		if slept != n {
			return
		}
		if err := store.(idem.Releaser).Release(context.Background(), held); err != nil {
			t.Errorf("release: %v", err)
		}
	}
}

// parkingSleep is a runner's sleep that reports each call on entered and
// then blocks until ctx is done: a follower parks in it until its leader
// finishes, and no time passes.
func parkingSleep(entered chan<- struct{}) func(context.Context, time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		entered <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
}

// waitFor receives n times from ch, or fails t after a generous real-time
// guard (a hang is a failure, not a timeout of the whole test binary).
func waitFor(t *testing.T, ch <-chan struct{}, n int) {
	t.Helper()
	guard := time.NewTimer(10 * time.Second)
	defer guard.Stop()
	for range n {
		select {
		case <-ch:
		case <-guard.C:
			t.Fatalf("waited in vain for %d signals", n)
		}
	}
}

// TestWaitCoalescesCallsOfOneKey runs N calls of one key at once on one
// runner: the handler runs once, the followers make no store call and each
// gets its own copy of the result.
func TestWaitCoalescesCallsOfOneKey(t *testing.T) {
	const n = 8
	entered := make(chan struct{}, n)
	store := &opCounts{Store: memstore.New()}
	f := newFixture(t)
	r, err := idem.New(store, idem.WithClock(f.clock.Now), idem.WithSleep(parkingSleep(entered)), idem.WithWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	fn := func(context.Context) ([]byte, error) {
		runs.Add(1)
		waitFor(t, entered, n-1) // every other call is parked, waiting for this one
		return []byte(`"shared"`), nil
	}
	ctx := f.ctx(t, 30*time.Second)
	outs := make([]idem.Outcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = r.Do(ctx, waitKey, []byte(waitPayload), fn)
		}()
	}
	wg.Wait()
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", runs.Load())
	}
	if got := store.counts(); got != [3]int32{1, 1, 0} {
		t.Errorf("store calls (Reserve, Complete, Get) = %v, want one round trip: [1 1 0]", got)
	}
	var executed, replayed int
	for i := range n {
		if errs[i] != nil || string(outs[i].Result) != `"shared"` {
			t.Fatalf("call %d: %+v, %v", i, outs[i], errs[i])
		}
		switch {
		case outs[i].Verdict == idem.Executed && !outs[i].Waited:
			executed++
		case outs[i].Verdict == idem.Replayed && outs[i].Replayed && outs[i].Waited:
			replayed++
		}
		outs[i].Result[1] = 'X' // each call owns its result
	}
	if executed != 1 || replayed != n-1 {
		t.Errorf("executed %d, replayed after a wait %d; want 1, %d", executed, replayed, n-1)
	}
	for i := range n {
		if string(outs[i].Result) != `"Xhared"` {
			t.Errorf("call %d's result %q was changed by another's edit", i, outs[i].Result)
		}
	}
}

// TestWaitFollowerGetsWhatTheLeaderLeaves: a follower copies a recorded
// outcome of its leader, and otherwise makes its own store calls.
func TestWaitFollowerGetsWhatTheLeaderLeaves(t *testing.T) {
	tests := []struct {
		name      string
		leader    func() ([]byte, error) // may panic
		wantVerd  idem.Verdict
		wantErr   error
		wantRuns  int32
		wantCalls int
	}{
		{name: "success: replayed", leader: func() ([]byte, error) { return []byte(`"ok"`), nil },
			wantVerd: idem.Replayed, wantRuns: 1, wantCalls: 0},
		{name: "permanent failure: replayed", leader: func() ([]byte, error) { return nil, core.MarkPermanent(errors.New("card declined")) },
			wantVerd: idem.ReplayedFailure, wantErr: core.ErrPermanentFailure, wantRuns: 1, wantCalls: 0},
		{name: "unclassified failure: the follower runs", leader: func() ([]byte, error) { return nil, errors.New("535 authentication failed") },
			wantVerd: idem.Executed, wantRuns: 2, wantCalls: 2},
		{name: "transient failure: the follower runs", leader: func() ([]byte, error) { return nil, core.MarkRetryLater(errors.New("busy")) },
			wantVerd: idem.Executed, wantRuns: 2, wantCalls: 2}, // one write takes the retryable failure (idem.Acquirer), one completes
		// A panic leaves the key in progress until the leader's lease
		// ends: the follower polls the store until its bound.
		{name: "panic: the follower polls the store", leader: func() ([]byte, error) { panic("boom") },
			wantVerd: idem.InProgress, wantErr: core.ErrInProgress, wantRuns: 1, wantCalls: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entered := make(chan struct{}, 1)
			type role struct{}
			var followerObs idem.Observation
			observe := idem.ObserverFunc(func(ctx context.Context, o idem.Observation) {
				if ctx.Value(role{}) == "follower" {
					followerObs = o
				}
			})
			// The follower parks in its first sleep, waiting for the
			// leader; later sleeps are the fake clock's.
			var f *fixture
			var sleeps atomic.Int32
			park := parkingSleep(entered)
			sleep := func(ctx context.Context, d time.Duration) error {
				if sleeps.Add(1) == 1 {
					return park(ctx, d)
				}
				return f.clock.Sleep(ctx, d)
			}
			f = newFixture(t, idem.WithSleep(sleep), idem.WithWait(time.Second), idem.WithObserver(observe))
			var runs atomic.Int32
			leaderStarted := make(chan struct{})
			leaderDone := make(chan struct{})
			go func() {
				defer close(leaderDone)
				defer func() { _ = recover() }()
				_, _ = f.runner.Do(f.ctx(t, 30*time.Second), waitKey, []byte(waitPayload), func(context.Context) ([]byte, error) {
					runs.Add(1)
					close(leaderStarted)
					waitFor(t, entered, 1)
					return tt.leader()
				})
			}()
			<-leaderStarted
			ctx := context.WithValue(f.ctx(t, 30*time.Second), role{}, "follower")
			out, err := f.runner.Do(ctx, waitKey, []byte(waitPayload), func(context.Context) ([]byte, error) {
				runs.Add(1)
				return []byte(`"follower's"`), nil
			})
			<-leaderDone
			if out.Verdict != tt.wantVerd || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) || !out.Waited {
				t.Fatalf("follower = %v (waited %v), %v; want %v, %v", out.Verdict, out.Waited, err, tt.wantVerd, tt.wantErr)
			}
			if runs.Load() != tt.wantRuns || followerObs.StoreCalls != tt.wantCalls {
				t.Errorf("runs %d, follower's store calls %d; want %d, %d", runs.Load(), followerObs.StoreCalls, tt.wantRuns, tt.wantCalls)
			}
		})
	}
}

// TestWaitFollowerBoundReached: a follower whose bound ends before its
// leader answers in progress, with the leader's lease end as the hint, and
// without a store call.
func TestWaitFollowerBoundReached(t *testing.T) {
	var obs []idem.Observation
	var mu sync.Mutex
	observe := idem.ObserverFunc(func(_ context.Context, o idem.Observation) {
		mu.Lock()
		defer mu.Unlock()
		obs = append(obs, o)
	})
	f := newFixture(t, idem.WithWait(2*time.Second), idem.WithObserver(observe))
	release, started, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_, _ = f.runner.Do(f.ctx(t, 30*time.Second), waitKey, []byte(waitPayload), func(context.Context) ([]byte, error) {
			close(started)
			<-release
			return []byte(`"late"`), nil
		})
	}()
	<-started
	out, err := f.runner.Do(f.ctx(t, 30*time.Second), waitKey, []byte(waitPayload), func(context.Context) ([]byte, error) {
		return nil, errors.New("must not run")
	})
	close(release)
	<-done
	var ip *core.InProgressError
	if !errors.As(err, &ip) || !out.Waited {
		t.Fatalf("follower = %+v, %v; want a wait ending in progress", out, err)
	}
	if want := t0.Add(30*time.Second + idem.DefaultLeaseMargin); !ip.RetryAt.Equal(want) {
		t.Errorf("RetryAt = %v, want the leader's lease end %v", ip.RetryAt, want)
	}
	if got := f.clock.Sleeps(); !slices.Equal(got, []time.Duration{2 * time.Second}) {
		t.Errorf("sleeps = %v, want the whole bound once", got)
	}
	if len(obs) != 2 || obs[0].StoreCalls != 0 || obs[0].Verdict != idem.InProgress {
		t.Errorf("observations = %+v; the follower's first, with no store call", obs)
	}
}

// TestWaitOtherFingerprintNotCoalesced: a call of the key with another
// payload does not wait for the execution in flight: the store's record
// rejects it at once.
func TestWaitOtherFingerprintNotCoalesced(t *testing.T) {
	store := &opCounts{Store: memstore.New()}
	f := newFixture(t)
	r, err := idem.New(store, idem.WithClock(f.clock.Now), idem.WithSleep(f.clock.Sleep), idem.WithWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	release, started, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_, _ = r.Do(f.ctx(t, 30*time.Second), waitKey, []byte(waitPayload), func(context.Context) ([]byte, error) {
			close(started)
			<-release
			return []byte(`"first"`), nil
		})
	}()
	<-started
	out, err := r.Do(f.ctx(t, 30*time.Second), waitKey, []byte(`{"amount":43}`), func(context.Context) ([]byte, error) {
		return nil, errors.New("must not run")
	})
	close(release)
	<-done
	if !errors.Is(err, core.ErrKeyReused) || out.Waited {
		t.Fatalf("other payload = %+v, %v; want key reused without a wait", out, err)
	}
	if got := store.counts(); got != [3]int32{2, 1, 0} || len(f.clock.Sleeps()) != 0 {
		t.Errorf("store calls %v, sleeps %v; want [2 1 0] and none", got, f.clock.Sleeps())
	}
}

func TestWaitBadBound(t *testing.T) {
	if _, err := idem.New(memstore.New(), idem.WithWait(-time.Second)); err == nil {
		t.Fatal("WithWait(-1s) accepted")
	}
}

// TestWaitNotCarriedToTheHandler: a per-call bound applies to the call made
// with the context, not to the calls its handler makes with its own.
func TestWaitNotCarriedToTheHandler(t *testing.T) {
	f := newFixture(t)
	holdKey(t, f.store, t0.Add(30*time.Second))
	ctx := idem.ContextWithWait(f.ctx(t, 30*time.Second), 5*time.Second)
	var inner error
	out, err := f.runner.Do(ctx, "evt:outer:call", []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		_, inner = f.runner.Do(ctx, waitKey, []byte(waitPayload), func(context.Context) ([]byte, error) { return nil, nil })
		return []byte(`"outer"`), nil
	})
	if err != nil || out.Verdict != idem.Executed {
		t.Fatalf("outer call = %+v, %v", out, err)
	}
	if !errors.Is(inner, core.ErrInProgress) || len(f.clock.Sleeps()) != 0 {
		t.Errorf("inner call = %v after sleeps %v; want in progress at once", inner, f.clock.Sleeps())
	}
}

// TestWaitIsLogged: the runner's record of a call that waited says so.
func TestWaitIsLogged(t *testing.T) {
	var buf bytes.Buffer
	f := newFixture(t, idem.WithWait(time.Second), idem.WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
	holdKey(t, f.store, t0.Add(30*time.Second))
	if err := f.do(waitKey, waitPayload, (&counter{}).handler); !errors.Is(err, core.ErrInProgress) {
		t.Fatalf("Do = %v, want in progress after the wait", err)
	}
	var rec struct {
		Verdict string `json:"verdict"`
		Waited  bool   `json:"waited"`
	}
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil || rec.Verdict != "in_progress" || !rec.Waited {
		t.Errorf("log record %s (%v): want verdict in_progress, waited true", buf.String(), err)
	}
}

// TestWaitFollowerHintIsTheHoldersLease: while another process holds the
// key for 10 s, a follower whose wait ends before its leader's is told to
// retry when that lease ends, not at the lease its leader would write
// (here 15 minutes: no deadline).
func TestWaitFollowerHintIsTheHoldersLease(t *testing.T) {
	f := newFixture(t)
	r, err := idem.New(f.store, idem.WithClock(f.clock.Now), idem.WithSleep(f.clock.Block), idem.WithWait(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	holdKey(t, f.store, t0.Add(10*time.Second))
	leaderCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = r.Do(leaderCtx, waitKey, []byte(waitPayload), func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
	}()
	if err := f.clock.WaitBlocked(t.Context(), 1); err != nil { // the leader polls the store
		t.Fatal(err)
	}
	followed := make(chan error, 1)
	go func() {
		_, err := r.Do(idem.ContextWithWait(context.Background(), time.Second), waitKey, []byte(waitPayload), func(context.Context) ([]byte, error) {
			return nil, errors.New("must not run")
		})
		followed <- err
	}()
	if err := f.clock.WaitBlocked(t.Context(), 2); err != nil { // and the follower waits for it
		t.Fatal(err)
	}
	f.clock.Advance(time.Second) // the follower's wait ends
	err = <-followed
	cancel()
	<-done
	var ip *core.InProgressError
	if !errors.As(err, &ip) {
		t.Fatalf("follower = %v, want in progress", err)
	}
	if want := t0.Add(10 * time.Second); !ip.RetryAt.Equal(want) {
		t.Errorf("follower's RetryAt = %v, want the holder's lease end %v", ip.RetryAt, want)
	}
}
