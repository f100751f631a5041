package idemotel_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/memstore"
	idemotel "github.com/idemgo/idem/otel"
)

// observedRunner is a runner over a memstore whose observer records to
// in-memory span and metric readers.
func observedRunner(t *testing.T) (*idem.Runner, *tracetest.SpanRecorder, *sdkmetric.ManualReader) {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	o, err := idemotel.New(tp, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := idem.New(memstore.New(), idem.WithObserver(o))
	if err != nil {
		t.Fatal(err)
	}
	return r, spans, reader
}

func TestSpansAndMetrics(t *testing.T) {
	r, spans, reader := observedRunner(t)
	ctx := context.Background()
	ok := func(context.Context) ([]byte, error) { return []byte(`1`), nil }
	for range 3 {
		if _, err := r.Do(ctx, "evt:t1:a", []byte(`{}`), ok); err != nil {
			t.Fatal(err)
		}
	}
	// The observer passed to WithObserver traces too (it is an
	// idem.Tracer): one call span each.
	var ended []sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() == idemotel.CallSpan {
			ended = append(ended, s)
		}
	}
	if len(ended) != 3 {
		t.Fatalf("%d call spans, want 3", len(ended))
	}
	verdicts := map[string]int{}
	for _, s := range ended {
		for _, a := range s.Attributes() {
			if a.Key == "idem.verdict" {
				verdicts[a.Value.AsString()]++
			}
			if a.Key == "idem.key_hash" && a.Value.AsString() != idem.HashKey("evt:t1:a") {
				t.Errorf("span key hash %s", a.Value.AsString())
			}
		}
	}
	if verdicts["executed"] != 1 || verdicts["replayed"] != 2 {
		t.Errorf("span verdicts = %v, want 1 executed, 2 replayed", verdicts)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "idem.calls" {
				for _, dp := range sum.DataPoints {
					v, _ := dp.Attributes.Value("idem.verdict")
					counts[v.AsString()] += dp.Value
				}
			}
		}
	}
	if counts["executed"] != 1 || counts["replayed"] != 2 {
		t.Errorf("idem.calls = %v, want executed 1, replayed 2", counts)
	}
}
