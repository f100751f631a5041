package idem

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgo/idem/core"
)

// WithFingerprintSelection makes the runner fingerprint only the part of
// each payload that sel covers (core.SelectFields, core.IgnoreFields; see
// core.Selection), so that a payload sent again with only a left-out part
// changed (a timestamp, a trace id) replays instead of being refused as
// core.ErrKeyReused. A payload that lacks a field sel selects is refused
// with core.ErrFieldAbsent (verdict invalid_payload). A Selection built
// from a bad path is an error of New. Default: the whole payload.
//
// The selection is part of what a stored fingerprint means: changing it
// changes the fingerprints of payloads it applies to, so keys recorded
// before the change are refused as reused until their records expire.
func WithFingerprintSelection(sel core.Selection) Option {
	return func(c *config) error {
		if err := sel.Err(); err != nil {
			return err
		}
		c.selection = sel
		return nil
	}
}

// FingerprintSelection returns the runner's selection
// (WithFingerprintSelection; the zero Selection, the whole payload, by
// default), for wrappers that fingerprint payloads themselves
// (ContextWithFingerprint).
func (r *Runner) FingerprintSelection() core.Selection { return r.cfg.selection }

// FingerprintFunc computes the fingerprint of a call's payload: two
// payloads are the same request exactly when their fingerprints are equal.
// It must be deterministic and safe for concurrent use.
type FingerprintFunc func(payload []byte) (string, error)

// fingerprintKey is the context key of ContextWithFingerprint's function.
type fingerprintKey struct{}

// fingerprintCtx is the context ContextWithFingerprint returns: the
// function, and the execution ctx was in when it was set (nil outside any),
// so that the calls a handler makes (in an execution of their own caller)
// do not take the function of the call that runs them. One allocation,
// where a WithValue and a hiding WithValue per call would take three.
type fingerprintCtx struct {
	context.Context
	fn    FingerprintFunc
	owner *execution
}

// Value answers fingerprintKey with c itself, and any other key as the
// parent does.
func (c *fingerprintCtx) Value(key any) any {
	if key == (fingerprintKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// ContextWithFingerprint returns a copy of ctx with which calls of
// Runner.Do fingerprint their payload with fn instead of the runner's own
// way (core.Fingerprint, or WithFingerprintSelection's selection): for a
// wrapper that knows how its payloads read (JSON or text, the fields an
// event's envelope adds) and so canonicalizes each payload once. An error
// of fn is the call's, wrapped with core.ErrInvalidPayload if it does not
// wrap it already (verdict invalid_payload). fn applies to the calls made
// with ctx (or a context derived from it) only: the calls a handler makes
// with its own context do not take it. A nil fn restores the runner's own
// way.
func ContextWithFingerprint(ctx context.Context, fn FingerprintFunc) context.Context {
	return &fingerprintCtx{Context: ctx, fn: fn, owner: executionOf(ctx)}
}

// fingerprint is the fingerprint of the call's payload: by its context's
// function, or by the runner's selection.
func (c *call) fingerprint(payload []byte) (string, error) {
	fc, _ := c.ctx.Value(fingerprintKey{}).(*fingerprintCtx)
	if fc == nil || fc.fn == nil || fc.owner != executionOf(c.ctx) {
		return c.r.cfg.selection.Fingerprint(payload)
	}
	fp, err := fc.fn(payload)
	if err != nil && !errors.Is(err, core.ErrInvalidPayload) {
		err = fmt.Errorf("%w: %w", core.ErrInvalidPayload, err)
	}
	return fp, err
}
