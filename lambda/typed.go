package idemlambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/awsclassify"
	"github.com/idemgo/idem/core"
)

// ErrResultOmitted is returned (checked with errors.Is) by a Typed handler
// for a duplicate of an event that succeeded earlier but whose result was too
// large for the store to keep: the outcome is known, the result is not.
var ErrResultOmitted = errors.New("idemlambda: stored result was omitted (too large) and cannot be replayed")

// Typed returns a handler for any event type In (EventBridge, Step
// Functions, a direct invocation) that runs handler at most once per key
// through runner. keyFn gives the key of an event: it is used verbatim and
// must be a valid key (8 to 128 characters of [A-Za-z0-9:_-], see
// core.ValidateKey); derive one from free-form identities with EventKey or
// core.DeriveKey. A keyFn error is returned wrapped with ErrMissingKey and
// core.ErrInvalidKey. When the invocation has a tenant id (Lambda's tenant
// isolation mode), the stored key is the key scoped by it (ScopedKey with
// ScopeTenant), so that two tenants' events with one key never share a
// record; StoredKey gives the handler the scoped key.
//
// The payload fingerprint is the JSON of the event (the part
// WithFingerprintSelection covers, if given); handler's Out is stored
// as JSON and decoded on a replay. Errors are the runner's, passed through
// as they are (*core.InProgressError, *core.FailureError,
// core.ErrKeyReused, idem.ErrTransientFailure, ...), so that the invoker's
// own retry policy (a Step Functions Retry, Lambda's asynchronous retries)
// sees them. When handler ran but its outcome could not be recorded, its Out
// is returned together with the error.
//
// The key's executions are bounded by the runner's bound
// (idem.DefaultMaxAttempts without idem.WithMaxAttempts): more than
// Lambda's asynchronous invocation runs an event (three times at most) and
// a Step Functions Retry's default, so neither is cut short, and enough to
// stop a synchronous caller that retries forever.
func Typed[In, Out any](runner *idem.Runner, keyFn func(In) (string, error), handler func(ctx context.Context, in In) (Out, error), opts ...Option) (func(context.Context, In) (Out, error), error) {
	if runner == nil {
		return nil, errors.New("idemlambda: nil runner")
	}
	if keyFn == nil {
		return nil, errors.New("idemlambda: nil key function")
	}
	if handler == nil {
		return nil, errors.New("idemlambda: nil handler")
	}
	cfg, err := configure(opts, func(o Option, c *config) error { return o(c) })
	if err != nil {
		return nil, err
	}
	w := &typedWrapper[In, Out]{runner: runner, keyFn: keyFn, handler: handler, cfg: cfg}
	if cfg.selectionSet {
		w.fingerprint = cfg.selection.Fingerprint
	}
	return w.call, nil
}

type typedWrapper[In, Out any] struct {
	runner      *idem.Runner
	keyFn       func(In) (string, error)
	handler     func(context.Context, In) (Out, error)
	cfg         config
	fingerprint idem.FingerprintFunc // WithFingerprintSelection's; nil: the runner's
}

func (w *typedWrapper[In, Out]) call(ctx context.Context, in In) (Out, error) {
	var zero Out
	var replay typedReplay[Out]
	ctx = idem.WithAnnotation(ctx, replay.annotate)
	key, err := w.keyFn(in)
	if err == nil {
		key, ctx, err = tenantScoped(ctx, key)
	}
	if err != nil {
		err = fmt.Errorf("%w: %w: %w", ErrMissingKey, core.ErrInvalidKey, err)
		w.runner.Report(withTenant(ctx, lambdaTenant(ctx)), "", idem.Outcome{Verdict: idem.MissingKey}, err)
		return zero, err
	}
	payload, err := json.Marshal(in)
	if err != nil {
		err = fmt.Errorf("%w: %w", core.ErrInvalidPayload, err)
		w.runner.Report(ctx, key, idem.Outcome{Verdict: idem.InvalidPayload}, err)
		return zero, err
	}
	defer reportPanic(ctx, w.runner, key)
	var fresh *Out
	doCtx := ctx
	if w.fingerprint != nil {
		doCtx = idem.ContextWithFingerprint(ctx, w.fingerprint)
	}
	_, err = w.runner.Do(doCtx, key, payload, func(ctx context.Context) ([]byte, error) {
		o, herr := w.handler(withCall(ctx, key, payload), in)
		if herr != nil {
			return nil, awsclassify.Mark(herr)
		}
		b, merr := json.Marshal(o)
		if merr != nil {
			return nil, core.MarkPermanent(fmt.Errorf("idemlambda: result does not marshal: %w", merr))
		}
		fresh = &o
		return b, nil
	})
	switch {
	case fresh != nil:
		// The handler's own Out, even when its outcome could not be
		// recorded.
		return *fresh, err
	case err != nil:
		// The runner's error, passed through as it is.
		return zero, err
	}
	return replay.out, replay.err
}

// typedReplay is a replayed result, decoded at the end of its call so that
// the call is logged and observed with what became of it.
type typedReplay[Out any] struct {
	out Out
	err error
}

// annotate names the wrapper in the call's record and, for a replay,
// decodes the stored result: a result that was omitted is
// idem.ReplayOmitted (ErrResultOmitted), one that does not decode
// idem.ReplayCorrupt.
func (r *typedReplay[Out]) annotate(out idem.Outcome, err error) idem.Annotation {
	a := idem.Annotation{Attrs: []slog.Attr{slog.String("wrapper", "typed")}}
	if err != nil || out.Verdict != idem.Replayed {
		return a
	}
	switch {
	case out.ResultOmitted:
		r.err = ErrResultOmitted
		a.Verdict = idem.ReplayOmitted
	default:
		if derr := json.Unmarshal(out.Result, &r.out); derr != nil {
			var zero Out
			r.out, r.err = zero, fmt.Errorf("idemlambda: stored result does not decode into %T: %w", zero, derr)
			a.Verdict = idem.ReplayCorrupt
		}
	}
	a.Err = r.err
	return a
}
