package idemotel_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
	"github.com/idemgo/idem/memstore"
	idemotel "github.com/idemgo/idem/otel"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

const key = "evt:trace-1:notify"

// faulty is a memstore whose Acquire and Complete may fail, with every
// capability of memstore (Acquirer, StepRecorder, LeaseRenewer,
// StagedCompleter).
type faulty struct {
	*memstore.Store
	acquireErr, completeErr, commitErr error
}

func (s *faulty) CompleteStaged(ctx context.Context, rec core.Record, staged []any) (core.Record, error) {
	if s.commitErr != nil {
		return core.Record{}, s.commitErr
	}
	return s.Store.CompleteStaged(ctx, rec, staged)
}

func (s *faulty) Acquire(ctx context.Context, rec core.Record, now time.Time, p core.Policy) (core.Record, *core.Record, error) {
	if s.acquireErr != nil {
		return core.Record{}, nil, s.acquireErr
	}
	return s.Store.Acquire(ctx, rec, now, p)
}

func (s *faulty) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	if s.completeErr != nil {
		return core.Record{}, s.completeErr
	}
	return s.Store.Complete(ctx, rec)
}

// plain hides every optional capability of a store: the runner reserves
// with Reserve.
type plain struct{ idem.Store }

// env is one runner over a faulty memstore on a fake clock, traced to an
// in-memory span recorder.
type env struct {
	t       *testing.T
	clock   *fakeclock.Clock
	store   *faulty
	spans   *tracetest.SpanRecorder
	tp      *sdktrace.TracerProvider
	runner  *idem.Runner
	calls   int
	onSleep func() // called before each of the runner's sleeps, if set
	// blocking makes the runner's sleeps wait for the test to move the
	// clock (fakeclock.Block) instead of moving it.
	blocking bool
}

func newEnv(t *testing.T, wrap func(*faulty) idem.Store, opts ...idem.Option) *env {
	t.Helper()
	e := &env{t: t, clock: fakeclock.New(t0), store: &faulty{Store: memstore.New()}, spans: tracetest.NewSpanRecorder()}
	e.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	tr, err := idemotel.NewTracer(e.tp)
	if err != nil {
		t.Fatal(err)
	}
	var store idem.Store = e.store
	if wrap != nil {
		store = wrap(e.store)
	}
	sleep := func(ctx context.Context, d time.Duration) error {
		if e.onSleep != nil {
			e.onSleep()
		}
		if e.blocking {
			return e.clock.Block(ctx, d)
		}
		return e.clock.Sleep(ctx, d)
	}
	all := append([]idem.Option{idem.WithClock(e.clock.Now), idem.WithSleep(sleep), idem.WithRand(func() float64 { return 0.5 }),
		idem.WithRetry(3, 10*time.Millisecond, 100*time.Millisecond), idem.WithTracer(tr)}, opts...)
	if e.runner, err = idem.New(store, all...); err != nil {
		t.Fatal(err)
	}
	return e
}

// do calls Runner.Do with the test's key unless k is given.
func (e *env) do(payload string, fn idem.Handler, k ...string) (idem.Outcome, error) {
	e.calls++
	kk := key
	if len(k) > 0 {
		kk = k[0]
	}
	return e.runner.Do(context.Background(), kk, []byte(payload), fn)
}

// hold stores an in-progress record of the key whose lease ends after d.
func (e *env) hold(d time.Duration) core.Record {
	e.t.Helper()
	fp, err := core.Fingerprint([]byte(`{}`))
	if err != nil {
		e.t.Fatal(err)
	}
	now := e.clock.Now()
	rec := core.Reserve(key, fp, "other-holder", nil, now, now.Add(d), time.Hour)
	if err := e.store.Reserve(context.Background(), rec, nil, now); err != nil {
		e.t.Fatal(err)
	}
	return rec
}

func ok(context.Context) ([]byte, error) { return []byte(`"sent"`), nil }

func failing(err error) idem.Handler {
	return func(context.Context) ([]byte, error) { return nil, err }
}

// callSpans returns the spans of calls, in the order they ended.
func (e *env) callSpans() []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range e.spans.Ended() {
		if s.Name() == idemotel.CallSpan {
			out = append(out, s)
		}
	}
	return out
}

// storeOps returns the methods of the store spans whose parent is call, in
// the order they ended, and fails the test on a store span that is no
// call's child.
func (e *env) storeOps(call sdktrace.ReadOnlySpan) []string {
	e.t.Helper()
	var ops []string
	calls := map[trace.SpanID]bool{}
	for _, s := range e.callSpans() {
		calls[s.SpanContext().SpanID()] = true
	}
	for _, s := range e.spans.Ended() {
		if !strings.HasPrefix(s.Name(), idemotel.StoreSpanPrefix) {
			continue
		}
		if !calls[s.Parent().SpanID()] || s.Parent().TraceID() != s.SpanContext().TraceID() {
			e.t.Errorf("store span %s is not the child of a call's span", s.Name())
		}
		if s.Parent().SpanID() == call.SpanContext().SpanID() {
			ops = append(ops, attr(s, idemotel.AttrStoreOp).AsString())
		}
	}
	return ops
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, a := range s.Attributes() {
		if a.Key == k {
			return a.Value
		}
	}
	return attribute.Value{}
}

// traceCase is one call whose span is checked: setup makes the calls before
// it (their spans are not checked but for their store spans' parents), run
// makes it.
type traceCase struct {
	name     string
	opts     []idem.Option
	wrap     func(*faulty) idem.Store
	setup    func(e *env)
	run      func(e *env) (idem.Outcome, error)
	verdict  idem.Verdict
	attempts int64
	flags    []attribute.Key // the boolean attributes that are true
	ops      []string        // the call's store calls, in order
	noKey    bool            // the event had no key (a wrapper's report)
}

func traceCases() []traceCase {
	perm := core.MarkPermanent(errors.New("mailbox does not exist"))
	down := errors.New("store unreachable")
	return []traceCase{
		{name: "executed", run: func(e *env) (idem.Outcome, error) { return e.do(`{}`, ok) },
			verdict: idem.Executed, attempts: 1, ops: []string{idem.OpAcquire, idem.OpComplete}},
		{name: "replayed", setup: func(e *env) { _, _ = e.do(`{}`, ok) }, run: func(e *env) (idem.Outcome, error) { return e.do(`{}`, ok) },
			verdict: idem.Replayed, attempts: 1, ops: []string{idem.OpAcquire}},
		{name: "replayed from the cache", opts: []idem.Option{idem.WithCache(8)}, setup: func(e *env) { _, _ = e.do(`{}`, ok) },
			run: func(e *env) (idem.Outcome, error) { return e.do(`{}`, ok) }, verdict: idem.Replayed, attempts: 1, flags: []attribute.Key{idemotel.AttrCached}},
		{name: "replayed failure", setup: func(e *env) { _, _ = e.do(`{}`, failing(perm)) },
			run: func(e *env) (idem.Outcome, error) { return e.do(`{}`, ok) }, verdict: idem.ReplayedFailure, attempts: 1, ops: []string{idem.OpAcquire}},
		{name: "in progress", setup: func(e *env) { e.hold(time.Minute) }, run: func(e *env) (idem.Outcome, error) { return e.do(`{}`, ok) },
			verdict: idem.InProgress, attempts: 1, ops: []string{idem.OpAcquire}},
		{name: "waited for a concurrent execution", opts: []idem.Option{idem.WithWait(10 * time.Second)},
			setup: func(e *env) {
				held := e.hold(time.Minute)
				e.onSleep = func() { // the other holder completes while the call waits
					e.onSleep = nil
					if _, err := e.store.Store.Complete(context.Background(), core.Succeed(held, []byte(`"sent"`), e.clock.Now(), time.Hour)); err != nil {
						e.t.Error(err)
					}
				}
			},
			run: func(e *env) (idem.Outcome, error) { return e.do(`{}`, ok) }, verdict: idem.Replayed, attempts: 1,
			flags: []attribute.Key{idemotel.AttrWaited}, ops: []string{idem.OpAcquire, idem.OpGet}},
		{name: "took over an expired lease", setup: func(e *env) { e.hold(time.Second); e.clock.Advance(2 * time.Second) },
			run: func(e *env) (idem.Outcome, error) { return e.do(`{}`, ok) }, verdict: idem.Executed, attempts: 2,
			flags: []attribute.Key{idemotel.AttrTookOver}, ops: []string{idem.OpAcquire, idem.OpComplete}},
		{name: "reserved without Acquire", wrap: func(s *faulty) idem.Store { return plain{s} },
			run: func(e *env) (idem.Outcome, error) { return e.do(`{}`, ok) }, verdict: idem.Executed, attempts: 1,
			ops: []string{idem.OpReserve, idem.OpComplete}},
		{name: "key reused", setup: func(e *env) { _, _ = e.do(`{}`, ok) }, run: func(e *env) (idem.Outcome, error) { return e.do(`{"to":"b"}`, ok) },
			verdict: idem.KeyReused, attempts: 1, ops: []string{idem.OpAcquire}},
		{name: "invalid key", run: func(e *env) (idem.Outcome, error) { return e.do(`{}`, ok, "no spaces allowed") }, verdict: idem.InvalidKey},
		{name: "invalid payload", run: func(e *env) (idem.Outcome, error) { return e.do(`{"to":`, ok) }, verdict: idem.InvalidPayload},
		{name: "retries exhausted", opts: []idem.Option{idem.WithMaxAttempts(1)},
			run: func(e *env) (idem.Outcome, error) {
				return e.do(`{}`, failing(core.MarkTransient(errors.New("smtp busy"))))
			},
			verdict: idem.RetriesExhausted, attempts: 1, ops: []string{idem.OpAcquire, idem.OpComplete}},
		{name: "failed permanently", run: func(e *env) (idem.Outcome, error) { return e.do(`{}`, failing(perm)) },
			verdict: idem.FailedPermanently, attempts: 1, ops: []string{idem.OpAcquire, idem.OpComplete}},
		{name: "failed unclassified", run: func(e *env) (idem.Outcome, error) { return e.do(`{}`, failing(errors.New("smtp said no"))) },
			verdict: idem.FailedUnclassified, attempts: 1, ops: []string{idem.OpAcquire, idem.OpComplete}},
		{name: "failed transiently", opts: []idem.Option{idem.WithRetry(1, time.Millisecond, time.Millisecond)},
			run: func(e *env) (idem.Outcome, error) {
				return e.do(`{}`, failing(core.MarkTransient(errors.New("smtp busy"))))
			},
			verdict: idem.FailedTransiently, attempts: 1, ops: []string{idem.OpAcquire, idem.OpComplete}},
		{name: "left no record", run: func(e *env) (idem.Outcome, error) {
			return e.do(`{}`, failing(core.MarkNoRecord(errors.New("401: signature mismatch"))))
		}, verdict: idem.FailedTransiently, attempts: 1, ops: []string{idem.OpAcquire, idem.OpRelease}},
		{name: "outcome not recorded", setup: func(e *env) { e.store.completeErr = down },
			run:     func(e *env) (idem.Outcome, error) { return e.do(`{}`, ok) },
			verdict: idem.OutcomeNotRecorded, attempts: 1, ops: []string{idem.OpAcquire, idem.OpComplete}},
		{name: "commit refused", setup: func(e *env) {
			e.store.commitErr = fmt.Errorf("%w: %w", idem.ErrCommitRefused, core.MarkPermanent(errors.New("access denied to a staged write")))
		},
			run: func(e *env) (idem.Outcome, error) {
				return e.do(`{}`, func(ctx context.Context) ([]byte, error) {
					return []byte(`"sent"`), memstore.Stage(ctx, memstore.Write{Apply: func() {}})
				})
			},
			verdict: idem.CommitRefused, attempts: 1, ops: []string{idem.OpAcquire, idem.OpCompleteStaged, idem.OpComplete}},
		{name: "store failed", setup: func(e *env) { e.store.acquireErr = down },
			run:     func(e *env) (idem.Outcome, error) { return e.do(`{}`, ok) },
			verdict: idem.StoreFailed, ops: []string{idem.OpAcquire}},
		{name: "a step and staged writes", run: func(e *env) (idem.Outcome, error) {
			return e.do(`{}`, func(ctx context.Context) ([]byte, error) {
				if _, err := idem.Step(ctx, "render", func(context.Context) ([]byte, error) { return []byte(`"body"`), nil }); err != nil {
					return nil, err
				}
				return []byte(`"sent"`), memstore.Stage(ctx, memstore.Write{Apply: func() {}})
			})
		}, verdict: idem.Executed, attempts: 1, ops: []string{idem.OpAcquire, idem.OpRecordStep, idem.OpCompleteStaged}},
		// What a wrapper decides without Do (Runner.Report), or after it (its
		// annotation's verdict), is a span too.
		{name: "missing key", run: report(idem.MissingKey, ""), verdict: idem.MissingKey, noKey: true},
		{name: "not started", run: report(idem.NotStarted, key), verdict: idem.NotStarted},
		{name: "blocked", run: report(idem.Blocked, key), verdict: idem.Blocked},
		{name: "panicked", run: report(idem.Panicked, key), verdict: idem.Panicked},
		{name: "unkeyed", run: report(idem.Unkeyed, ""), verdict: idem.Unkeyed, noKey: true},
		{name: "unauthorized", run: report(idem.Unauthorized, ""), verdict: idem.Unauthorized, noKey: true},
		{name: "replay omitted", setup: func(e *env) { _, _ = e.do(`{}`, ok) }, run: replayAs(idem.ReplayOmitted),
			verdict: idem.ReplayOmitted, attempts: 1, ops: []string{idem.OpAcquire}},
		{name: "replay corrupt", setup: func(e *env) { _, _ = e.do(`{}`, ok) }, run: replayAs(idem.ReplayCorrupt),
			verdict: idem.ReplayCorrupt, attempts: 1, ops: []string{idem.OpAcquire}},
	}
}

// report makes a wrapper's report of verdict v for key k.
func report(v idem.Verdict, k string) func(e *env) (idem.Outcome, error) {
	return func(e *env) (idem.Outcome, error) {
		e.calls++
		out, err := idem.Outcome{Verdict: v}, errors.New("decided by the wrapper")
		e.runner.Report(context.Background(), k, out, err)
		return out, err
	}
}

// replayAs replays the key's success with an annotation that makes it v, as
// a wrapper does with a result it cannot answer with.
func replayAs(v idem.Verdict) func(e *env) (idem.Outcome, error) {
	return func(e *env) (idem.Outcome, error) {
		e.calls++
		cannot := errors.New("the stored result cannot be answered")
		ctx := idem.WithAnnotation(context.Background(), func(idem.Outcome, error) idem.Annotation {
			return idem.Annotation{Verdict: v, Err: cannot}
		})
		out, err := e.runner.Do(ctx, key, []byte(`{}`), ok)
		if err != nil || out.Verdict != idem.Replayed {
			return out, err
		}
		out.Verdict = v
		return out, cannot
	}
}

// Every verdict a call can have yields one span with the verdict, the key's
// hash, the attempts and the call's flags, an error status exactly for the
// verdicts that need attention, and the call's store calls as its children.
func TestCallSpans(t *testing.T) {
	seen, seenOps := map[idem.Verdict]bool{}, map[string]bool{idem.OpRenewLease: true} // RenewLease: TestHandlerAndRenewalSpansAreChildren
	for _, tc := range traceCases() {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.wrap, tc.opts...)
			if tc.setup != nil {
				tc.setup(e)
			}
			out, err := tc.run(e)
			if out.Verdict != tc.verdict {
				t.Fatalf("verdict %s (%v), want %s", out.Verdict, err, tc.verdict)
			}
			seen[tc.verdict] = true
			calls := e.callSpans()
			if len(calls) != e.calls {
				t.Fatalf("%d call spans for %d calls", len(calls), e.calls)
			}
			span := calls[len(calls)-1]
			checkCallSpan(t, span, tc)
			ops := e.storeOps(span)
			if !slices.Equal(ops, tc.ops) {
				t.Errorf("store spans %v, want %v", ops, tc.ops)
			}
			for _, op := range ops {
				seenOps[op] = true
			}
			checkNoKey(t, e.spans.Ended())
		})
	}
	for _, v := range idem.Verdicts() {
		if !seen[v] {
			t.Errorf("no case has the verdict %s", v)
		}
	}
	for _, op := range idem.StoreOps() {
		if !seenOps[op] {
			t.Errorf("no case makes the store call %s", op)
		}
	}
}

func checkCallSpan(t *testing.T, span sdktrace.ReadOnlySpan, tc traceCase) {
	t.Helper()
	if got := attr(span, idemotel.AttrVerdict).AsString(); got != tc.verdict.String() {
		t.Errorf("span verdict %q, want %q", got, tc.verdict)
	}
	wantHash := idem.HashKey(key)
	if tc.noKey {
		wantHash = ""
	}
	if got := attr(span, idemotel.AttrKeyHash).AsString(); got != wantHash && tc.verdict != idem.InvalidKey {
		t.Errorf("span key hash %q, want %q", got, wantHash)
	}
	if got := attr(span, idemotel.AttrAttempts).AsInt64(); got != tc.attempts {
		t.Errorf("span attempts %d, want %d", got, tc.attempts)
	}
	for _, k := range []attribute.Key{idemotel.AttrTookOver, idemotel.AttrCached, idemotel.AttrWaited, idemotel.AttrLeaseLost} {
		if got, want := attr(span, k).AsBool(), slices.Contains(tc.flags, k); got != want {
			t.Errorf("span %s = %v, want %v", k, got, want)
		}
	}
	if got := attr(span, idemotel.AttrStoreCalls).AsInt64(); got != int64(len(tc.ops)) {
		t.Errorf("span store calls %d, want %d", got, len(tc.ops))
	}
	wantErr := idemotel.NeedsAttention(tc.verdict)
	if got := span.Status().Code == codes.Error; got != wantErr || (wantErr && span.Status().Description != tc.verdict.String()) {
		t.Errorf("span status %+v, want error %v", span.Status(), wantErr)
	}
}

// checkNoKey fails if any span carries the key itself.
func checkNoKey(t *testing.T, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, s := range spans {
		for _, a := range s.Attributes() {
			if strings.Contains(a.Value.Emit(), key) {
				t.Errorf("span %s attribute %s holds the key", s.Name(), a.Key)
			}
		}
		for _, ev := range s.Events() {
			for _, a := range ev.Attributes {
				if strings.Contains(a.Value.Emit(), key) {
					t.Errorf("span %s event %s holds the key", s.Name(), ev.Name)
				}
			}
		}
	}
}

// NeedsAttention is true for every verdict but the successes (an unkeyed
// request included) and in_progress.
func TestNeedsAttention(t *testing.T) {
	for _, v := range idem.Verdicts() {
		want := v != idem.Executed && v != idem.Replayed && v != idem.Unkeyed && v != idem.InProgress
		if got := idemotel.NeedsAttention(v); got != want {
			t.Errorf("NeedsAttention(%s) = %v, want %v", v, got, want)
		}
	}
}

// A store call that fails has an error status; a refused reservation is
// the answer a duplicate is decided by, marked as a conflict, not an error.
func TestStoreSpanStatus(t *testing.T) {
	e := newEnv(t, nil)
	_, _ = e.do(`{}`, ok)
	_, _ = e.do(`{}`, ok)
	e.store.acquireErr = errors.New("store unreachable")
	_, _ = e.do(`{}`, ok)
	var acquires []sdktrace.ReadOnlySpan
	for _, s := range e.spans.Ended() {
		if s.Name() == idemotel.StoreSpanPrefix+idem.OpAcquire {
			acquires = append(acquires, s)
		}
	}
	if len(acquires) != 3 {
		t.Fatalf("%d Acquire spans, want 3", len(acquires))
	}
	for i, want := range []struct {
		conflict bool
		status   codes.Code
	}{{false, codes.Unset}, {true, codes.Unset}, {false, codes.Error}} {
		s := acquires[i]
		if attr(s, idemotel.AttrConflict).AsBool() != want.conflict || s.Status().Code != want.status {
			t.Errorf("Acquire %d: conflict %v, status %v; want %v, %v", i, attr(s, idemotel.AttrConflict).AsBool(), s.Status().Code, want.conflict, want.status)
		}
	}
}

// The handler runs in the call's span: its own spans are the call's
// children, and so are the renewals of its lease, made from their own
// goroutine.
func TestHandlerAndRenewalSpansAreChildren(t *testing.T) {
	const every = 10 * time.Second
	e := newEnv(t, nil, idem.WithLeaseRenewal(every), idem.WithLease(2*time.Second, time.Hour))
	e.blocking = true
	clock := e.clock
	// No deadline: the lease is the renewals' alone.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.calls++
	out, err := e.runner.Do(ctx, key, []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		_, span := e.tp.Tracer("handler").Start(ctx, "send mail")
		defer span.End()
		// One renewal: wait for the renewals to sleep, let the interval
		// pass, and wait for them to sleep again.
		if err := clock.WaitBlocked(ctx, 1); err != nil {
			return nil, err
		}
		clock.Advance(every)
		return []byte(`"sent"`), clock.WaitBlocked(ctx, 1)
	})
	if err != nil || out.Verdict != idem.Executed {
		t.Fatalf("Do = %+v, %v", out, err)
	}
	calls := e.callSpans()
	if len(calls) != 1 {
		t.Fatalf("%d call spans, want 1", len(calls))
	}
	if ops := e.storeOps(calls[0]); !slices.Equal(ops, []string{idem.OpAcquire, idem.OpRenewLease, idem.OpComplete}) {
		t.Errorf("store spans %v, want Acquire, RenewLease, Complete", ops)
	}
	for _, s := range e.spans.Ended() {
		if s.Name() == "send mail" && s.Parent().SpanID() != calls[0].SpanContext().SpanID() {
			t.Errorf("the handler's span is not the call's child")
		}
	}
}
