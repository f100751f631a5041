package idem

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/idemgo/idem/core"
)

// The end of a call: every call of Do, and every verdict a wrapper reaches
// without Do (Report), ends in call.end, which logs it once, observes it
// once and ends its span.

// Annotation is what the caller of a call (a wrapper) adds to its end: what
// names the event in the call's log record (a message id, a sequence
// number, a request's method and path) and what the caller did with the
// verdict (reported the message for redelivery, answered an HTTP status);
// and, where the caller could not use the call's answer (a replayed result
// it cannot decode), the verdict it reached instead.
type Annotation struct {
	// Attrs are added to the call's log record.
	Attrs []slog.Attr
	// Verdict, unless VerdictUnknown, replaces the call's verdict in its
	// log record and its observation (not in what Do returns); Err then
	// replaces the call's error there.
	Verdict Verdict
	Err     error
}

type annotationKey struct{}

// annotator is what WithAnnotation puts in a context.
type annotator = func(Outcome, error) Annotation

// WithAnnotation returns a copy of ctx with which each call of Do or Report
// calls annotate once at its end, with the call's outcome and error, on the
// caller's goroutine, before the call is logged and observed. The context a
// handler gets does not carry it: calls the handler makes itself are not
// annotated. A nil annotate removes the annotation of ctx.
func WithAnnotation(ctx context.Context, annotate func(Outcome, error) Annotation) context.Context {
	return context.WithValue(ctx, annotationKey{}, annotator(annotate))
}

// takeAnnotation returns ctx without its annotation, and the annotation
// (nil if none).
func takeAnnotation(ctx context.Context) (context.Context, annotator) {
	a, _ := ctx.Value(annotationKey{}).(annotator)
	if a == nil {
		return ctx, nil
	}
	return context.WithValue(ctx, annotationKey{}, annotator(nil)), a
}

// Report logs and observes a verdict that a caller reached without Do: a
// wrapper's on an event it did not pass to Do (MissingKey, InvalidPayload,
// NotStarted, Blocked) or whose handler panicked (Panicked). It is the end
// of Do's own calls, so the record, the observation and the span (Tracer)
// have the same shape and carry ctx's annotation (WithAnnotation). key is
// the call's key, "" when there is none; out.Verdict is the verdict
// (VerdictUnknown: VerdictOf of err); err what explains it. The observation
// has no duration and no store call. Safe for concurrent use.
func (r *Runner) Report(ctx context.Context, key string, out Outcome, err error) {
	ctx, annotate := takeAnnotation(ctx)
	if out.Verdict == VerdictUnknown {
		out.Verdict = VerdictOf(err)
	}
	c := r.newCall(ctx, key)
	c.annotate, c.reported = annotate, true
	c.end(out, err)
}

// end is the end of every call, Do's and Report's, the one place where its
// verdict is reported: it applies the caller's annotation (which may name
// another verdict), logs the call, observes it (Observer) and ends its span
// (Tracer).
func (c *call) end(out Outcome, err error) {
	var attrs []slog.Attr
	if c.annotate != nil {
		a := c.annotate(out, err)
		attrs = a.Attrs
		if a.Verdict != VerdictUnknown {
			out.Verdict, err = a.Verdict, a.Err
		}
	}
	c.r.log(c.ctx, c.key, out, err, attrs)
	if c.r.cfg.observer == nil && c.endSpan == nil {
		return
	}
	o := c.observation(out, err)
	if c.r.cfg.observer != nil {
		c.r.cfg.observer.Observe(c.ctx, o)
	}
	if c.endSpan != nil {
		c.endSpan(o)
	}
}

// log writes one record per call, at its verdict's level (Verdict.Level):
// the verdict, the key's hash (and the key where it is a hash itself:
// keyAttrs), what the caller added, and what explains the verdict.
func (r *Runner) log(ctx context.Context, key string, out Outcome, err error, extra []slog.Attr) {
	level := recordLevel(out.Verdict, err)
	if !r.cfg.logger.Enabled(ctx, level) {
		return
	}
	a := make([]slog.Attr, 0, len(extra)+8)
	a = append(a, slog.String("verdict", out.Verdict.String()))
	a = append(a, keyAttrs(key)...)
	if t := TenantFromContext(ctx); t != "" {
		a = append(a, slog.String("tenant", t))
	}
	a = append(a, extra...)
	a = append(a, slog.Int("attempt", out.Attempts), slog.Bool("replayed", out.Replayed))
	for _, f := range []struct {
		name string
		set  bool
	}{{"lease_taken_over", out.TookOver}, {"cached", out.Cached}, {"waited", out.Waited}} {
		if f.set {
			a = append(a, slog.Bool(f.name, true))
		}
	}
	var ip *core.InProgressError
	if errors.As(err, &ip) {
		a = append(a, slog.Time("retry_at", ip.RetryAt))
	}
	if err != nil {
		a = append(a, slog.String("error", err.Error()))
	}
	r.cfg.logger.LogAttrs(ctx, level, "idem", a...)
}

// logRetry records an in-process retry, which a call's own record does not
// show.
func (r *Runner) logRetry(ctx context.Context, rec core.Record, herr error, delay time.Duration) {
	r.cfg.logger.LogAttrs(ctx, slog.LevelInfo, "idem retry", append(keyAttrs(rec.Key),
		slog.Int("attempt", rec.Attempts), slog.Duration("backoff", delay), slog.String("error", herr.Error()))...)
}

// keyAttrs name key in a log record: key_hash, its hash (HashKey), which
// every record has; and key, the key itself, where it is a derived key
// (core.IsDerivedKey: a hash that holds no user data, as every wrapper's
// key is), so that the record is one read away (`idem inspect --key`).
// None for no key.
func keyAttrs(key string) []slog.Attr {
	switch {
	case key == "":
		return nil
	case core.IsDerivedKey(key):
		return []slog.Attr{slog.String("key_hash", HashKey(key)), slog.String("key", key)}
	}
	return []slog.Attr{slog.String("key_hash", HashKey(key))}
}
