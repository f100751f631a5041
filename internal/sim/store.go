package sim

import (
	"context"
	"errors"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// ErrInjected is wrapped by every store error the simulation injects.
// Checked with errors.Is.
var ErrInjected = errors.New("sim: injected store fault")

// InjectedError is a store fault the simulation injected: Kind is
// "throttled", "timeout" or "answer lost". It wraps ErrInjected and, for a
// timeout, context.DeadlineExceeded.
type InjectedError struct {
	// Op is the store method: reserve, complete or get.
	Op string
	// Kind is what happened.
	Kind string
	// Applied reports that the write took effect (a lost answer).
	Applied bool
}

// Error describes the fault.
func (e *InjectedError) Error() string { return "sim: injected store fault: " + e.Op + ": " + e.Kind }

// Unwrap returns ErrInjected, and context.DeadlineExceeded for a timeout.
func (e *InjectedError) Unwrap() []error {
	if e.Kind == "timeout" {
		return []error{ErrInjected, context.DeadlineExceeded}
	}
	return []error{ErrInjected}
}

// fault is the draw for one store call.
type fault int

const (
	faultNone fault = iota
	faultThrottle
	faultTimeout
	faultLost
)

// faultStore is the idem.Store the runners see: every call is two yields
// (request and answer legs) around the inner store's call, which may be
// replaced or followed by a fault; every answer of the inner store is
// checked against the shadow model.
type faultStore struct {
	s     *simulation
	inner idem.Store
}

var _ idem.Store = (*faultStore)(nil)

// draw picks the fault of a call; writes may lose their answer.
func (f *faultStore) draw(write bool) fault {
	s, fl := f.s, f.s.cfg.Faults
	r := s.rng.Float64()
	switch {
	case r < fl.Throttle:
		s.stats.Throttles++
		return faultThrottle
	case r < fl.Throttle+fl.Timeout:
		s.stats.Timeouts++
		return faultTimeout
	case write && s.chance(fl.LostAnswer):
		s.stats.LostAnswers++
		return faultLost
	}
	return faultNone
}

func injected(op string, fa fault) error {
	switch fa {
	case faultThrottle:
		return core.MarkTransient(&InjectedError{Op: op, Kind: "throttled"})
	case faultTimeout:
		return &InjectedError{Op: op, Kind: "timeout"}
	case faultLost:
		return core.MarkTransient(&InjectedError{Op: op, Kind: "answer lost", Applied: true})
	}
	return nil
}

// innerCtx bounds a call of the inner store on the wall clock: only a real
// store (over the network) ever waits.
func innerCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// faultWrite runs one write of the inner store (inner) with the yields and
// faults of a write: it may be throttled or time out before it is sent, or
// lose its answer after the inner store applied it. after updates the
// shadow model with the inner store's answer, whatever the caller gets.
func faultWrite[T any](ctx context.Context, f *faultStore, op string, inner func(context.Context) (T, error), after func(t *task, v T, err error)) (T, error) {
	var zero T
	t := taskOf(ctx)
	t.yield(f.s.latency())
	if err := t.simDone(ctx); err != nil {
		return zero, err
	}
	fa := f.draw(true)
	if fa == faultThrottle || fa == faultTimeout {
		t.yield(f.s.latency())
		return zero, injected(op, fa)
	}
	ictx, cancel := innerCtx()
	v, err := inner(ictx)
	cancel()
	f.s.stats.StoreWrites++
	if refused(err) {
		f.s.stats.StoreRefusals++
	}
	after(t, v, err)
	if fa == faultLost {
		t.d.ks.note("(answer lost)")
		v, err = zero, injected(op, fa)
	}
	t.yield(f.s.latency())
	return v, err
}

// refused reports whether a store write was refused by its condition: a
// conflict (the key is held, or another payload's) or a lost lease.
func refused(err error) bool {
	var ce *idem.ConflictError
	return errors.As(err, &ce) || errors.Is(err, idem.ErrLeaseLost) || errors.Is(err, idem.ErrStepConflict)
}

func (f *faultStore) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	_, err := faultWrite(ctx, f, "reserve", func(ictx context.Context) (struct{}, error) {
		return struct{}{}, f.inner.Reserve(ictx, rec, prev, now)
	}, func(t *task, _ struct{}, err error) { f.s.afterReserve(t, rec, prev, now, err) })
	return err
}

func (f *faultStore) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	return faultWrite(ctx, f, "complete", func(ictx context.Context) (core.Record, error) {
		return f.inner.Complete(ictx, rec)
	}, func(t *task, _ core.Record, err error) { f.s.afterComplete(t, rec, err) })
}

func (f *faultStore) Get(ctx context.Context, key string, now time.Time) (core.Record, error) {
	t := taskOf(ctx)
	t.yield(f.s.latency())
	if err := t.simDone(ctx); err != nil {
		return core.Record{}, err
	}
	if fa := f.draw(false); fa != faultNone {
		t.yield(f.s.latency())
		return core.Record{}, injected("get", fa)
	}
	ictx, cancel := innerCtx()
	rec, err := f.inner.Get(ictx, key, now)
	cancel()
	f.s.stats.StoreReads++
	t.yield(f.s.latency())
	return rec, err
}

// latency draws one leg of a store call.
func (s *simulation) latency() time.Duration {
	fl := s.cfg.Faults
	if s.chance(fl.Slow) {
		return s.between(fl.LatencyMin, fl.SlowMax)
	}
	return s.between(fl.LatencyMin, fl.LatencyMax)
}
