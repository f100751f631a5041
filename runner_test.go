package idem_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
	"github.com/idemgo/idem/memstore"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

const (
	base     = 100 * time.Millisecond
	maxDelay = 400 * time.Millisecond
)

type fixture struct {
	t      *testing.T
	clock  *fakeclock.Clock
	store  *memstore.Store
	runner *idem.Runner
}

func newFixture(t *testing.T, opts ...idem.Option) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: fakeclock.New(t0), store: memstore.New()}
	all := append([]idem.Option{
		idem.WithClock(f.clock.Now),
		idem.WithSleep(f.clock.Sleep),
		idem.WithRand(func() float64 { return math.Nextafter(1, 0) }),
		idem.WithRetry(3, base, maxDelay),
		idem.WithMaxAttempts(5),
	}, opts...)
	r, err := idem.New(f.store, all...)
	if err != nil {
		t.Fatal(err)
	}
	f.runner = r
	return f
}

// ctx returns a context whose deadline is d after the fake clock's now (the
// runner reads the deadline, not the real time, to size leases).
func (f *fixture) ctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Hour))
	t.Cleanup(cancel)
	return &deadlineCtx{Context: ctx, deadline: f.clock.Now().Add(d)}
}

// do makes a call with a 30-second deadline and returns its error.
func (f *fixture) do(key, body string, fn idem.Handler) error {
	_, err := f.runner.Do(f.ctx(f.t, 30*time.Second), key, []byte(body), fn)
	return err
}

// mustDo makes a call that sets a test up: it fails the test unless the
// call fails exactly when wantErr says it does.
func (f *fixture) mustDo(key, body string, fn idem.Handler, wantErr bool) {
	f.t.Helper()
	if err := f.do(key, body, fn); (err != nil) != wantErr {
		f.t.Fatalf("setting up with %s: error %v, want an error: %v", key, err, wantErr)
	}
}

type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

type counter struct {
	n      atomic.Int32
	result []byte
	errs   []error // returned by the first calls, in order
}

func (c *counter) handler(ctx context.Context) ([]byte, error) {
	i := int(c.n.Add(1)) - 1
	if i < len(c.errs) && c.errs[i] != nil {
		return nil, c.errs[i]
	}
	return c.result, nil
}

func transient(msg string) error { return core.MarkTransient(errors.New(msg)) }

func TestTransientThenSuccessAfterOneBaseBackoff(t *testing.T) {
	f := newFixture(t)
	h := &counter{result: []byte(`{"ok":true}`), errs: []error{transient("upstream 503")}}
	out, err := f.runner.Do(f.ctx(t, 30*time.Second), "evt:e1:notify", []byte(`{"id":"e1"}`), h.handler)
	if err != nil {
		t.Fatalf("Do = %v", err)
	}
	if out.Attempts != 1 || out.Replayed || string(out.Result) != `{"ok":true}` || h.n.Load() != 2 {
		t.Fatalf("outcome %+v after %d calls, want 2 runs in 1 attempt, not replayed", out, h.n.Load())
	}
	if got := f.clock.Sleeps(); !slices.Equal(got, []time.Duration{base}) {
		t.Fatalf("sleeps = %v, want one of the base delay %v", got, base)
	}
}

func TestDuplicateWithReorderedKeysReplays(t *testing.T) {
	f := newFixture(t)
	h := &counter{result: []byte(`{"charged":100}`)}
	ctx := f.ctx(t, 30*time.Second)
	if _, err := f.runner.Do(ctx, "evt:e2:charge", []byte(`{"id":"e2","amount":100,"currency":"EUR"}`), h.handler); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Minute)
	out, err := f.runner.Do(ctx, "evt:e2:charge", []byte(`{ "currency":"EUR", "amount":100, "id":"e2" }`), h.handler)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Replayed || string(out.Result) != `{"charged":100}` || out.Attempts != 1 || h.n.Load() != 1 {
		t.Fatalf("outcome %+v, handler ran %d times; want a replay and one execution", out, h.n.Load())
	}
}

func TestSameKeyOtherPayloadRejected(t *testing.T) {
	f := newFixture(t)
	h := &counter{result: []byte(`1`)}
	ctx := f.ctx(t, 30*time.Second)
	if _, err := f.runner.Do(ctx, "evt:e3:charge", []byte(`{"amount":100}`), h.handler); err != nil {
		t.Fatal(err)
	}
	out, err := f.runner.Do(ctx, "evt:e3:charge", []byte(`{"amount":101}`), h.handler)
	if !errors.Is(err, core.ErrKeyReused) || out.Replayed || out.Result != nil || h.n.Load() != 1 {
		t.Fatalf("Do = %+v, %v after %d runs; want core.ErrKeyReused, no run", out, err, h.n.Load())
	}
}

func TestInvalidKeyRejected(t *testing.T) {
	f := newFixture(t)
	h := &counter{}
	for _, k := range []string{"", "short", "has space in it", string(make([]byte, 200))} {
		if _, err := f.runner.Do(f.ctx(t, time.Second), k, []byte(`{}`), h.handler); !errors.Is(err, core.ErrInvalidKey) {
			t.Errorf("key %q: err = %v, want core.ErrInvalidKey", k, err)
		}
	}
	if _, err := f.runner.Do(f.ctx(t, time.Second), "evt:ok:key", []byte(`{"a":`), h.handler); !errors.Is(err, core.ErrInvalidPayload) {
		t.Errorf("bad payload: err = %v, want core.ErrInvalidPayload", err)
	}
	if h.n.Load() != 0 || f.store.Len() != 0 {
		t.Fatalf("handler ran %d times, store holds %d records; want none", h.n.Load(), f.store.Len())
	}
}

func TestPermanentErrorRunsOnce(t *testing.T) {
	f := newFixture(t)
	declined := core.MarkPermanent(errors.New("card declined"))
	h := &counter{errs: []error{declined, declined}}
	ctx := f.ctx(t, 30*time.Second)
	_, err := f.runner.Do(ctx, "evt:e4:charge", []byte(`{"id":"e4"}`), h.handler)
	var fe *core.FailureError
	if !errors.As(err, &fe) || fe.Replayed || !errors.Is(err, declined) || !errors.Is(err, core.ErrPermanentFailure) {
		t.Fatalf("first call err = %v, want a new permanent core.FailureError wrapping the handler's", err)
	}
	_, err = f.runner.Do(ctx, "evt:e4:charge", []byte(`{"id":"e4"}`), h.handler)
	if !errors.As(err, &fe) || !fe.Replayed || fe.Message != "card declined" {
		t.Fatalf("second call err = %v, want the replayed failure", err)
	}
	if h.n.Load() != 1 || len(f.clock.Sleeps()) != 0 {
		t.Fatalf("handler ran %d times with sleeps %v, want once, no backoff", h.n.Load(), f.clock.Sleeps())
	}
}

func TestTransientErrorsExhaustWithCappedDelays(t *testing.T) {
	f := newFixture(t, idem.WithRetry(5, base, 250*time.Millisecond), idem.WithMaxAttempts(1))
	h := &counter{errs: []error{transient("a"), transient("b"), transient("c"), transient("d"), transient("e"), nil}}
	ctx := f.ctx(t, 30*time.Second)
	out, err := f.runner.Do(ctx, "evt:e5:notify", []byte(`{"id":"e5"}`), h.handler)
	if !errors.Is(err, core.ErrRetriesExhausted) || out.Attempts != 1 || h.n.Load() != 5 {
		t.Fatalf("Do = %+v, %v after %d runs; want core.ErrRetriesExhausted after 5 runs in 1 attempt", out, err, h.n.Load())
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond}
	if got := f.clock.Sleeps(); !slices.Equal(got, want) {
		t.Fatalf("sleeps = %v, want %v", got, want)
	}
	// A later delivery is rejected without running.
	_, err = f.runner.Do(ctx, "evt:e5:notify", []byte(`{"id":"e5"}`), h.handler)
	if !errors.Is(err, core.ErrRetriesExhausted) || h.n.Load() != 5 {
		t.Fatalf("redelivery: %v after %d runs", err, h.n.Load())
	}
}

// The bound counts executions, one per delivery that runs the handler: its
// in-process tries are one execution.
func TestAttemptsCountAcrossDeliveries(t *testing.T) {
	f := newFixture(t, idem.WithRetry(2, base, maxDelay), idem.WithMaxAttempts(2))
	h := &counter{result: []byte(`"done"`), errs: []error{transient("a"), transient("b"), transient("c"), transient("d"), transient("e")}}
	ctx := f.ctx(t, 30*time.Second)
	out, err := f.runner.Do(ctx, "evt:e6:notify", []byte(`{}`), h.handler)
	if !errors.Is(err, idem.ErrTransientFailure) || out.Attempts != 1 || h.n.Load() != 2 {
		t.Fatalf("first delivery: %+v %v after %d runs, want ErrTransientFailure after 2 runs in attempt 1", out, err, h.n.Load())
	}
	out, err = f.runner.Do(ctx, "evt:e6:notify", []byte(`{}`), h.handler)
	if !errors.Is(err, core.ErrRetriesExhausted) || out.Attempts != 2 || h.n.Load() != 4 {
		t.Fatalf("second delivery: %+v %v after %d runs, want exhausted at attempt 2 after 4 runs", out, err, h.n.Load())
	}
	out, err = f.runner.Do(ctx, "evt:e6:notify", []byte(`{}`), h.handler)
	if !errors.Is(err, core.ErrRetriesExhausted) || h.n.Load() != 4 {
		t.Fatalf("third delivery: %+v %v after %d runs, want exhausted without a run", out, err, h.n.Load())
	}
}

func TestDeadlineStopsRetries(t *testing.T) {
	f := newFixture(t)
	h := &counter{result: []byte(`1`), errs: []error{transient("a")}}
	// 50 ms left: no room for a 100 ms backoff.
	out, err := f.runner.Do(f.ctx(t, 50*time.Millisecond), "evt:e7:notify", []byte(`{}`), h.handler)
	if !errors.Is(err, idem.ErrTransientFailure) || len(f.clock.Sleeps()) != 0 || out.Attempts != 1 {
		t.Fatalf("Do = %+v, %v, sleeps %v; want a transient failure without sleeping", out, err, f.clock.Sleeps())
	}
	out, err = f.runner.Do(f.ctx(t, 30*time.Second), "evt:e7:notify", []byte(`{}`), h.handler)
	if err != nil || out.Attempts != 2 || out.Replayed {
		t.Fatalf("redelivery = %+v, %v; want success at attempt 2", out, err)
	}
}

func TestConcurrentCallsRunOnce(t *testing.T) {
	f := newFixture(t)
	release := make(chan struct{})
	started := make(chan struct{})
	var runs atomic.Int32
	slow := func(ctx context.Context) ([]byte, error) {
		runs.Add(1)
		close(started)
		<-release
		return []byte(`"slow"`), nil
	}
	ctx := f.ctx(t, 30*time.Second)
	var wg sync.WaitGroup
	var firstErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, firstErr = f.runner.Do(ctx, "evt:e8:notify", []byte(`{}`), slow)
	}()
	<-started
	_, err := f.runner.Do(ctx, "evt:e8:notify", []byte(`{}`), slow)
	var ip *core.InProgressError
	if !errors.As(err, &ip) || !errors.Is(err, core.ErrInProgress) {
		t.Fatalf("second call err = %v, want core.InProgressError", err)
	}
	if want := t0.Add(30*time.Second + idem.DefaultLeaseMargin); !ip.RetryAt.Equal(want) {
		t.Fatalf("RetryAt = %v, want the lease end %v", ip.RetryAt, want)
	}
	close(release)
	wg.Wait()
	if firstErr != nil || runs.Load() != 1 {
		t.Fatalf("first call err %v, runs %d; want nil, 1", firstErr, runs.Load())
	}
}

func TestEqualPayloadsDifferentEventsBothRun(t *testing.T) {
	f := newFixture(t)
	h := &counter{result: []byte(`1`)}
	ctx := f.ctx(t, 30*time.Second)
	for _, k := range []string{"evt:e9a:notify", "evt:e9b:notify"} {
		if out, err := f.runner.Do(ctx, k, []byte(`{"amount":5}`), h.handler); err != nil || out.Replayed {
			t.Fatalf("%s: %+v %v", k, out, err)
		}
	}
	if h.n.Load() != 2 {
		t.Fatalf("handler ran %d times, want 2", h.n.Load())
	}
}

func TestExpiredLeaseTakenOver(t *testing.T) {
	f := newFixture(t, idem.WithLease(time.Second, time.Minute))
	ctx := f.ctx(t, 10*time.Second)
	// A holder that reserved and then died: reserve by hand.
	fp, _ := core.Fingerprint([]byte(`{}`))
	dead := core.Reserve("evt:e10:notify", fp, "dead-token", nil, t0, t0.Add(11*time.Second), time.Hour)
	if err := f.store.Reserve(ctx, dead, nil, t0); err != nil {
		t.Fatal(err)
	}
	h := &counter{result: []byte(`"x"`)}
	if _, err := f.runner.Do(ctx, "evt:e10:notify", []byte(`{}`), h.handler); !errors.Is(err, core.ErrInProgress) || h.n.Load() != 0 {
		t.Fatalf("before lease end: %v after %d runs, want in progress", err, h.n.Load())
	}
	f.clock.Advance(11 * time.Second)
	out, err := f.runner.Do(f.ctx(t, 10*time.Second), "evt:e10:notify", []byte(`{}`), h.handler)
	if err != nil || !out.TookOver || out.Attempts != 2 || h.n.Load() != 1 {
		t.Fatalf("after lease end: %+v %v after %d runs, want a takeover at attempt 2", out, err, h.n.Load())
	}
	_, err = f.store.Complete(ctx, core.Succeed(dead, []byte(`"late"`), f.clock.Now(), time.Hour))
	if !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("late completion of the dead holder = %v, want ErrLeaseLost", err)
	}
}

func TestLeaseWithoutDeadline(t *testing.T) {
	f := newFixture(t, idem.WithLease(time.Second, 3*time.Minute))
	var seen core.Record
	_, err := f.runner.Do(context.Background(), "evt:e11:notify", []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		var err error
		seen, err = f.store.Get(ctx, "evt:e11:notify", f.clock.Now())
		return nil, err
	})
	if err != nil || !seen.LeaseUntil.Equal(t0.Add(3*time.Minute)) || seen.Status != core.StatusInProgress {
		t.Fatalf("record during the run = %v (%v), want in progress with a 3-minute lease", seen, err)
	}
}

// flakyStore fails the first n completions transiently, or with failWith.
type flakyStore struct {
	*memstore.Store
	failures int
	failWith error
	calls    int
}

func (s *flakyStore) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	s.calls++
	if s.calls <= s.failures {
		return core.Record{}, s.failWith
	}
	return s.Store.Complete(ctx, rec)
}

func TestCompletionRetried(t *testing.T) {
	clock := fakeclock.New(t0)
	fs := &flakyStore{Store: memstore.New(), failures: 2, failWith: core.MarkTransient(errors.New("throttled"))}
	r, err := idem.New(fs, idem.WithClock(clock.Now), idem.WithSleep(clock.Sleep), idem.WithRand(func() float64 { return 0.5 }))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{clock: clock}
	out, err := r.Do(f.ctx(t, 30*time.Second), "evt:e12:charge", []byte(`{}`), func(context.Context) ([]byte, error) { return []byte(`"ok"`), nil })
	if err != nil || fs.calls != 3 || string(out.Result) != `"ok"` {
		t.Fatalf("Do = %+v, %v with %d completion calls; want success on the third", out, err, fs.calls)
	}
	rec, _ := fs.Get(context.Background(), "evt:e12:charge", clock.Now())
	if rec.Status != core.StatusSucceeded {
		t.Fatalf("stored %v, want succeeded", rec)
	}
}

func TestCompletionFailureSurfacesAndKeyStaysLeased(t *testing.T) {
	clock := fakeclock.New(t0)
	fs := &flakyStore{Store: memstore.New(), failures: 100, failWith: core.MarkTransient(errors.New("throttled"))}
	r, _ := idem.New(fs, idem.WithClock(clock.Now), idem.WithSleep(clock.Sleep), idem.WithLease(time.Second, time.Minute),
		idem.WithRand(func() float64 { return 0.5 }))
	f := &fixture{clock: clock}
	runs := 0
	h := func(context.Context) ([]byte, error) { runs++; return []byte(`"ok"`), nil }
	out, err := r.Do(f.ctx(t, 5*time.Second), "evt:e13:charge", []byte(`{}`), h)
	if !errors.Is(err, idem.ErrOutcomeNotRecorded) || string(out.Result) != `"ok"` {
		t.Fatalf("Do = %+v, %v; want ErrOutcomeNotRecorded with the result", out, err)
	}
	if fs.calls != idem.DefaultCompleteAttempts {
		t.Fatalf("completion tried %d times, want %d", fs.calls, idem.DefaultCompleteAttempts)
	}
	fs.failures = 0
	// Before the lease ends the key is refused; after it, taken over.
	if _, err := r.Do(f.ctx(t, 5*time.Second), "evt:e13:charge", []byte(`{}`), h); !errors.Is(err, core.ErrInProgress) || runs != 1 {
		t.Fatalf("before lease end: %v after %d runs", err, runs)
	}
	clock.Advance(10 * time.Second)
	out, err = r.Do(f.ctx(t, 5*time.Second), "evt:e13:charge", []byte(`{}`), h)
	if err != nil || !out.TookOver || runs != 2 {
		t.Fatalf("after lease end: %+v %v after %d runs; want a takeover", out, err, runs)
	}
}

func TestLeaseLostSurfaces(t *testing.T) {
	clock := fakeclock.New(t0)
	fs := &flakyStore{Store: memstore.New(), failures: 1, failWith: fmt.Errorf("x: %w", idem.ErrLeaseLost)}
	r, _ := idem.New(fs, idem.WithClock(clock.Now), idem.WithSleep(clock.Sleep))
	f := &fixture{clock: clock}
	_, err := r.Do(f.ctx(t, 5*time.Second), "evt:e14:charge", []byte(`{}`), func(context.Context) ([]byte, error) { return nil, nil })
	if !errors.Is(err, idem.ErrLeaseLost) || fs.calls != 1 {
		t.Fatalf("err = %v after %d calls, want ErrLeaseLost without retry", err, fs.calls)
	}
}

func TestCacheAnswersWithoutStore(t *testing.T) {
	clock := fakeclock.New(t0)
	cs := &countingStore{Store: memstore.New()}
	r, _ := idem.New(cs, idem.WithClock(clock.Now), idem.WithCache(2), idem.WithRetention(time.Minute))
	f := &fixture{clock: clock}
	ctx := f.ctx(t, 5*time.Second)
	h := &counter{result: []byte(`"r"`)}
	if _, err := r.Do(ctx, "evt:c1:notify", []byte(`{"a":1}`), h.handler); err != nil {
		t.Fatal(err)
	}
	before := cs.calls.Load()
	out, err := r.Do(ctx, "evt:c1:notify", []byte(`{"a":1}`), h.handler)
	if err != nil || !out.Replayed || string(out.Result) != `"r"` || cs.calls.Load() != before {
		t.Fatalf("cached duplicate: %+v %v, store calls %d→%d; want a replay with no store call", out, err, before, cs.calls.Load())
	}
	if _, err := r.Do(ctx, "evt:c1:notify", []byte(`{"a":2}`), h.handler); !errors.Is(err, core.ErrKeyReused) {
		t.Fatalf("cached key with another payload: %v, want core.ErrKeyReused", err)
	}
	clock.Advance(2 * time.Minute)
	out, err = r.Do(ctx, "evt:c1:notify", []byte(`{"a":2}`), h.handler)
	if err != nil || out.Replayed || h.n.Load() != 2 {
		t.Fatalf("after retention: %+v %v, runs %d; want a new execution", out, err, h.n.Load())
	}
	if r.CacheLen() != 1 {
		t.Fatalf("cache holds %d, want 1", r.CacheLen())
	}
}

type countingStore struct {
	*memstore.Store
	calls atomic.Int32
}

func (s *countingStore) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	s.calls.Add(1)
	return s.Store.Reserve(ctx, rec, prev, now)
}

func TestBadOptions(t *testing.T) {
	s := memstore.New()
	for name, o := range map[string]idem.Option{
		"retention":    idem.WithRetention(0),
		"lease":        idem.WithLease(-1, time.Second),
		"max attempts": idem.WithMaxAttempts(0),
		"retry":        idem.WithRetry(0, base, maxDelay),
		"retry order":  idem.WithRetry(2, maxDelay, base),
		"clock":        idem.WithClock(nil),
		"sleep":        idem.WithSleep(nil),
		"rand":         idem.WithRand(nil),
		"tokens":       idem.WithTokens(nil),
		"cache":        idem.WithCache(0),
		"backoff":      idem.WithBackoff(nil),
		"completion":   idem.WithCompletionAttempts(0),
		"reserve":      idem.WithRetryReserve(-time.Second),
	} {
		if _, err := idem.New(s, o); err == nil {
			t.Errorf("%s: New accepted a bad option", name)
		}
	}
	if _, err := idem.New(nil); err == nil {
		t.Error("New accepted a nil store")
	}
}

func TestPluggableBackoffAndCompletionAttempts(t *testing.T) {
	f := newFixture(t, idem.WithBackoff(func(attempt int, r float64) time.Duration { return 300 * time.Millisecond }))
	h := &counter{result: []byte(`1`), errs: []error{transient("a")}}
	if err := f.do("evt:b1:notify", `{}`, h.handler); err != nil {
		t.Fatal(err)
	}
	if got := f.clock.Sleeps(); len(got) != 1 || got[0] != 300*time.Millisecond {
		t.Fatalf("sleeps = %v, want the policy's 300ms", got)
	}
	clock := fakeclock.New(t0)
	fs := &flakyStore{Store: memstore.New(), failures: 5, failWith: core.MarkTransient(errors.New("throttled"))}
	r, err := idem.New(fs, idem.WithClock(clock.Now), idem.WithSleep(clock.Sleep), idem.WithCompletionAttempts(2))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Do((&fixture{clock: clock}).ctx(t, 30*time.Second), "evt:b2:notify", []byte(`{}`), func(context.Context) ([]byte, error) { return []byte(`1`), nil })
	if !errors.Is(err, idem.ErrOutcomeNotRecorded) || fs.calls != 2 {
		t.Fatalf("Do = %v after %d completion calls, want ErrOutcomeNotRecorded after 2", err, fs.calls)
	}
}

func TestRetryLaterIsRecordedNotRetried(t *testing.T) {
	f := newFixture(t)
	h := &counter{result: []byte(`1`), errs: []error{core.MarkRetryLater(errors.New("upstream 503"))}}
	err := f.do("evt:rl:a", `{}`, h.handler)
	if !errors.Is(err, idem.ErrTransientFailure) || h.n.Load() != 1 || len(f.clock.Sleeps()) != 0 {
		t.Fatalf("Do = %v after %d runs, sleeps %v; want a transient failure without an in-process retry", err, h.n.Load(), f.clock.Sleeps())
	}
	if err := f.do("evt:rl:a", `{}`, h.handler); err != nil || h.n.Load() != 2 {
		t.Fatalf("later delivery = %v after %d runs, want a new execution", err, h.n.Load())
	}
}
