package idemotel

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgo/idem"
)

// ScopeName is the instrumentation scope of the spans and metrics.
const ScopeName = "github.com/idemgo/idem"

// Observer is an idem.Observer recording to OpenTelemetry. It is safe for
// concurrent use; create it with New.
type Observer struct {
	tracer    trace.Tracer
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
	m := mp.Meter(ScopeName)
	calls, err := m.Int64Counter("idem.calls", metric.WithDescription("Calls of idem.Runner.Do by verdict"), metric.WithUnit("{call}"))
	if err != nil {
		return nil, err
	}
	duration, err := m.Float64Histogram("idem.call.duration", metric.WithDescription("Time of a call"), metric.WithUnit("s"))
	if err != nil {
		return nil, err
	}
	storeTime, err := m.Float64Histogram("idem.store.duration", metric.WithDescription("Time of a call's store writes"), metric.WithUnit("s"))
	if err != nil {
		return nil, err
	}
	return &Observer{tracer: tp.Tracer(ScopeName), calls: calls, duration: duration, storeTime: storeTime}, nil
}

// Observe records one call: its span, ended now and started Duration ago,
// and its metrics.
func (o *Observer) Observe(ctx context.Context, ob idem.Observation) {
	verdict := attribute.String("idem.verdict", ob.Verdict.String())
	end := time.Now()
	_, span := o.tracer.Start(ctx, "idem", trace.WithTimestamp(end.Add(-ob.Duration)), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(verdict, attribute.String("idem.key_hash", ob.KeyHash), attribute.Int("idem.attempts", ob.Attempts),
			attribute.Bool("idem.took_over", ob.TookOver), attribute.Bool("idem.cached", ob.Cached), attribute.Int("idem.store_calls", ob.StoreCalls)))
	switch ob.Verdict {
	case idem.OutcomeNotRecorded, idem.StoreFailed, idem.FailedPermanently, idem.FailedTransiently, idem.RetriesExhausted:
		span.SetStatus(codes.Error, ob.Verdict.String())
	}
	span.End(trace.WithTimestamp(end))
	set := metric.WithAttributes(verdict)
	o.calls.Add(ctx, 1, set)
	o.duration.Record(ctx, ob.Duration.Seconds(), set)
	if ob.StoreCalls > 0 {
		o.storeTime.Record(ctx, ob.StoreTime.Seconds(), set)
	}
}
