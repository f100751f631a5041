package idem_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idemgo/idem"
)

// recTracer records what a runner asks of its Tracer. Its calls' contexts
// carry spanKey, so a test can see which context a store call or a handler
// was given.
type recTracer struct {
	mu      sync.Mutex
	started []string           // key hashes of started calls
	ended   []idem.Observation // observations of ended calls
	ops     []string           // store calls started
	open    int                // store calls started and not ended
	orphans int                // store calls made with a context that is not a call's
}

type spanKey struct{}

func (t *recTracer) StartCall(ctx context.Context, keyHash string) (context.Context, func(idem.Observation)) {
	t.mu.Lock()
	t.started = append(t.started, keyHash)
	t.mu.Unlock()
	var once sync.Once
	return context.WithValue(ctx, spanKey{}, keyHash), func(o idem.Observation) {
		once.Do(func() {
			t.mu.Lock()
			t.ended = append(t.ended, o)
			t.mu.Unlock()
		})
	}
}

func (t *recTracer) StartStoreCall(ctx context.Context, op string) (context.Context, func(error)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ops = append(t.ops, op)
	t.open++
	if ctx.Value(spanKey{}) == nil {
		t.orphans++
	}
	return ctx, func(error) {
		t.mu.Lock()
		t.open--
		t.mu.Unlock()
	}
}

// tracingObserver is an Observer that is also a Tracer.
type tracingObserver struct {
	recTracer
	observed int
}

func (o *tracingObserver) Observe(context.Context, idem.Observation) { o.observed++ }

// The runner starts one span per call, when the call starts, runs the call
// (its store calls and its handler) with the span's context, and ends the
// span once with the call's observation; every store call is ended.
func TestTracerSeesEveryCallAndStoreCall(t *testing.T) {
	tr := &recTracer{}
	f := newFixture(t, idem.WithTracer(tr))
	var handlerSpan any
	ok := func(ctx context.Context) ([]byte, error) { handlerSpan = ctx.Value(spanKey{}); return []byte(`1`), nil }
	for range 2 {
		if err := f.do("evt:tr1:a", `{}`, ok); err != nil {
			t.Fatal(err)
		}
	}
	_ = f.do("bad key", `{}`, ok)
	if handlerSpan != idem.HashKey("evt:tr1:a") {
		t.Errorf("the handler's context carries %v, want the call's span", handlerSpan)
	}
	want := []string{idem.HashKey("evt:tr1:a"), idem.HashKey("evt:tr1:a"), idem.HashKey("bad key")}
	if !slices.Equal(tr.started, want) || len(tr.ended) != 3 {
		t.Fatalf("started %v, ended %d; want %v, 3 ended", tr.started, len(tr.ended), want)
	}
	for i, v := range []idem.Verdict{idem.Executed, idem.Replayed, idem.InvalidKey} {
		if tr.ended[i].Verdict != v || tr.ended[i].KeyHash != want[i] {
			t.Errorf("call %d ended with %+v, want %s", i, tr.ended[i], v)
		}
	}
	if ops := []string{idem.OpAcquire, idem.OpComplete, idem.OpAcquire}; !slices.Equal(tr.ops, ops) || tr.open != 0 || tr.orphans != 0 {
		t.Errorf("store calls %v (%d not ended, %d outside a call); want %v, all ended, none outside", tr.ops, tr.open, tr.orphans, ops)
	}
}

// An Observer that is also a Tracer traces without WithTracer; WithTracer
// wins over it.
func TestObserverThatTraces(t *testing.T) {
	o := &tracingObserver{}
	f := newFixture(t, idem.WithObserver(o))
	if err := f.do("evt:tr2:a", `{}`, func(context.Context) ([]byte, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if o.observed != 1 || len(o.ended) != 1 || len(o.ops) != 2 {
		t.Errorf("observed %d, traced %d calls and %v; want 1, 1 and two store calls", o.observed, len(o.ended), o.ops)
	}
	other := &recTracer{}
	o2 := &tracingObserver{}
	f = newFixture(t, idem.WithObserver(o2), idem.WithTracer(other))
	if err := f.do("evt:tr2:a", `{}`, func(context.Context) ([]byte, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if len(o2.ended) != 0 || len(other.ended) != 1 || o2.observed != 1 {
		t.Errorf("observer traced %d, tracer %d, observed %d; want 0, 1, 1", len(o2.ended), len(other.ended), o2.observed)
	}
	if _, err := idem.New(f.store, idem.WithTracer(nil)); err == nil {
		t.Errorf("WithTracer(nil) = %v, want an error", err)
	}
}

// A call whose handler panics still ends its span, with the panic as its
// error, and the panic goes on to the caller.
func TestTracerEndsAPanickedCall(t *testing.T) {
	tr := &recTracer{}
	f := newFixture(t, idem.WithTracer(tr))
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want the handler's panic", p)
			}
		}()
		_ = f.do("evt:tr3:a", `{}`, func(context.Context) ([]byte, error) { panic("boom") })
	}()
	if len(tr.ended) != 1 || tr.ended[0].Err == nil || !strings.Contains(tr.ended[0].Err.Error(), "boom") {
		t.Fatalf("ended %+v, want one call ended with the panic", tr.ended)
	}
	if tr.open != 0 {
		t.Errorf("%d store calls not ended", tr.open)
	}
}
