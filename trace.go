package idem

import (
	"context"
	"errors"
	"fmt"
)

// Tracer traces each call of Runner.Do while it runs, and the store calls
// it makes: the hook that spans are made from (the otel module implements it
// for OpenTelemetry). It is optional: set it with WithTracer, or pass an
// Observer that also implements it to WithObserver. Without one, the runner
// makes no tracing call and allocates nothing for it.
//
// StartCall is called once per call, when the call starts (before its key
// is validated), and once per verdict a wrapper reports without a call
// (Runner.Report, whose end function follows at once), with the caller's
// context and the key's hash (HashKey, "" when the event has no key; a
// Tracer never sees the key). It returns the context the call then runs
// with, and the function that ends the call. Every store call of the call,
// its handler and its lease renewals are given that context or one derived
// from it, so spans started under it are the call's children; the call's
// log record and Observe get it too. The runner calls the end function
// exactly once, at the end of the call, with the call's Observation (its
// verdict, attempts, takeover, ...), after the call has been logged and
// observed; if the call panics (its handler did), with an Observation whose
// Err holds the panic (its verdict VerdictUnknown), before the panic goes
// on.
//
// StartStoreCall is called before each store call the runner makes, with
// the context the store call is then made with, and op, the name of the
// method called (StoreOps lists them). It returns the context the store call
// is given and the function that ends it, which the runner calls exactly once
// when the store call returns, with the error it returned: nil, a
// *ConflictError (a reservation refused by a live record: the answer that
// decides a duplicate), an error wrapping ErrNotFound (a read that found
// nothing), ErrLeaseLost, or the store's own failure. Lease renewals
// (WithLeaseRenewal) and the steps of a handler's goroutines make their store
// calls concurrently with the handler: the store call's functions may be
// called from several goroutines at once.
//
// Implementations are safe for concurrent use and should not block.
type Tracer interface {
	// StartCall starts tracing one call of Runner.Do.
	StartCall(ctx context.Context, keyHash string) (context.Context, func(Observation))
	// StartStoreCall starts tracing one store call of a call.
	StartStoreCall(ctx context.Context, op string) (context.Context, func(error))
}

// The store calls a runner makes, as StartStoreCall names them: the Store,
// Acquirer, StagedCompleter, StepRecorder, LeaseRenewer and Releaser
// methods (a runner releases only its own reservation, for a handler error
// marked core.MarkNoRecord).
const (
	OpAcquire        = "Acquire"
	OpReserve        = "Reserve"
	OpComplete       = "Complete"
	OpCompleteStaged = "CompleteStaged"
	OpGet            = "Get"
	OpRecordStep     = "RecordStep"
	OpRenewLease     = "RenewLease"
	OpRelease        = "Release"
)

// StoreOps returns the names of the store calls a runner makes (OpAcquire
// ... OpRelease), in that order.
func StoreOps() []string {
	return []string{OpAcquire, OpReserve, OpComplete, OpCompleteStaged, OpGet, OpRecordStep, OpRenewLease, OpRelease}
}

// WithTracer sets the tracer of calls and their store calls (default: the
// observer, if it implements Tracer; else none).
func WithTracer(t Tracer) Option {
	return func(c *config) error {
		if t == nil {
			return errors.New("idem: nil tracer")
		}
		c.tracer = t
		return nil
	}
}

// tracerOrObserver is the runner's Tracer: WithTracer's, else the
// observer's if it is one, else nil.
func (c *config) tracerOrObserver() Tracer {
	if c.tracer != nil {
		return c.tracer
	}
	t, _ := c.observer.(Tracer)
	return t
}

// noEnd ends nothing: the end of an untraced store call.
func noEnd(error) {}

// traceStore starts the span of a store call op made with ctx: it returns
// the context to make the call with and the function to call with its
// error. Without a tracer, ctx and a function that does nothing.
func (r *Runner) traceStore(ctx context.Context, op string) (context.Context, func(error)) {
	if r.cfg.tracer == nil {
		return ctx, noEnd
	}
	return r.cfg.tracer.StartStoreCall(ctx, op)
}

// startCall starts the call's span, if the runner has a tracer: the call
// then runs with the span's context.
func (c *call) startCall() {
	if t := c.r.cfg.tracer; t != nil {
		c.ctx, c.endSpan = t.StartCall(c.ctx, keyHash(c.key))
	}
}

// endPanicked ends the span of a call that panics (its handler did) with
// the panic as its error, and lets the panic go on.
func (c *call) endPanicked() {
	if p := recover(); p != nil {
		c.endSpan(c.observation(Outcome{}, fmt.Errorf("idem: the call panicked: %v", p)))
		panic(p)
	}
}
