package idemotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgo/idem"
)

// ScopeName is the instrumentation scope of the spans and metrics.
const ScopeName = "github.com/idemgo/idem"

// Span names.
const (
	// CallSpan is the name of the span of a call of idem.Runner.Do.
	CallSpan = "idem"
	// StoreSpanPrefix starts the name of a store call's span, followed by
	// the method's name: "idem.store.Acquire" (see idem.StoreOps).
	StoreSpanPrefix = "idem.store."
)

// Attribute keys of the spans (and, AttrVerdict, of the metrics).
const (
	// AttrVerdict is the call's verdict, as idem.Verdict's String names it.
	AttrVerdict = attribute.Key("idem.verdict")
	// AttrKeyHash is idem.HashKey of the call's key; the key itself is
	// never recorded.
	AttrKeyHash = attribute.Key("idem.key_hash")
	// AttrAttempts is the key's executions in all (idem.Outcome.Attempts).
	AttrAttempts = attribute.Key("idem.attempts")
	// AttrTookOver is true when the call took over an expired lease.
	AttrTookOver = attribute.Key("idem.took_over")
	// AttrCached is true for a replay answered from the runner's cache.
	AttrCached = attribute.Key("idem.cached")
	// AttrWaited is true when the call waited for a concurrent execution.
	AttrWaited = attribute.Key("idem.waited")
	// AttrLeaseLost is true when the call's lease could not be held
	// (idem.ErrLeaseLost).
	AttrLeaseLost = attribute.Key("idem.lease_lost")
	// AttrStoreCalls is the number of the call's store calls.
	AttrStoreCalls = attribute.Key("idem.store_calls")
	// AttrTenant is the call's tenant (idem.Observation.Tenant), on calls
	// that have one. It is a span attribute only, never a metric's: its
	// cardinality is the user's.
	AttrTenant = attribute.Key("idem.tenant")
	// AttrStoreOp is a store call's method (idem.StoreOps).
	AttrStoreOp = attribute.Key("idem.store.op")
	// AttrConflict is true on a reservation refused by a live record
	// (*idem.ConflictError).
	AttrConflict = attribute.Key("idem.store.conflict")
	// AttrNotFound is true on a read that found no record (idem.ErrNotFound).
	AttrNotFound = attribute.Key("idem.store.not_found")
)

// Tracer is an idem.Tracer that records OpenTelemetry spans: one per call of
// idem.Runner.Do, started when the call starts (a child of the span in the
// caller's context), and one per store call, a child of the call's span. It
// is safe for concurrent use; create it with NewTracer.
//
// A call's span (CallSpan) has the key's hash from its start, and at its end
// the verdict, the attempts, whether the call took over, was answered from
// the cache, waited or lost its lease, its store calls, and its tenant if it
// has one (AttrTenant). A verdict that
// needs attention (NeedsAttention) sets the span's status to Error, with
// the verdict as its description, and records the call's error as an
// event. A store call's span (StoreSpanPrefix and the method) has the
// method as AttrStoreOp; a reservation refused by a live record
// (*idem.ConflictError) sets AttrConflict and a read that found nothing
// (idem.ErrNotFound) AttrNotFound, the answers a duplicate is decided by;
// any other error sets the status to Error and is recorded.
type Tracer struct {
	tracer trace.Tracer
	names  map[string]string // store span names by method
}

var _ idem.Tracer = (*Tracer)(nil)

// NewTracer returns a Tracer recording with tp (otel.GetTracerProvider()
// for the global one).
func NewTracer(tp trace.TracerProvider) (*Tracer, error) {
	if tp == nil {
		return nil, errors.New("idemotel: nil tracer provider")
	}
	names := map[string]string{}
	for _, op := range idem.StoreOps() {
		names[op] = StoreSpanPrefix + op
	}
	return &Tracer{tracer: tp.Tracer(ScopeName), names: names}, nil
}

// StartCall implements idem.Tracer: it starts the call's span.
func (t *Tracer) StartCall(ctx context.Context, keyHash string) (context.Context, func(idem.Observation)) {
	ctx, span := t.tracer.Start(ctx, CallSpan, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrKeyHash.String(keyHash)))
	return ctx, func(ob idem.Observation) { endCall(span, ob) }
}

func endCall(span trace.Span, ob idem.Observation) {
	span.SetAttributes(AttrVerdict.String(ob.Verdict.String()), AttrAttempts.Int(ob.Attempts),
		AttrTookOver.Bool(ob.TookOver), AttrCached.Bool(ob.Cached), AttrWaited.Bool(ob.Waited),
		AttrLeaseLost.Bool(ob.LeaseLost), AttrStoreCalls.Int(ob.StoreCalls))
	if ob.Tenant != "" {
		span.SetAttributes(AttrTenant.String(ob.Tenant))
	}
	if NeedsAttention(ob.Verdict) {
		if ob.Err != nil {
			span.RecordError(ob.Err)
		}
		span.SetStatus(codes.Error, ob.Verdict.String())
	}
	span.End()
}

// StartStoreCall implements idem.Tracer: it starts the store call's span.
func (t *Tracer) StartStoreCall(ctx context.Context, op string) (context.Context, func(error)) {
	name, ok := t.names[op]
	if !ok {
		name = StoreSpanPrefix + op
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrStoreOp.String(op)))
	return ctx, func(err error) { endStoreCall(span, err) }
}

func endStoreCall(span trace.Span, err error) {
	var ce *idem.ConflictError
	switch {
	case err == nil:
	case errors.As(err, &ce):
		span.SetAttributes(AttrConflict.Bool(true))
	case errors.Is(err, idem.ErrNotFound):
		span.SetAttributes(AttrNotFound.Bool(true))
	default:
		span.RecordError(err)
		span.SetStatus(codes.Error, "store call failed")
	}
	span.End()
}

// NeedsAttention reports whether a call with verdict v failed: every verdict
// but executed, replayed, unkeyed (a request let through without a key, as
// configured) and in_progress (a concurrent execution: retry later). Their
// spans have the status Error.
func NeedsAttention(v idem.Verdict) bool {
	switch v {
	case idem.Executed, idem.Replayed, idem.Unkeyed, idem.InProgress:
		return false
	}
	return true
}

// Observer is an idem.Observer recording metrics to OpenTelemetry, and an
// idem.Tracer (its embedded Tracer) recording spans: passed to
// idem.WithObserver, it does both. It is safe for concurrent use; create it
// with New.
type Observer struct {
	*Tracer
	calls     metric.Int64Counter
	duration  metric.Float64Histogram
	storeTime metric.Float64Histogram
}

var _ idem.Observer = (*Observer)(nil)

// New returns an Observer that records spans with tp and metrics with mp
// (otel.GetTracerProvider() and otel.GetMeterProvider() for the global ones).
func New(tp trace.TracerProvider, mp metric.MeterProvider) (*Observer, error) {
	if tp == nil || mp == nil {
		return nil, errors.New("idemotel: nil provider")
	}
	t, err := NewTracer(tp)
	if err != nil {
		return nil, err
	}
	m := mp.Meter(ScopeName)
	calls, err := m.Int64Counter("idem.calls", metric.WithDescription("Calls of idem.Runner.Do by verdict"), metric.WithUnit("{call}"))
	if err != nil {
		return nil, err
	}
	duration, err := m.Float64Histogram("idem.call.duration", metric.WithDescription("Time of a call"), metric.WithUnit("s"))
	if err != nil {
		return nil, err
	}
	storeTime, err := m.Float64Histogram("idem.store.duration", metric.WithDescription("Time of a call's store calls"), metric.WithUnit("s"))
	if err != nil {
		return nil, err
	}
	return &Observer{Tracer: t, calls: calls, duration: duration, storeTime: storeTime}, nil
}

// Observe records one call's metrics: idem.calls, idem.call.duration and,
// if it made store calls, idem.store.duration, each with the verdict as
// AttrVerdict. Its span is the Tracer's.
func (o *Observer) Observe(ctx context.Context, ob idem.Observation) {
	set := metric.WithAttributes(AttrVerdict.String(ob.Verdict.String()))
	o.calls.Add(ctx, 1, set)
	o.duration.Record(ctx, ob.Duration.Seconds(), set)
	if ob.StoreCalls > 0 {
		o.storeTime.Record(ctx, ob.StoreTime.Seconds(), set)
	}
}
