package idem

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"time"

	"github.com/idemgo/idem/core"
)

// Handler is the work made idempotent: it returns the result to store and
// replay, or an error. Mark errors with core.MarkTransient to have them
// retried; unmarked errors that no classifier knows are permanent.
type Handler func(ctx context.Context) ([]byte, error)

// Outcome is what Runner.Do reports for a call that returned a result.
type Outcome struct {
	// Result is the handler's result, new or replayed. Nil when the stored
	// result was omitted (see ResultOmitted).
	Result []byte
	// Replayed reports that the result was read from the store and the
	// handler did not run.
	Replayed bool
	// Attempts is the number of executions made for the key in all, across
	// deliveries.
	Attempts int
	// TookOver reports that this call took over an expired lease.
	TookOver bool
	// ResultOmitted reports that the store kept the outcome without the
	// result, because it was too large: a replay has no body.
	ResultOmitted bool
}

// Runner runs handlers idempotently over a Store. A Runner is safe for
// concurrent use; its zero value is not usable: create one with New.
type Runner struct {
	store Store
	cfg   config
	cache resultCache
}

// New returns a Runner over store, configured by opts. A bad option is an
// error.
func New(store Store, opts ...Option) (*Runner, error) {
	if store == nil {
		return nil, errors.New("idem: nil store")
	}
	c := config{
		retention:       DefaultRetention,
		leaseMargin:     DefaultLeaseMargin,
		defaultLease:    DefaultLease,
		maxAttempts:     DefaultMaxAttempts,
		attemptsPerCall: DefaultAttemptsPerCall,
		base:            DefaultBackoffBase,
		max:             DefaultBackoffMax,
		completeTries:   DefaultCompleteAttempts,
		classifiers:     core.DefaultClassifiers,
		now:             time.Now,
		sleep:           sleepCtx,
		rand:            mrand.Float64,
		token:           randomToken,
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	r := &Runner{store: store, cfg: c}
	if c.cacheSize > 0 {
		r.cache = newResultCache(c.cacheSize)
	}
	return r, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// HashKey returns a short hash of key for logs, so that keys (which may be
// derived from user data) are never logged verbatim.
func HashKey(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:8])
}

// Do runs fn at most once per key while its outcome is retained, in this
// order: validate the key, fingerprint the payload (JSON; see
// core.Fingerprint), reserve the key in the store, run fn, retry transient
// errors with backoff while the attempts and ctx's deadline allow, and record
// the outcome. A duplicate call gets the stored outcome with Replayed set and
// fn does not run.
//
// Errors, checked with errors.Is or errors.As: ErrInvalidKey,
// ErrInvalidPayload, ErrKeyReused, *InProgressError (ErrInProgress),
// *FailureError (ErrPermanentFailure, new or replayed), ErrRetriesExhausted,
// ErrTransientFailure (a later delivery may run again), ErrOutcomeNotRecorded
// and ErrLeaseLost (fn ran, its outcome could not be recorded), and the
// store's own errors.
func (r *Runner) Do(ctx context.Context, key string, payload []byte, fn Handler) (Outcome, error) {
	if fn == nil {
		return Outcome{}, errors.New("idem: nil handler")
	}
	if err := core.ValidateKey(key); err != nil {
		r.log(ctx, key, "reject", 0, err)
		return Outcome{}, err
	}
	fp, err := core.Fingerprint(payload)
	if err != nil {
		r.log(ctx, key, "reject", 0, err)
		return Outcome{}, err
	}
	now := r.cfg.now()
	if out, err, ok := r.cache.lookup(key, fp, now); ok {
		r.log(ctx, key, "replay_cached", out.Attempts, err)
		return out, err
	}
	deadline, hasDeadline := ctx.Deadline()
	leaseUntil := now.Add(r.cfg.defaultLease)
	if hasDeadline {
		leaseUntil = deadline.Add(r.cfg.leaseMargin)
	} else {
		deadline = leaseUntil
	}
	token := r.cfg.token()
	policy := core.Policy{MaxAttempts: r.cfg.maxAttempts}

	var prev *core.Record
	tookOver := false
	for round := 0; ; round++ {
		rec := core.Reserve(key, fp, token, prev, now, leaseUntil, r.cfg.retention)
		err := r.store.Reserve(ctx, rec, prev, now)
		if err == nil {
			r.log(ctx, key, "execute", rec.Attempts, nil, slog.Bool("lease_taken_over", tookOver))
			return r.execute(ctx, rec, deadline, tookOver, fn)
		}
		var ce *ConflictError
		if !errors.As(err, &ce) {
			r.log(ctx, key, "store_error", 0, err)
			return Outcome{}, fmt.Errorf("idem: reserve: %w", err)
		}
		existing := ce.Existing
		d := core.Decide(key, &existing, fp, now, policy)
		switch d.Action {
		case core.Replay:
			out := Outcome{Result: existing.Result, Replayed: true, Attempts: existing.Attempts, ResultOmitted: existing.ResultOmitted}
			if existing.Status == core.StatusSucceeded {
				r.cache.add(existing)
			} else {
				out.Result = nil
			}
			r.log(ctx, key, "replay", existing.Attempts, d.Err, slog.Bool("replayed", true))
			return out, d.Err
		case core.InProgress:
			r.log(ctx, key, "in_progress", existing.Attempts, nil, slog.Time("retry_at", d.RetryAt))
			return Outcome{Attempts: existing.Attempts}, &InProgressError{RetryAt: d.RetryAt}
		case core.Reject:
			r.log(ctx, key, "reject", existing.Attempts, d.Err)
			return Outcome{Attempts: existing.Attempts}, d.Err
		case core.Execute:
			if round >= 2 {
				// The record changed under us twice: someone else is
				// racing for it. Report in progress rather than loop.
				return Outcome{Attempts: existing.Attempts}, &InProgressError{RetryAt: now.Add(r.cfg.base)}
			}
			prev, tookOver = d.Prev, d.Takeover
		}
	}
}

func (r *Runner) execute(ctx context.Context, rec core.Record, deadline time.Time, tookOver bool, fn Handler) (Outcome, error) {
	first := rec.Attempts
	leaseUntil := rec.LeaseUntil
	for {
		result, herr := fn(ctx)
		now := r.cfg.now()
		if herr == nil {
			stored, err := r.complete(ctx, core.Succeed(rec, result, now, r.cfg.retention), deadline, leaseUntil)
			if err != nil {
				return Outcome{Result: result, Attempts: rec.Attempts, TookOver: tookOver}, err
			}
			r.cache.add(stored)
			r.log(ctx, rec.Key, "succeeded", rec.Attempts, nil)
			return Outcome{Result: result, Attempts: rec.Attempts, TookOver: tookOver, ResultOmitted: stored.ResultOmitted}, nil
		}
		if core.Classify(herr, r.cfg.classifiers...) != core.Transient {
			ferr := &FailureError{Message: herr.Error(), Attempts: rec.Attempts, Err: herr}
			if _, err := r.complete(ctx, core.Fail(rec, herr, false, now, r.cfg.retention), deadline, leaseUntil); err != nil {
				return Outcome{Attempts: rec.Attempts, TookOver: tookOver}, errors.Join(ferr, err)
			}
			r.log(ctx, rec.Key, "failed_permanent", rec.Attempts, herr)
			return Outcome{Attempts: rec.Attempts, TookOver: tookOver}, ferr
		}
		var outErr error
		if rec.Attempts >= r.cfg.maxAttempts {
			outErr = fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, rec.Attempts, herr)
		} else if d, ok := core.NextRetry(core.RetryPlan{
			Attempt: rec.Attempts - first + 1, MaxAttempts: r.cfg.attemptsPerCall,
			Base: r.cfg.base, Max: r.cfg.max, Now: now, Deadline: deadline,
			RetryAfter: core.RetryAfter(herr), R: r.cfg.rand(),
		}); ok {
			r.log(ctx, rec.Key, "retry", rec.Attempts, herr, slog.Duration("backoff", d))
			if err := r.cfg.sleep(ctx, d); err == nil {
				rec = core.Retry(rec, r.cfg.now())
				continue
			}
			outErr = fmt.Errorf("%w after %d attempts: %w", ErrTransientFailure, rec.Attempts, herr)
		} else {
			outErr = fmt.Errorf("%w after %d attempts: %w", ErrTransientFailure, rec.Attempts, herr)
		}
		if _, err := r.complete(ctx, core.Fail(rec, herr, true, now, r.cfg.retention), deadline, leaseUntil); err != nil {
			return Outcome{Attempts: rec.Attempts, TookOver: tookOver}, errors.Join(outErr, err)
		}
		r.log(ctx, rec.Key, "failed_transient", rec.Attempts, herr)
		return Outcome{Attempts: rec.Attempts, TookOver: tookOver}, outErr
	}
}

// complete writes the outcome, retrying transient store errors with backoff
// within the deadline. A lost lease is final. leaseUntil is the end of the
// caller's lease, for the error message.
func (r *Runner) complete(ctx context.Context, rec core.Record, deadline, leaseUntil time.Time) (core.Record, error) {
	for attempt := 1; ; attempt++ {
		// The write is made even if ctx is done: the outcome matters more
		// than the caller's patience, and the store bounds the call.
		wctx := ctx
		if ctx.Err() != nil {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
		}
		stored, err := r.store.Complete(wctx, rec)
		if err == nil {
			return stored, nil
		}
		if errors.Is(err, ErrLeaseLost) {
			r.log(ctx, rec.Key, "lease_lost", rec.Attempts, err)
			return core.Record{}, fmt.Errorf("idem: outcome of attempt %d not recorded: %w", rec.Attempts, err)
		}
		if core.Classify(err, core.DefaultClassifiers...) == core.Transient {
			if d, ok := core.NextRetry(core.RetryPlan{
				Attempt: attempt, MaxAttempts: r.cfg.completeTries, Base: r.cfg.base, Max: r.cfg.max,
				Now: r.cfg.now(), Deadline: deadline, RetryAfter: core.RetryAfter(err), R: r.cfg.rand(),
			}); ok && r.cfg.sleep(ctx, d) == nil {
				continue
			}
		}
		r.log(ctx, rec.Key, "outcome_not_recorded", rec.Attempts, err)
		return core.Record{}, fmt.Errorf("%w (%s, attempt %d, lease until %s): %w", ErrOutcomeNotRecorded, rec.Status, rec.Attempts, leaseUntil.UTC().Format(time.RFC3339Nano), err)
	}
}

func (r *Runner) log(ctx context.Context, key, decision string, attempt int, err error, attrs ...slog.Attr) {
	if r.cfg.logger == nil {
		return
	}
	level := slog.LevelInfo
	a := append([]slog.Attr{slog.String("key_hash", HashKey(key)), slog.String("decision", decision), slog.Int("attempt", attempt)}, attrs...)
	if err != nil {
		a = append(a, slog.String("error", err.Error()))
		if decision != "replay" {
			level = slog.LevelWarn
		}
	}
	r.cfg.logger.LogAttrs(ctx, level, "idem", a...)
}
