package idem

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"time"

	"github.com/idemgo/idem/core"
)

// Handler is the work made idempotent: it returns the result to store and
// replay, or an error. An error is retried unless it is known to be
// permanent: marked with core.MarkPermanent or classified permanent
// (WithClassifiers) is recorded and replayed; marked with
// core.MarkTransient or classified transient is retried in the call
// (WithRetry); an error nobody classified is not retried in the call but
// recorded as retryable, for a later delivery to run again
// (FailedUnclassified; WithUnclassifiedPermanent makes it permanent).
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
	// Attempts is the number of executions of the key in all, across
	// deliveries, this call's included: one per call that ran the handler
	// (its in-process retries are part of it) and one per holder that
	// crashed or timed out (see WithMaxAttempts).
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
	// progress is the memory of keys in progress (WithInProgressMemory);
	// nil when off.
	progress *progressMemory
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
		cacheTTL:        DefaultCacheTTL,
		progressSize:    DefaultInProgressMemory,
		progressRecheck: DefaultInProgressRecheck,
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
	if c.observer == nil {
		c.observer = DefaultObserver()
	}
	if c.observer == NoObserver {
		c.observer = nil // nothing to build an observation for
	}
	if c.logger == nil {
		c.logger = DefaultLogger()
	}
	r := &Runner{store: store, cfg: c}
	r.handlerChain, r.storeChain = slices.Concat(c.classifiers, []core.Classifier{ownClass}), core.DefaultClassifiers
	if pc, ok := store.(ErrorClassifier); ok {
		platform := []core.Classifier{pc.ClassifyError}
		r.handlerChain = slices.Concat(platform, c.classifiers, []core.Classifier{ownClass})
		r.storeChain = append(platform, core.DefaultClassifiers...)
	}
	r.cfg.tracer = c.tracerOrObserver()
	if c.cacheSize > 0 {
		r.cache = newResultCache(c.cacheSize, c.cacheTTL)
	}
	r.progress = newProgressMemory(c.progressSize, c.progressRecheck)
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
// the outcome. Every execution is recorded in the store before it starts
// (its reservation), so the bound of a key's executions
// (WithMaxAttempts) holds even when holders crash; in-process retries run
// under the same reservation and are one execution.
//
// Each call is logged once, at its verdict's level (Verdict.Level), and
// observed once (WithObserver), with what ctx's annotation adds
// (WithAnnotation).
//
// Errors, checked with errors.Is or errors.As: core.ErrInvalidKey,
// core.ErrInvalidPayload, core.ErrKeyReused, *core.InProgressError (core.ErrInProgress),
// *core.FailureError (core.ErrPermanentFailure, new or replayed), core.ErrRetriesExhausted,
// ErrTransientFailure and ErrUnclassifiedFailure (a later delivery may run
// again), ErrOutcomeNotRecorded and ErrLeaseLost (fn ran, its outcome could
// not be recorded), ErrCommitRefused (fn succeeded, the store refused its
// commit and wrote nothing: a retryable failure is recorded in its place),
// and the store's own errors.
func (r *Runner) Do(ctx context.Context, key string, payload []byte, fn Handler) (Outcome, error) {
	ctx, annotate := takeAnnotation(ctx)
	c := r.newCall(ctx, key)
	c.annotate = annotate
	if c.endSpan != nil {
		defer c.endPanicked()
	}
	var out Outcome
	var err error
	if r.cfg.disabled {
		out, err = r.unprotected(context.WithValue(c.ctx, unprotectedKey{}, key), fn)
	} else {
		out, err = c.do(payload, fn)
	}
	if err != nil {
		out.Verdict = VerdictOf(err)
	}
	c.end(out, err)
	return out, err
}

// newCall starts a call of key: its clock and, with a tracer, its span.
func (r *Runner) newCall(ctx context.Context, key string) *call {
	c := &call{r: r, ctx: ctx, key: key, start: r.cfg.now()}
	c.startCall()
	return c
}

// call is the state of one Do: its key and fingerprint, the time its
// execution has, and what its store calls cost.
type call struct {
	r        *Runner
	ctx      context.Context
	key, fp  string
	start    time.Time
	w        window
	tookOver bool
	// held is the lease token of the call's reservation, remembered by
	// the runner while the call runs ("": none).
	held       string
	storeCalls int
	storeTime  time.Duration
	// waitUntil is when the call's wait ends (zero: no wait); waited
	// reports that it waited; flight is the flight it leads, if any (see
	// wait.go).
	waitUntil time.Time
	waited    bool
	flight    *flight
	// staged holds the writes the last try staged (Stage), committed with
	// its success.
	staged []any
	// unsure names the steps its tries ran whose write may not have been
	// applied: the next try writes each again before it skips it (see
	// execution.confirm).
	unsure map[string]bool
	// endSpan ends the call's span (Tracer); nil without a tracer.
	endSpan func(Observation)
	// annotate is the caller's annotation (WithAnnotation); nil: none.
	annotate annotator
	// reported marks a verdict reported without Do (Report): it has no
	// duration.
	reported bool

	maxAttempts int // the bound of the key's executions (attemptLimit)
}

func (c *call) do(payload []byte, fn Handler) (Outcome, error) {
	if fn == nil {
		return Outcome{}, errors.New("idem: nil handler")
	}
	if err := core.ValidateKey(c.key); err != nil {
		return Outcome{}, err
	}
	fp, err := c.fingerprint(payload)
	if err != nil {
		return Outcome{}, err
	}
	c.fp = fp
	c.maxAttempts = c.attemptLimit()
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
// is the allowance for clock skew between holders). A lease starts when it
// is written: the call's window is made again at each reservation it
// writes (claim), after any wait. With WithLeaseRenewal the lease is short
// (renewWindow), each renewal moves the window of the running try
// (renewal.window), and each try moves the call's window to the lease held
// when it ends.
type window struct {
	leaseUntil, limit time.Time
}

// heldWindow is the window of a lease that ends at leaseUntil.
func (c *config) heldWindow(leaseUntil time.Time) window {
	return window{leaseUntil: leaseUntil, limit: leaseUntil.Add(-c.leaseMargin)}
}

func (r *Runner) window(ctx context.Context, now time.Time) window {
	if r.cfg.renewEvery > 0 {
		return r.renewWindow(ctx, now)
	}
	if deadline, ok := ctx.Deadline(); ok {
		return window{leaseUntil: deadline.Add(r.cfg.leaseMargin), limit: deadline}
	}
	return r.cfg.heldWindow(now.Add(r.cfg.defaultLease))
}

// storeReserve and storeComplete are the call's store writes, timed.
func (c *call) storeReserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	t := c.r.cfg.now()
	ctx, end := c.r.traceStore(ctx, OpReserve)
	err := c.r.store.Reserve(ctx, rec, prev, now)
	end(err)
	c.storeCalls, c.storeTime = c.storeCalls+1, c.storeTime+c.r.cfg.now().Sub(t)
	return err
}

func (c *call) storeComplete(ctx context.Context, rec core.Record) (core.Record, error) {
	t := c.r.cfg.now()
	var stored core.Record
	var err error
	if sc, ok := c.r.store.(StagedCompleter); ok && rec.Status == core.StatusSucceeded && len(c.staged) > 0 {
		ctx, end := c.r.traceStore(ctx, OpCompleteStaged)
		stored, err = sc.CompleteStaged(ctx, rec, c.staged)
		end(err)
	} else {
		ctx, end := c.r.traceStore(ctx, OpComplete)
		stored, err = c.r.store.Complete(ctx, rec)
		end(err)
	}
	c.storeCalls, c.storeTime = c.storeCalls+1, c.storeTime+c.r.cfg.now().Sub(t)
	return stored, err
}

// reserve reserves the key (or takes it over, or re-reserves a retryable
// failure) and executes fn, or answers from the record that blocks it: in
// one write through a store that is an Acquirer, else by Reserve, and by a
// second Reserve conditioned on the blocking record when core.Decide
// answers Execute on it (decided again, over no record, if that record
// went before the second Reserve).
func (c *call) reserve(now time.Time, fn Handler) (Outcome, error) {
	cfg := &c.r.cfg
	policy := c.policy()
	var prev *core.Record
	for round := 0; ; round++ {
		rec, err := c.claim(prev, now, policy)
		if err == nil {
			return c.executeHeld(rec, fn)
		}
		if prev != nil && errors.Is(err, ErrRecordChanged) {
			// prev went (released, deleted) between the decision and the
			// reservation over it: decided again, the key has no record.
			prev, c.tookOver = nil, false
			continue
		}
		var ce *ConflictError
		if !errors.As(err, &ce) {
			if core.Classify(err, c.r.storeChain...) == core.Transient {
				c.r.progress.failed(c.key, now, cfg.rand)
			}
			return Outcome{}, fmt.Errorf("idem: reserve: %w", err)
		}
		existing := ce.Existing
		d := core.Decide(c.key, &existing, c.fp, now, policy)
		if d.Action == core.InProgress {
			c.hint(d.RetryAt)
			existing, d, now = c.await(existing, d, now)
		}
		c.r.progress.observe(c.key, existing, now)
		if d.Action != core.Execute {
			return c.r.answer(existing, d, now)
		}
		if round >= 2 {
			// The record changed under us twice: someone else is racing
			// for it. Report in progress rather than loop.
			return Outcome{Attempts: existing.Attempts}, &core.InProgressError{RetryAt: now.Add(cfg.base)}
		}
		prev, c.tookOver = d.Prev, d.Takeover
	}
}

// answer maps a decision other than Execute on the stored record, read at
// now, to the call's outcome.
func (r *Runner) answer(existing core.Record, d core.Decision, now time.Time) (Outcome, error) {
	switch d.Action {
	case core.Replay:
		out := Outcome{Verdict: Replayed, Replayed: true, Attempts: existing.Attempts, ResultOmitted: existing.ResultOmitted}
		if existing.Status == core.StatusSucceeded {
			out.Result = existing.Result
			r.cache.add(existing, now)
		}
		return out, d.Err
	case core.InProgress:
		return Outcome{Attempts: existing.Attempts}, &core.InProgressError{RetryAt: d.RetryAt}
	}
	return Outcome{Attempts: existing.Attempts}, d.Err
}

// executeHeld executes fn under rec, the call's reservation, with the key
// remembered in progress by the runner (WithInProgressMemory) until the
// call ends.
func (c *call) executeHeld(rec core.Record, fn Handler) (Outcome, error) {
	c.r.progress.hold(rec)
	c.held = rec.LeaseToken
	defer func() { c.r.progress.release(c.key, c.held) }()
	return c.execute(rec, fn)
}

// execute runs fn under the reservation rec until it succeeds, fails
// permanently, or no further try fits. Its tries are one execution of the
// key: each further try runs under the same reservation (lease token and
// attempt), after a backoff, with nothing written in between.
func (c *call) execute(rec core.Record, fn Handler) (Outcome, error) {
	cfg := &c.r.cfg
	var longest time.Duration
	for tries := 1; ; tries++ {
		start := cfg.now()
		result, herr := c.try(&rec, fn)
		now := cfg.now()
		longest = max(longest, now.Sub(start))
		if herr == nil {
			out, err := c.succeed(rec, result, now)
			var sw *StagedWriteError
			switch {
			case errors.Is(err, ErrCommitRefused):
				return c.refused(rec, err)
			case !errors.As(err, &sw):
				return out, err
			}
			herr = sw // the staged writes refused: the handler's error
		}
		if core.NoRecord(herr) {
			return c.noRecord(rec, herr, now)
		}
		// Only a transient error is tried again in the call.
		class := c.r.classify(c.ctx, herr)
		if class != core.Transient {
			return c.stop(rec, herr, class, now)
		}
		delay, ok := c.nextTry(tries, herr, now, longest)
		if !ok {
			return c.stop(rec, herr, class, now)
		}
		c.r.logRetry(c.ctx, rec, herr, delay)
		if cfg.sleep(c.ctx, delay) != nil {
			return c.stop(rec, herr, core.Transient, cfg.now())
		}
	}
}

// stop records the failure of the call's last try (herr, of class) and
// returns the call's answer: a permanent failure for an error known to be
// permanent (or an unclassified one under WithUnclassifiedPermanent);
// otherwise a retryable failure, for a later delivery to run again, unless
// the key's executions reached their bound (core.ErrRetriesExhausted).
func (c *call) stop(rec core.Record, herr error, class core.Class, now time.Time) (Outcome, error) {
	if class == core.Unclassified && c.r.cfg.unclassifiedPermanent {
		class = core.Permanent
	}
	var outErr error
	switch {
	case class == core.Permanent:
		ferr := &core.FailureError{Message: herr.Error(), Attempts: rec.Attempts, Err: herr}
		return c.fail(rec, herr, false, now, ferr)
	case rec.Attempts >= c.maxAttempts:
		outErr = fmt.Errorf("%w after %d attempts: %w", core.ErrRetriesExhausted, rec.Attempts, herr)
	case class == core.Unclassified:
		outErr = fmt.Errorf("%w after %d attempts: %w", ErrUnclassifiedFailure, rec.Attempts, herr)
	default:
		outErr = fmt.Errorf("%w after %d attempts: %w", ErrTransientFailure, rec.Attempts, herr)
	}
	return c.fail(rec, herr, true, now, outErr)
}

// classify is the class of a handler error. Cancellation of ctx is no verdict
// on the handler: the error is transient (and nextTry allows no retry in
// this call). Otherwise explicit marks win, then the store's platform
// classifier (ErrorClassifier), then the runner's chain, then idem's own
// errors (ownClass).
func (r *Runner) classify(ctx context.Context, herr error) core.Class {
	if ctx.Err() != nil || errors.Is(herr, context.Canceled) {
		return core.Transient
	}
	return core.Classify(herr, r.handlerChain...)
}

// ownClass classifies the errors of idem itself that a handler may return,
// which no other classifier knows, as permanent: the same call would meet
// them again. They are a staged write refused by its own condition or by
// the store's limits (*StagedWriteError), and steps or staging used where
// they cannot work (ErrStepsUnsupported, ErrNoStaging, ErrStepRepeated,
// ErrStepConflict, ErrStageClosed, ErrNoExecution). Anything else is
// core.Unknown.
func ownClass(err error) core.Class {
	var sw *StagedWriteError
	for _, target := range []error{ErrStepsUnsupported, ErrNoStaging, ErrStepRepeated, ErrStepConflict, ErrStageClosed, ErrNoExecution} {
		if errors.Is(err, target) {
			return core.Permanent
		}
	}
	if errors.As(err, &sw) {
		return core.Permanent
	}
	return core.Unknown
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
	c.r.cache.add(stored, now)
	out := c.outcome(rec, &stored)
	out.Verdict, out.Result = Executed, result
	return out, nil
}

// refused records a retryable failure in place of the success of rec that
// the store refused to commit, certainly writing nothing (err wraps
// ErrCommitRefused), so that the next delivery runs the handler again.
func (c *call) refused(rec core.Record, err error) (Outcome, error) {
	outErr := fmt.Errorf("idem: success of attempt %d not committed: %w", rec.Attempts, err)
	return c.fail(rec, err, true, c.r.cfg.now(), outErr)
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
// within the window's limit. A lost lease is final; so is a commit the
// store refused, certainly writing nothing (ErrCommitRefused), once the
// retries no longer mend it: it is returned as it is, for the caller to
// record the failure in its place.
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
		// A success's commit refused: nothing written either, once retried.
		refused := rec.Status == core.StatusSucceeded && errors.Is(err, ErrCommitRefused)
		if core.Classify(err, c.r.storeChain...) == core.Transient {
			if d, ok := core.NextRetry(core.RetryPlan{
				Attempt: attempt, MaxAttempts: cfg.completeTries, Base: cfg.base, Max: cfg.max,
				Now: cfg.now(), Deadline: c.w.limit, RetryAfter: core.RetryAfter(err), R: cfg.rand(),
				Backoff: cfg.backoff,
			}); ok && cfg.sleep(context.WithoutCancel(c.ctx), d) == nil {
				continue
			}
		}
		if refused {
			return core.Record{}, err
		}
		return core.Record{}, fmt.Errorf("%w (%s, attempt %d, lease until %s): %w", ErrOutcomeNotRecorded, rec.Status, rec.Attempts, c.w.leaseUntil.UTC().Format(time.RFC3339Nano), err)
	}
}
