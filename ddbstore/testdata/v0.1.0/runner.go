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
	// Verdict is what happened to the call (see Verdict).
	Verdict Verdict
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
	// Cached reports that a replay was answered from the runner's local
	// cache (WithCache) without a store call.
	Cached bool
	// Waited reports that the call waited for a concurrent execution of
	// its key (WithWait), whatever its answer.
	Waited bool
}

// Runner runs handlers idempotently over a Store. A Runner is safe for
// concurrent use; its zero value is not usable: create one with New.
type Runner struct {
	store Store
	cfg   config
	cache resultCache
	// handlerChain classifies handler errors and storeChain the store's
	// own: the store's platform classifier (ErrorClassifier) first, then
	// the configured chain (handlers) or the default one (the store).
	handlerChain, storeChain []core.Classifier
	// flights are the calls in flight with a wait (WithWait), by key.
	flights flights
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
		retryReserve:    DefaultRetryReserve,
		disabled:        disabledByEnv(),
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
	if err := c.checkRenewal(store); err != nil {
		return nil, err
	}
	r := &Runner{store: store, cfg: c}
	r.handlerChain, r.storeChain = c.classifiers, core.DefaultClassifiers
	if pc, ok := store.(ErrorClassifier); ok {
		platform := []core.Classifier{pc.ClassifyError}
		r.handlerChain = append(platform, c.classifiers...)
		r.storeChain = append(platform, core.DefaultClassifiers...)
	}
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
// errors with backoff while the attempts, ctx's deadline and the lease allow,
// and record the outcome. A duplicate call gets the stored outcome with
// Replayed set and fn does not run; one that finds the key in progress gets
// *core.InProgressError at once, or with WithWait, waits a bounded time for
// the outcome. Every execution is recorded in the store
// before it starts, in-process retries included, so WithMaxAttempts bounds
// the executions of a key even when holders crash.
//
// Errors, checked with errors.Is or errors.As: core.ErrInvalidKey,
// core.ErrInvalidPayload, core.ErrKeyReused, *core.InProgressError (core.ErrInProgress),
// *core.FailureError (core.ErrPermanentFailure, new or replayed), core.ErrRetriesExhausted,
// ErrTransientFailure (a later delivery may run again), ErrOutcomeNotRecorded
// and ErrLeaseLost (fn ran, its outcome could not be recorded), and the
// store's own errors.
func (r *Runner) Do(ctx context.Context, key string, payload []byte, fn Handler) (Outcome, error) {
	c := &call{r: r, ctx: ctx, key: key, start: r.cfg.now()}
	var out Outcome
	var err error
	if r.cfg.disabled {
		out, err = r.unprotected(context.WithValue(ctx, unprotectedKey{}, key), fn)
	} else {
		out, err = c.do(payload, fn)
	}
	if err != nil {
		out.Verdict = VerdictOf(err)
	}
	r.log(ctx, key, out, err)
	if r.cfg.observer != nil {
		r.cfg.observer.Observe(ctx, c.observation(out, err))
	}
	return out, err
}

// call is the state of one Do: its key and fingerprint, the time its
// execution has, and what its store calls cost.
type call struct {
	r          *Runner
	ctx        context.Context
	key, fp    string
	start      time.Time
	w          window
	tookOver   bool
	storeCalls int
	storeTime  time.Duration
	// waitUntil is when the call's wait ends (zero: no wait); waited
	// reports that it waited (see wait.go).
	waitUntil time.Time
	waited    bool
	// staged holds the writes the last try staged (Stage), committed with
	// its success.
	staged []any
}

func (c *call) do(payload []byte, fn Handler) (Outcome, error) {
	if fn == nil {
		return Outcome{}, errors.New("idem: nil handler")
	}
	if err := core.ValidateKey(c.key); err != nil {
		return Outcome{}, err
	}
	fp, err := core.Fingerprint(payload)
	if err != nil {
		return Outcome{}, err
	}
	c.fp = fp
	now := c.r.cfg.now()
	if out, err, ok := c.r.cache.lookup(c.key, fp, now); ok {
		return out, err
	}
	c.w = c.r.window(c.ctx, now)
	return c.join(now, fn)
}

// window is the time an execution has: its lease ends at leaseUntil, and a
// try (or a completion retry) must be over by limit, the earlier of the
// invocation's deadline and the lease end less the lease margin (the margin
// is the allowance for clock skew between holders). With WithLeaseRenewal
// the lease is short (renewWindow), and each try moves the window to the
// lease held when it ends.
type window struct {
	leaseUntil, limit time.Time
}

func (r *Runner) window(ctx context.Context, now time.Time) window {
	if r.cfg.renewEvery > 0 {
		return r.renewWindow(ctx, now)
	}
	if deadline, ok := ctx.Deadline(); ok {
		return window{leaseUntil: deadline.Add(r.cfg.leaseMargin), limit: deadline}
	}
	lu := now.Add(r.cfg.defaultLease)
	return window{leaseUntil: lu, limit: lu.Add(-r.cfg.leaseMargin)}
}

// storeReserve and storeComplete are the call's store writes, timed.
func (c *call) storeReserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	t := c.r.cfg.now()
	err := c.r.store.Reserve(ctx, rec, prev, now)
	c.storeCalls, c.storeTime = c.storeCalls+1, c.storeTime+c.r.cfg.now().Sub(t)
	return err
}

func (c *call) storeComplete(ctx context.Context, rec core.Record) (core.Record, error) {
	t := c.r.cfg.now()
	var stored core.Record
	var err error
	if sc, ok := c.r.store.(StagedCompleter); ok && rec.Status == core.StatusSucceeded && len(c.staged) > 0 {
		stored, err = sc.CompleteStaged(ctx, rec, c.staged)
	} else {
		stored, err = c.r.store.Complete(ctx, rec)
	}
	c.storeCalls, c.storeTime = c.storeCalls+1, c.storeTime+c.r.cfg.now().Sub(t)
	return stored, err
}

// reserve reserves the key (or takes it over, or re-reserves a retryable
// failure) and executes fn, or answers from the record that blocks it: in
// one write through a store that is an Acquirer, else by Reserve, and by a
// second Reserve conditioned on the blocking record when core.Decide
// answers Execute on it.
func (c *call) reserve(now time.Time, fn Handler) (Outcome, error) {
	cfg := &c.r.cfg
	policy := core.Policy{MaxAttempts: cfg.maxAttempts}
	var prev *core.Record
	for round := 0; ; round++ {
		rec, err := c.claim(prev, now, policy)
		if err == nil {
			return c.execute(rec, fn)
		}
		var ce *ConflictError
		if !errors.As(err, &ce) {
			return Outcome{}, fmt.Errorf("idem: reserve: %w", err)
		}
		existing := ce.Existing
		d := core.Decide(c.key, &existing, c.fp, now, policy)
		if d.Action == core.InProgress {
			existing, d, now = c.await(existing, d, now)
		}
		if d.Action != core.Execute {
			return c.r.answer(existing, d)
		}
		if round >= 2 {
			// The record changed under us twice: someone else is racing
			// for it. Report in progress rather than loop.
			return Outcome{Attempts: existing.Attempts}, &core.InProgressError{RetryAt: now.Add(cfg.base)}
		}
		prev, c.tookOver = d.Prev, d.Takeover
	}
}

// answer maps a decision other than Execute on the stored record to the
// call's outcome.
func (r *Runner) answer(existing core.Record, d core.Decision) (Outcome, error) {
	switch d.Action {
	case core.Replay:
		out := Outcome{Verdict: Replayed, Replayed: true, Attempts: existing.Attempts, ResultOmitted: existing.ResultOmitted}
		if existing.Status == core.StatusSucceeded {
			out.Result = existing.Result
			r.cache.add(existing)
		}
		return out, d.Err
	case core.InProgress:
		return Outcome{Attempts: existing.Attempts}, &core.InProgressError{RetryAt: d.RetryAt}
	}
	return Outcome{Attempts: existing.Attempts}, d.Err
}

// execute runs fn under the reservation rec until it succeeds, fails
// permanently, or no further try fits; each further try is recorded in the
// store before it runs.
func (c *call) execute(rec core.Record, fn Handler) (Outcome, error) {
	cfg := &c.r.cfg
	first := rec.Attempts
	var longest time.Duration
	for {
		start := cfg.now()
		result, herr := c.try(&rec, fn)
		now := cfg.now()
		longest = max(longest, now.Sub(start))
		if herr == nil {
			out, err := c.succeed(rec, result, now)
			var sw *StagedWriteError
			if !errors.As(err, &sw) {
				return out, err
			}
			herr = sw // the staged writes refused: the handler's error
		}
		if c.r.classify(c.ctx, herr) != core.Transient {
			ferr := &core.FailureError{Message: herr.Error(), Attempts: rec.Attempts, Err: herr}
			return c.fail(rec, herr, false, now, ferr)
		}
		if rec.Attempts >= cfg.maxAttempts {
			return c.fail(rec, herr, true, now, fmt.Errorf("%w after %d attempts: %w", core.ErrRetriesExhausted, rec.Attempts, herr))
		}
		outErr := fmt.Errorf("%w after %d attempts: %w", ErrTransientFailure, rec.Attempts, herr)
		delay, ok := c.nextTry(rec.Attempts-first+1, herr, now, longest)
		if !ok {
			return c.fail(rec, herr, true, now, outErr)
		}
		next, err := c.retry(rec, herr, now, delay)
		if err != nil {
			return c.outcome(rec, nil), errors.Join(outErr, err)
		}
		rec = next
	}
}

// classify is the class of a handler error. Cancellation of ctx is no verdict
// on the handler: the error is transient (and nextTry allows no retry in
// this call). Otherwise explicit marks win, then the store's platform
// classifier (ErrorClassifier), then the runner's chain.
func (r *Runner) classify(ctx context.Context, herr error) core.Class {
	if ctx.Err() != nil || errors.Is(herr, context.Canceled) {
		return core.Transient
	}
	return core.Classify(herr, r.handlerChain...)
}

// nextTry returns the backoff before the next try and true if one fits: the
// error is not marked core.MarkRetryLater, the per-call attempts allow it and, after the backoff, at least the retry
// reserve (or the longest try so far, if longer) is left before the window's
// limit.
func (c *call) nextTry(attempt int, herr error, now time.Time, longest time.Duration) (time.Duration, bool) {
	if c.ctx.Err() != nil || core.RetryLater(herr) {
		return 0, false
	}
	cfg := &c.r.cfg
	return core.NextRetry(core.RetryPlan{
		Attempt: attempt, MaxAttempts: cfg.attemptsPerCall,
		Base: cfg.base, Max: cfg.max, Now: now, Deadline: c.w.limit,
		Reserve: max(cfg.retryReserve, longest), RetryAfter: core.RetryAfter(herr), R: cfg.rand(),
		Backoff: cfg.backoff,
	})
}

// retry records the failed try as a retryable failure, waits delay and
// re-reserves the key with a new lease token and one more attempt, so that
// the attempt is counted in the store before it runs. If another delivery
// takes the key meanwhile (the failure is reservable by anyone), this call
// stops with an error.
func (c *call) retry(rec core.Record, herr error, now time.Time, delay time.Duration) (core.Record, error) {
	cfg := &c.r.cfg
	failed, err := c.complete(core.Fail(rec, herr, true, now, cfg.retention))
	if err != nil {
		return core.Record{}, err
	}
	c.r.logRetry(c.ctx, rec, herr, delay)
	if err := cfg.sleep(c.ctx, delay); err != nil {
		return core.Record{}, err
	}
	now = cfg.now()
	c.freshLease(now)
	next := core.Reserve(rec.Key, rec.Fingerprint, cfg.token(), &failed, now, c.w.leaseUntil, cfg.retention)
	if err := c.storeReserve(c.ctx, next, &failed, now); err != nil {
		return core.Record{}, fmt.Errorf("idem: re-reserve for attempt %d: %w", next.Attempts, err)
	}
	return next, nil
}

// outcome is the Outcome of an execution under rec (stored nil: nothing
// recorded).
func (c *call) outcome(rec core.Record, stored *core.Record) Outcome {
	out := Outcome{Attempts: rec.Attempts, TookOver: c.tookOver}
	if stored != nil {
		out.ResultOmitted = stored.ResultOmitted
	}
	return out
}

func (c *call) succeed(rec core.Record, result []byte, now time.Time) (Outcome, error) {
	stored, err := c.complete(core.Succeed(rec, result, now, c.r.cfg.retention))
	if err != nil {
		out := c.outcome(rec, nil)
		out.Result = result
		return out, err
	}
	c.r.cache.add(stored)
	out := c.outcome(rec, &stored)
	out.Verdict, out.Result = Executed, result
	return out, nil
}

// fail records a failure (retryable or not) and returns outErr, joined with
// the store's error if the failure could not be recorded.
func (c *call) fail(rec core.Record, herr error, retryable bool, now time.Time, outErr error) (Outcome, error) {
	if _, err := c.complete(core.Fail(rec, herr, retryable, now, c.r.cfg.retention)); err != nil {
		return c.outcome(rec, nil), errors.Join(outErr, err)
	}
	return c.outcome(rec, nil), outErr
}

// complete writes the outcome, retrying transient store errors with backoff
// within the window's limit. A lost lease is final.
func (c *call) complete(rec core.Record) (core.Record, error) {
	cfg := &c.r.cfg
	for attempt := 1; ; attempt++ {
		// The write is made even if ctx is done: the outcome matters more
		// than the caller's patience, and the store bounds the call.
		wctx := c.ctx
		if c.ctx.Err() != nil {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(context.WithoutCancel(c.ctx), 2*time.Second)
			defer cancel()
		}
		stored, err := c.storeComplete(wctx, rec)
		if err == nil {
			return stored, nil
		}
		if errors.Is(err, ErrLeaseLost) {
			return core.Record{}, fmt.Errorf("idem: outcome of attempt %d not recorded: %w", rec.Attempts, err)
		}
		if sw := (*StagedWriteError)(nil); errors.As(err, &sw) {
			return core.Record{}, sw // nothing written; the caller records the failure
		}
		if core.Classify(err, c.r.storeChain...) == core.Transient {
			if d, ok := core.NextRetry(core.RetryPlan{
				Attempt: attempt, MaxAttempts: cfg.completeTries, Base: cfg.base, Max: cfg.max,
				Now: cfg.now(), Deadline: c.w.limit, RetryAfter: core.RetryAfter(err), R: cfg.rand(),
				Backoff: cfg.backoff,
			}); ok && cfg.sleep(context.WithoutCancel(c.ctx), d) == nil {
				continue
			}
		}
		return core.Record{}, fmt.Errorf("%w (%s, attempt %d, lease until %s): %w", ErrOutcomeNotRecorded, rec.Status, rec.Attempts, c.w.leaseUntil.UTC().Format(time.RFC3339Nano), err)
	}
}

// log writes one record per call: the key's hash (never the key), the
// verdict and what explains it. Verdicts that need attention are warnings.
func (r *Runner) log(ctx context.Context, key string, out Outcome, err error) {
	if r.cfg.logger == nil {
		return
	}
	level := slog.LevelInfo
	a := []slog.Attr{slog.String("key_hash", HashKey(key)), slog.String("verdict", out.Verdict.String()), slog.Int("attempt", out.Attempts)}
	if out.TookOver {
		a = append(a, slog.Bool("lease_taken_over", true))
	}
	if out.Cached {
		a = append(a, slog.Bool("cached", true))
	}
	if out.Waited {
		a = append(a, slog.Bool("waited", true))
	}
	var ip *core.InProgressError
	if errors.As(err, &ip) {
		a = append(a, slog.Time("retry_at", ip.RetryAt))
	}
	if err != nil {
		a = append(a, slog.String("error", err.Error()))
	}
	switch out.Verdict {
	case OutcomeNotRecorded, StoreFailed, FailedPermanently, RetriesExhausted, KeyReused:
		level = slog.LevelWarn
	}
	r.cfg.logger.LogAttrs(ctx, level, "idem", a...)
}

// logRetry records an in-process retry, which a call's own record does not
// show.
func (r *Runner) logRetry(ctx context.Context, rec core.Record, herr error, delay time.Duration) {
	if r.cfg.logger == nil {
		return
	}
	r.cfg.logger.LogAttrs(ctx, slog.LevelInfo, "idem retry", slog.String("key_hash", HashKey(rec.Key)),
		slog.Int("attempt", rec.Attempts), slog.Duration("backoff", delay), slog.String("error", herr.Error()))
}
