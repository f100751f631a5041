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
// "throttled", "timeout", "answer lost", "cut" (the caller's context
// ended, or the call's own deadline passed, during the call), or, in a run
// of two Regions under MRSC, "replicated write conflict". It wraps
// ErrInjected and Cause (context.DeadlineExceeded for a timeout; for a cut
// call, the context's error).
type InjectedError struct {
	// Op is the store method: reserve, acquire, complete, get, step,
	// renew, blob-put or blob-get.
	Op string
	// Kind is what happened.
	Kind string
	// Applied reports that the write took effect.
	Applied bool
	// Cause is the context error the fault stands for, if any.
	Cause error
}

// Error describes the fault.
func (e *InjectedError) Error() string {
	msg := "sim: injected store fault: " + e.Op + ": " + e.Kind
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Unwrap returns ErrInjected, and Cause if there is one.
func (e *InjectedError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ErrInjected, e.Cause}
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

// faultStore is the idem.Store the runners see (see runnerStore): every
// call parks its caller for two legs (request and answer) around the inner
// store's call, which may be replaced or followed by a fault; every answer
// of the inner store is checked against the shadow model. It implements
// every optional capability; those the inner store lacks answer as a store
// without them would (ErrStepsUnsupported, ErrNoStaging, a refused
// renewal).
type faultStore struct {
	s     *simulation
	inner idem.Store
}

var (
	_ idem.Store           = (*faultStore)(nil)
	_ idem.StepRecorder    = (*faultStore)(nil)
	_ idem.LeaseRenewer    = (*faultStore)(nil)
	_ idem.StagedCompleter = (*faultStore)(nil)
	_ idem.ErrorClassifier = (*faultStore)(nil)
)

// drawFault picks the fault of a call; writes may lose their answer.
func (s *simulation) drawFault(write bool) fault {
	fl := s.cfg.Faults
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
		return &InjectedError{Op: op, Kind: "timeout", Cause: context.DeadlineExceeded}
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

// legRule is how the legs of one store call park its caller.
type legRule struct {
	a     *actor
	call  *call         // the call the store call belongs to
	until time.Duration // the call is cut there (its context's end); never: not cut
	intr  bool          // the loss of the lease cuts it too (a call made by a handler)
	hold  bool          // the next leg lasts until stop
	stop  <-chan struct{}
	rn    *renewal // the renewal goroutine calling, if any
}

// leg parks the caller for one leg of d. It reports false if the leg was
// cut: its context ended, the renewals stopped, or the lease was lost. A
// crash may be drawn at a task's legs.
func (s *simulation) leg(r *legRule, d time.Duration) bool {
	at, kind := s.now+max(d, 0), wakeRun
	cut := r.until != never && at > r.until
	if cut {
		at = max(r.until, s.now)
	}
	if r.hold {
		at, cut = never, true
	}
	if r.rn == nil && s.chance(s.cfg.Faults.Crash) {
		at, kind = s.now+time.Duration(s.rng.Float64()*float64(at-s.now)), wakeCrash
	}
	k := r.a.park(at, kind, r.intr, r.stop)
	return k == wakeRun && !cut
}

// err is the error of a call whose leg was cut: after the write was
// applied if applied.
func (r *legRule) err(op string, applied bool) error {
	var cause error
	switch {
	case r.rn != nil && r.rn.ctx.Err() != nil:
		return r.rn.ctx.Err() // the renewals stopped: the runner's own error
	case r.rn != nil:
		cause = context.DeadlineExceeded
	default:
		cause = r.call.ctxErr()
	}
	return &InjectedError{Op: op, Kind: "cut", Applied: applied, Cause: cause}
}

// rule returns how the store call the current actor makes with ctx parks
// it, and the call it belongs to. A call made by a handler whose context is
// live ends with that context (its end, or the loss of its lease); other
// calls of a task are never cut (the runner gives its completions a context
// of their own).
func (s *simulation) rule(ctx context.Context) (*legRule, *call) {
	a := s.cur
	if a.rn != nil {
		return a.rn.rule(), a.rn.c
	}
	c := a.t.cur
	r := &legRule{a: a, call: c, until: never}
	if c.try != nil && ctx.Done() != nil && c.ctxErr() == nil {
		r.intr = true
		if a.t.cancelAt >= 0 {
			r.until = a.t.cancelAt
		}
	}
	return r, c
}

// faultCall runs one call of an inner store (inner) with the legs and
// faults of a store call: it may be throttled or time out before it is
// sent, or, a write, lose its answer after it was applied. after, if not
// nil, is told the inner store's answer, whatever the caller gets (lost:
// the answer is lost).
func faultCall[T any](s *simulation, r *legRule, op string, write bool, inner func(context.Context) (T, error), after func(v T, err error, lost bool)) (T, error) {
	var zero T
	if !s.leg(r, s.latency()) {
		return zero, r.err(op, false)
	}
	fa := s.drawFault(write)
	if fa == faultThrottle || fa == faultTimeout {
		if !s.leg(r, s.latency()) {
			return zero, r.err(op, false)
		}
		return zero, injected(op, fa)
	}
	ictx, cancel := innerCtx()
	v, err := inner(ictx)
	cancel()
	if after != nil {
		after(v, err, fa == faultLost)
	}
	if fa == faultLost {
		r.call.ks.note("(answer lost)")
		v, err = zero, injected(op, fa)
	}
	if !s.leg(r, s.latency()) {
		return zero, r.err(op, write)
	}
	return v, err
}

// faultWrite runs one write of the store under test (see faultCall) and
// counts it; after updates the shadow model with the inner store's answer.
func faultWrite[T any](f *faultStore, r *legRule, op string, inner func(context.Context) (T, error), after func(v T, err error, lost bool)) (T, error) {
	s := f.s
	return faultCall(s, r, op, true, inner, func(v T, err error, lost bool) {
		s.stats.StoreWrites++
		if refused(err) {
			s.stats.StoreRefusals++
		}
		after(v, err, lost)
	})
}

// refused reports whether a store write was refused by its condition: a
// conflict (the key is held, or another payload's) or a lost lease.
func refused(err error) bool {
	var ce *idem.ConflictError
	return errors.As(err, &ce) || errors.Is(err, idem.ErrLeaseLost) || errors.Is(err, idem.ErrStepConflict)
}

// begin starts a store call of ctx's caller: the call's rule, its call, and
// the context's error if ctx is the task's own context and done.
func (f *faultStore) begin(ctx context.Context) (*legRule, *call, error) {
	r, c := f.s.rule(ctx)
	if r.rn == nil {
		if err := c.t.simDone(ctx); err != nil {
			return nil, nil, err
		}
	}
	return r, c, nil
}

func (f *faultStore) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	r, c, err := f.begin(ctx)
	if err != nil {
		return err
	}
	_, err = faultWrite(f, r, "reserve", func(ictx context.Context) (struct{}, error) {
		return struct{}{}, f.inner.Reserve(ictx, rec, prev, now)
	}, func(_ struct{}, err error, _ bool) { f.s.afterReserve(c, rec, prev, now, err) })
	if err == nil {
		f.s.reserved(c, rec.LeaseUntil)
	}
	return err
}

func (f *faultStore) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	r, c, err := f.begin(ctx)
	if err != nil {
		return core.Record{}, err
	}
	return faultWrite(f, r, "complete", func(ictx context.Context) (core.Record, error) {
		return f.inner.Complete(ictx, rec)
	}, func(got core.Record, err error, _ bool) { f.s.afterComplete(c, rec, got, err) })
}

func (f *faultStore) Get(ctx context.Context, key string, now time.Time) (core.Record, error) {
	r, c, err := f.begin(ctx)
	if err != nil {
		return core.Record{}, err
	}
	s := f.s
	return faultCall(s, r, "get", false, func(ictx context.Context) (core.Record, error) {
		return f.inner.Get(ictx, key, now)
	}, func(rec core.Record, err error, _ bool) {
		s.stats.StoreReads++
		s.afterGet(c, rec, now, err)
	})
}

// ClassifyError implements idem.ErrorClassifier: the inner store's
// classification, if it has one.
func (f *faultStore) ClassifyError(err error) core.Class {
	if ec, ok := f.inner.(idem.ErrorClassifier); ok {
		return ec.ClassifyError(err)
	}
	return core.Unknown
}

// latency draws one leg of a store call.
func (s *simulation) latency() time.Duration {
	fl := s.cfg.Faults
	if s.chance(fl.Slow) {
		return s.between(fl.LatencyMin, fl.SlowMax)
	}
	return s.between(fl.LatencyMin, fl.LatencyMax)
}

// acquiringStore is the faultStore of an inner store that is an
// idem.Acquirer, for services that reserve through Acquire.
type acquiringStore struct {
	*faultStore
	acq idem.Acquirer
}

// runnerStore returns the store sv's runners see: the faultStore, with the
// Acquirer capability when the inner store has it and sv reserves through
// it.
func (f *faultStore) runnerStore(sv *service) idem.Store {
	if a, ok := f.inner.(idem.Acquirer); ok && !sv.ReserveOnly {
		return acquiringStore{faultStore: f, acq: a}
	}
	return f
}
