package idemotel_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/memstore"
	idemotel "github.com/idemgo/idem/otel"
)

// A traced call: its span starts with the call, its store calls are its
// children, and it ends with the verdict.
func ExampleNewTracer() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tracer, err := idemotel.NewTracer(tp)
	if err != nil {
		panic(err)
	}
	runner, err := idem.New(memstore.New(), idem.WithTracer(tracer))
	if err != nil {
		panic(err)
	}
	send := func(context.Context) ([]byte, error) { return []byte(`"sent"`), nil }
	for range 2 {
		if _, err := runner.Do(context.Background(), "evt:order-1:receipt", []byte(`{}`), send); err != nil {
			panic(err)
		}
	}
	for _, s := range spans.Ended() {
		verdict := ""
		for _, a := range s.Attributes() {
			if a.Key == idemotel.AttrVerdict {
				verdict = " " + a.Value.AsString()
			}
		}
		fmt.Printf("%s%s\n", s.Name(), verdict)
	}
	// Output:
	// idem.store.Acquire
	// idem.store.Complete
	// idem executed
	// idem.store.Acquire
	// idem replayed
}
