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
// core.ErrInvalidKey.
//
// The payload fingerprint is the JSON of the event (the part
// WithFingerprintSelection covers, if given); handler's Out is stored
// as JSON and decoded on a replay. Errors are the runner's, passed through
// as they are (*core.InProgressError, *core.FailureError,
// core.ErrKeyReused, idem.ErrTransientFailure, ...), so that the invoker's
// own retry policy (a Step Functions Retry, Lambda's asynchronous retries)
// sees them. When handler ran but its outcome could not be recorded, its Out
// is returned together with the error.
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
	key, err := w.keyFn(in)
	if err != nil {
		err = fmt.Errorf("%w: %w: %w", ErrMissingKey, core.ErrInvalidKey, err)
		typedLog(ctx, w.cfg.logger, "", idem.InvalidKey.String(), idem.Outcome{}, err)
		return zero, err
	}
	payload, err := json.Marshal(in)
	if err != nil {
		err = fmt.Errorf("%w: %w", core.ErrInvalidPayload, err)
		typedLog(ctx, w.cfg.logger, key, idem.InvalidPayload.String(), idem.Outcome{}, err)
		return zero, err
	}
	var fresh *Out
	doCtx := ctx
	if w.fingerprint != nil {
		doCtx = idem.ContextWithFingerprint(ctx, w.fingerprint)
	}
	out, err := w.runner.Do(doCtx, key, payload, func(ctx context.Context) ([]byte, error) {
		o, herr := w.handler(withStoredKey(ctx, key), in)
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
	if fresh != nil || err != nil {
		// The handler's own Out, even when its outcome could not be
		// recorded; or the runner's error, passed through as it is.
		typedLog(ctx, w.cfg.logger, key, out.Verdict.String(), out, err)
		if fresh != nil {
			return *fresh, err
		}
		return zero, err
	}
	return w.replay(ctx, key, out)
}

// replay decodes a replayed result.
func (w *typedWrapper[In, Out]) replay(ctx context.Context, key string, out idem.Outcome) (Out, error) {
	var o Out
	if out.ResultOmitted {
		typedLog(ctx, w.cfg.logger, key, "replay_omitted", out, ErrResultOmitted)
		return o, ErrResultOmitted
	}
	if err := json.Unmarshal(out.Result, &o); err != nil {
		err = fmt.Errorf("idemlambda: stored result does not decode into %T: %w", o, err)
		typedLog(ctx, w.cfg.logger, key, "replay_corrupt", out, err)
		var zero Out
		return zero, err
	}
	typedLog(ctx, w.cfg.logger, key, out.Verdict.String(), out, nil)
	return o, nil
}

func typedLog(ctx context.Context, l *slog.Logger, key, decision string, out idem.Outcome, err error) {
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
	}
	if l == nil || !l.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("wrapper", "typed"),
		slog.String("verdict", decision),
	}
	attrs = outcomeAttrs(attrs, key, out, err)
	l.LogAttrs(ctx, level, "idemlambda", attrs...)
}
