package idem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemgo/idem/core"
)

// StepRecorder is an optional capability of a Store: recording the
// completed steps (recovery points) of an execution in its in-progress
// record, fenced by the lease token, so that an execution that takes the
// key over after a crash, or retries a retryable failure, resumes after
// the last completed step (see Step). Implementations are safe for
// concurrent use.
//
// RecordStep atomically appends step to the stored record of key if and
// only if that record is in progress, holds leaseToken and its lease is
// live at now (core.AddStep, the one rule); it also sets the record's
// UpdatedAt to now. Otherwise it writes nothing and returns:
//   - nil if the record already holds a step of that name with the same
//     result under leaseToken (a write retried after its answer was lost);
//   - an error wrapping ErrStepConflict if it holds a step of that name
//     with another result;
//   - an error wrapping ErrLeaseLost in every other case (no live record,
//     another token, completed, or the lease ended).
//
// A store with a size limit refuses, with a permanent typed error and
// without writing, a step that would make the record too large to
// complete. Failures of the store itself are marked as for Store's
// methods: transient only where the write certainly did not happen (a
// retry is safe either way: it is recognised).
type StepRecorder interface {
	// RecordStep appends step to the caller's live in-progress record.
	RecordStep(ctx context.Context, key, leaseToken string, step core.Step, now time.Time) error
}

// Errors of steps and downstream keys, checked with errors.Is.
var (
	// ErrStepsUnsupported: Step was called in an execution whose store does
	// not implement StepRecorder. The step's function did not run: a step
	// that could not be recorded would silently lose its guarantee.
	ErrStepsUnsupported = errors.New("idem: the store does not record steps")
	// ErrNoExecution: DownstreamKey or DownstreamUUID was called with a
	// context that belongs to no call of a Runner (a plain context), or
	// Step after its handler returned.
	ErrNoExecution = errors.New("idem: not in an execution")
	// ErrStepRepeated: Step was called twice with the same name in one
	// execution (after a first call that succeeded or is running). Names
	// are unique per execution: steps in a loop need one name each.
	ErrStepRepeated = errors.New("idem: step name used twice in one execution")
	// ErrStepConflict: the store already holds a step of that name for the
	// execution, with another result.
	ErrStepConflict = errors.New("idem: step already recorded with another result")
)

// execution is what a handler's context carries of its execution: the key,
// the lease, the steps completed so far (carried from the record and
// recorded by this try), and the try's store calls. Safe for concurrent
// use by the handler's goroutines; mu guards every field below it.
type execution struct {
	c     *call
	key   string
	token string

	mu        sync.Mutex
	steps     []core.Step
	running   map[string]bool // names of steps that ran or run in this try; made by the first Step
	done      bool            // the handler returned: no more steps
	calls     int
	storeTime time.Duration
}

type executionKey struct{}

// withExecution returns ctx carrying the execution of the try under rec,
// and the function that ends it when the handler returns: it sets rec.Steps
// to the steps the stored record now has and adds the try's step writes to
// the call's store calls.
func (c *call) withExecution(ctx context.Context, rec *core.Record) (context.Context, func()) {
	x := &execution{c: c, key: rec.Key, token: rec.LeaseToken, steps: append([]core.Step(nil), rec.Steps...)}
	return context.WithValue(ctx, executionKey{}, x), func() {
		steps, calls, storeTime := x.finish()
		rec.Steps = steps
		c.storeCalls, c.storeTime = c.storeCalls+calls, c.storeTime+storeTime
	}
}

func executionOf(ctx context.Context) *execution {
	x, _ := ctx.Value(executionKey{}).(*execution)
	return x
}

// Step runs fn as the recovery point name of the current execution, at most
// once per key while the record lasts: if an earlier execution of the key
// (one that crashed and was taken over, or failed retryably) completed the
// step, Step returns the result recorded then and fn does not run;
// otherwise it runs fn and, if fn succeeds, records its result in the store
// under the execution's lease before returning it. An error of fn is
// returned as it is and nothing is recorded: the step runs again on the
// next try. If the step's write fails, Step returns that error; after a
// transient failure (the write may have been applied) the step still counts
// as completed in this execution, so that a failure recorded for it keeps
// the step.
//
// What it guarantees: a step whose result was recorded never runs again
// for the key while its record lasts. A step whose fn ran but whose record
// was not written (a crash between the two, the record refused because the
// lease was lost, a store failure: Step then returns that error) WILL run
// again: give its external call a downstream key (DownstreamKey) so that
// the repetition is a no-op there. A success of the whole handler drops the
// steps: the stored result replaces them.
//
// Step starts no fn, and records no step, once the execution's time is
// over (the invocation's deadline, or the lease end less the lease margin):
// it returns a transient error wrapping ErrLeaseLost.
//
// Outside an execution (a plain context, or the runner disabled by
// EnvDisabled) Step just runs fn. With a store that does not implement
// StepRecorder it returns ErrStepsUnsupported without running fn. An
// invalid name is core.ErrInvalidStepName, a name used twice in one
// execution ErrStepRepeated (a name whose fn failed may be used again).
// Steps may run concurrently in the handler's goroutines; each must return
// before the handler does. Each step costs one store write.
func Step(ctx context.Context, name string, fn func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	x := executionOf(ctx)
	if x == nil {
		return fn(ctx)
	}
	if err := core.ValidateStepName(name); err != nil {
		return nil, err
	}
	if _, ok := x.c.r.store.(StepRecorder); !ok {
		return nil, fmt.Errorf("idem: step %q: %w", name, ErrStepsUnsupported)
	}
	if result, done, err := x.begin(name); done || err != nil {
		return result, err
	}
	if err := x.timeLeft(); err != nil {
		x.abandon(name)
		return nil, fmt.Errorf("idem: step %q not started: %w", name, err)
	}
	result, err := fn(ctx)
	if err != nil {
		x.abandon(name)
		return nil, err
	}
	if err := x.record(ctx, core.Step{Name: name, Result: result}); err != nil {
		err = fmt.Errorf("idem: step %q ran but was not recorded: %w", name, err)
		if errors.Is(err, ErrLeaseLost) {
			// No verdict on the handler: a takeover's completion wins, or
			// a later delivery resumes.
			err = core.MarkTransient(err)
		}
		return nil, err
	}
	return result, nil
}

// begin claims name for this try. done is true, with the recorded result,
// if an earlier execution completed the step.
func (x *execution) begin(name string) (result []byte, done bool, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done {
		return nil, false, fmt.Errorf("idem: step %q after its handler returned: %w", name, ErrNoExecution)
	}
	if x.running[name] {
		return nil, false, fmt.Errorf("idem: step %q: %w", name, ErrStepRepeated)
	}
	if x.running == nil {
		x.running = map[string]bool{}
	}
	x.running[name] = true
	for _, s := range x.steps {
		if s.Name == name {
			return append([]byte(nil), s.Result...), true, nil
		}
	}
	return nil, false, nil
}

func (x *execution) abandon(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.running, name)
}

// record writes step to the store and adds it to the execution's steps.
// Each write is counted as one of the call's store calls. It refuses to
// write once the window's limit has passed (timeLeft).
func (x *execution) record(ctx context.Context, step core.Step) error {
	wctx := ctx
	if ctx.Err() != nil {
		// fn succeeded: its record matters more than the caller's patience.
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
	}
	maybeApplied, err := x.write(wctx, step)
	if err == nil || maybeApplied {
		// After a write that may have been applied, fn completed either
		// way: a failure recorded for this execution keeps the step
		// rather than erase it.
		x.add(step)
	}
	return err
}

// write makes the step's write, retrying transient store errors within the
// execution's window (a retried write is recognised). maybeApplied reports
// that a failed try may have been applied.
func (x *execution) write(ctx context.Context, step core.Step) (maybeApplied bool, err error) {
	cfg := &x.c.r.cfg
	sr := x.c.r.store.(StepRecorder)
	for attempt := 1; ; attempt++ {
		if err := x.timeLeft(); err != nil {
			return maybeApplied, err
		}
		now := cfg.now()
		err := sr.RecordStep(ctx, x.key, x.token, step, now)
		x.count(cfg.now().Sub(now))
		if err == nil {
			return false, nil
		}
		if errors.Is(err, ErrLeaseLost) || core.Classify(err, x.c.r.storeChain...) != core.Transient {
			return maybeApplied, err
		}
		maybeApplied = true
		d, ok := core.NextRetry(core.RetryPlan{
			Attempt: attempt, MaxAttempts: cfg.completeTries, Base: cfg.base, Max: cfg.max,
			Now: cfg.now(), Deadline: x.c.w.limit, RetryAfter: core.RetryAfter(err), R: cfg.rand(),
			Backoff: cfg.backoff,
		})
		if !ok || cfg.sleep(ctx, d) != nil {
			return true, err
		}
	}
}

// timeLeft returns nil while the execution's time lasts (its window's
// limit: the deadline, or the lease end less the margin), and after that a
// transient error wrapping ErrLeaseLost: the lease may end before a step's
// work or write is done, and a takeover could start beside it. Transient,
// because the lease is not lost yet and a later delivery may resume.
func (x *execution) timeLeft() error {
	if x.c.r.cfg.now().Before(x.c.w.limit) {
		return nil
	}
	return core.MarkTransient(fmt.Errorf("idem: the execution's time is over (%s): %w", x.c.w.limit.UTC().Format(time.RFC3339Nano), ErrLeaseLost))
}

func (x *execution) count(d time.Duration) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.calls++
	x.storeTime += d
}

func (x *execution) add(step core.Step) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.steps = append(x.steps, step)
}

// finish ends the try: no step starts after it. It returns the steps the
// record now holds and the try's store calls.
func (x *execution) finish() (steps []core.Step, calls int, storeTime time.Duration) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.done = true
	return x.steps, x.calls, x.storeTime
}

// DownstreamKey returns the stable key for the external call name made by
// the current execution: core.DownstreamKey of the execution's idempotency
// key and name, 32 hex characters, the same in every execution of the key
// (retries, takeovers, redeliveries). Pass it to APIs that accept an
// idempotency key (payments, mail, ticketing, AWS ClientToken) so that a
// repeated call is a no-op there. A runner disabled by EnvDisabled gives
// its handlers the same keys. Outside a call of a Runner it returns
// ErrNoExecution.
func DownstreamKey(ctx context.Context, name string) (string, error) {
	key, ok := callKey(ctx)
	if !ok {
		return "", fmt.Errorf("idem: downstream key %q: %w", name, ErrNoExecution)
	}
	return core.DownstreamKey(key, name), nil
}

// DownstreamUUID is DownstreamKey formatted as a UUID (core.DownstreamUUID,
// an RFC 9562 version 8 UUID), for APIs that accept only UUIDs as
// idempotency keys.
func DownstreamUUID(ctx context.Context, name string) (string, error) {
	key, ok := callKey(ctx)
	if !ok {
		return "", fmt.Errorf("idem: downstream UUID %q: %w", name, ErrNoExecution)
	}
	return core.DownstreamUUID(key, name), nil
}

// unprotectedKey is the context key under which a runner disabled by
// EnvDisabled gives its handler the call's idempotency key.
type unprotectedKey struct{}

// callKey returns the idempotency key of the call ctx belongs to: an
// execution's, or an unprotected call's.
func callKey(ctx context.Context) (string, bool) {
	if x := executionOf(ctx); x != nil {
		return x.key, true
	}
	key, ok := ctx.Value(unprotectedKey{}).(string)
	return key, ok
}
