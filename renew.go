package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/idemgo/idem/core"
)

// MinLeaseRenewal is the shortest interval WithLeaseRenewal accepts: stores
// keep lease ends in milliseconds.
const MinLeaseRenewal = time.Millisecond

// WithLeaseRenewal renews the lease of every execution every interval (at
// least MinLeaseRenewal), so that a handler may run longer than any fixed
// lease and a crashed holder's key is free soon after its renewals stop. The
// store must implement LeaseRenewer: New fails otherwise.
//
// With renewal on, a reservation's lease, and each renewal's, ends one term
// after it is written (a call that waited, WithWait, counts from its
// takeover, not from its start), the term being 2·interval plus the lease
// margin (WithLease): one missed renewal is survived, and a holder that
// stops renewing (a crash) leaves its key free at most 2·interval + margin
// after its last renewal. A goroutine renews the lease while each try of
// the handler runs (one conditional store write per interval, the first
// one interval after the reservation) and stops, and is waited for, before
// the outcome is written. Steps (Step) run and are recorded within the
// lease held at the time: the last renewal's. With a context deadline, the
// lease never ends later than the deadline plus the margin (the lease
// without renewal): renewals stop there. Without a deadline they go on as
// long as the handler runs, and WithLease's lease without a deadline no
// longer bounds the handler.
//
// A failed renewal is retried with backoff (WithRetry's base and max) until
// the lease's end less the margin. When the lease cannot be held (the store
// answers ErrLeaseLost because another caller took the key over, or the
// lease end less the margin passed without a renewal, or the store refuses
// the renewal permanently), the handler's context is cancelled with a cause
// wrapping ErrLeaseLost (context.Cause). The try's error is then recorded,
// if the lease still allows, as a retryable failure left to a later
// delivery: the call's verdict is FailedTransiently and its error wraps
// ErrLeaseLost. A handler that returns a result despite the cancellation is
// recorded only if no one took the key over (completion is fenced by the
// lease token); otherwise the verdict is OutcomeNotRecorded (ErrLeaseLost).
//
// In-process retries and completion retries must fit in the lease held when
// the try ends (its end less the margin): a next try runs under the same
// reservation and renews that lease.
func WithLeaseRenewal(interval time.Duration) Option {
	return func(c *config) error {
		if interval < MinLeaseRenewal {
			return fmt.Errorf("idem: lease renewal interval %v must be at least %v", interval, MinLeaseRenewal)
		}
		c.renewEvery = interval
		return nil
	}
}

// checkRenewal fails when renewal is on over a store that cannot renew.
func (c *config) checkRenewal(store Store) error {
	if c.renewEvery <= 0 {
		return nil
	}
	if _, ok := store.(LeaseRenewer); !ok {
		return fmt.Errorf("idem: WithLeaseRenewal needs a store that implements idem.LeaseRenewer, and %T does not", store)
	}
	return nil
}

// renewTerm is the lease of a reservation or renewal: 2·interval + margin.
func (c *config) renewTerm() time.Duration { return 2*c.renewEvery + c.leaseMargin }

// renewWindow is the window of an execution whose lease is renewed: the
// lease ends one term from now, or at the deadline plus the margin if that is
// earlier, and limit is the lease end less the margin (never after the
// deadline).
func (r *Runner) renewWindow(ctx context.Context, now time.Time) window {
	lu := now.Add(r.cfg.renewTerm())
	if deadline, ok := ctx.Deadline(); ok {
		lu = minTime(lu, deadline.Add(r.cfg.leaseMargin))
	}
	return r.cfg.heldWindow(lu)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// renewal renews the lease of one try in its own goroutine. The goroutine
// owns rec, at, calls and spent until done is closed; then the try reads
// them. The lease held (w) and why it was lost (lost) are read while the
// handler runs, by its steps: mu guards them.
type renewal struct {
	c      *call
	store  LeaseRenewer
	rec    core.Record             // the record as last written: reserved or renewed
	at     time.Time               // when rec's lease was last extended
	cap    time.Time               // the latest lease end (deadline + margin); zero: none
	ctx    context.Context         // the renewals' context: cancelled when the try ends
	cancel context.CancelCauseFunc // cancels the handler's context
	stop   context.CancelFunc      // cancels ctx
	done   chan struct{}           // closed when the goroutine has returned
	calls  int                     // RenewLease calls made
	spent  time.Duration           // time spent in them

	mu   sync.Mutex
	w    window // the window of the lease held: rec's
	lost error  // why the lease was lost (wraps ErrLeaseLost), or nil
}

// renew starts the renewal of rec's lease for one try, if renewal is on,
// and returns it (nil when renewal is off) with the handler's context. The
// renewal's end ends the try.
func (c *call) renew(rec core.Record) (*renewal, context.Context) {
	cfg := &c.r.cfg
	if cfg.renewEvery <= 0 {
		return nil, c.ctx
	}
	hctx, cancel := context.WithCancelCause(c.ctx)
	rctx, stop := context.WithCancel(context.WithoutCancel(c.ctx))
	rn := &renewal{c: c, store: c.r.store.(LeaseRenewer), rec: rec, at: rec.UpdatedAt,
		ctx: rctx, cancel: cancel, stop: stop, done: make(chan struct{}), w: cfg.heldWindow(rec.LeaseUntil)}
	if deadline, ok := c.ctx.Deadline(); ok {
		rn.cap = deadline.Add(cfg.leaseMargin)
	}
	go rn.run()
	return rn, hctx
}

// end ends the try of rn (nil: renewal is off, nothing to end): it stops
// the renewals, waits for them, moves the call's window and rec, the
// call's reservation, to the lease held (so that a next try in the call
// renews that lease), and returns the try's result and error (an error
// marked to be retried by a later delivery, wrapping the cause, if the
// lease was lost).
func (rn *renewal) end(rec *core.Record, result []byte, err error) ([]byte, error) {
	if rn == nil {
		return result, err
	}
	rn.stop()
	<-rn.done
	rn.cancel(nil)
	c := rn.c
	c.storeCalls, c.storeTime = c.storeCalls+rn.calls, c.storeTime+rn.spent
	rec.LeaseUntil, rec.ExpiresAt, rec.UpdatedAt = rn.rec.LeaseUntil, rn.rec.ExpiresAt, rn.rec.UpdatedAt
	var lost error
	c.w, lost = rn.window()
	if lost != nil && err != nil {
		err = core.MarkRetryLater(fmt.Errorf("%w; the handler returned: %w", lost, err))
	}
	return result, err
}

// window returns the window of the lease held now, and why it was lost (nil
// while it is held).
func (rn *renewal) window() (window, error) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.w, rn.lost
}

// run renews the lease every interval until the try ends, the lease reaches
// its cap, or it is lost.
func (rn *renewal) run() {
	defer close(rn.done)
	cfg := &rn.c.r.cfg
	for rn.more() {
		if err := cfg.sleep(rn.ctx, rn.at.Add(cfg.renewEvery).Sub(cfg.now())); err != nil || rn.ctx.Err() != nil {
			return
		}
		if !rn.extend() {
			return
		}
	}
}

// more reports whether the lease may still be extended: it has not reached
// its cap.
func (rn *renewal) more() bool { return rn.cap.IsZero() || rn.rec.LeaseUntil.Before(rn.cap) }

// extend renews the lease once, retrying failures with backoff while the
// lease can still be held. It reports false when the lease is lost (the
// handler's context is then cancelled) or the try has ended.
func (rn *renewal) extend() bool {
	cfg := &rn.c.r.cfg
	var last error
	for attempt := 1; ; attempt++ {
		now := cfg.now()
		limit := rn.rec.LeaseUntil.Add(-cfg.leaseMargin)
		if !now.Before(limit) {
			rn.lose(rn.ended(last))
			return false
		}
		until := now.Add(cfg.renewTerm())
		if !rn.cap.IsZero() {
			until = minTime(until, rn.cap)
		}
		ctx, cancel := context.WithTimeout(rn.ctx, limit.Sub(now))
		ctx, end := rn.c.r.traceStore(ctx, OpRenewLease)
		rec, err := rn.store.RenewLease(ctx, rn.rec, until, now)
		end(err)
		cancel()
		rn.calls, rn.spent = rn.calls+1, rn.spent+cfg.now().Sub(now)
		switch {
		case rn.ctx.Err() != nil:
			return false
		case err == nil:
			rn.hold(rec, now)
			return true
		case errors.Is(err, ErrLeaseLost):
			rn.lose(fmt.Errorf("idem: lease renewal refused: %w", err))
			return false
		case core.Classify(err, rn.c.r.storeChain...) != core.Transient:
			rn.lose(fmt.Errorf("%w: the store refused the renewal: %w", ErrLeaseLost, err))
			return false
		}
		last = err
		if cfg.sleep(rn.ctx, rn.backoff(attempt, err, limit.Sub(cfg.now()))) != nil {
			return false
		}
	}
}

// hold records rec, the renewal written at now, as the lease held.
func (rn *renewal) hold(rec core.Record, now time.Time) {
	rn.rec, rn.at = rec, now
	rn.c.r.progress.hold(rec)
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.w = rn.c.r.cfg.heldWindow(rec.LeaseUntil)
}

// ended is the cause of a lease whose end less the margin passed without a
// renewal; last is the last renewal's error (nil: none was tried in time).
func (rn *renewal) ended(last error) error {
	cause := fmt.Errorf("%w: the lease ended at %s less the margin without a renewal",
		ErrLeaseLost, rn.rec.LeaseUntil.UTC().Format(time.RFC3339Nano))
	if last != nil {
		cause = fmt.Errorf("%w (last error: %w)", cause, last)
	}
	return cause
}

// backoff is the wait before retrying a failed renewal: the runner's
// backoff, raised to the store's Retry-After, and at most left (the time
// before the lease can no longer be held).
func (rn *renewal) backoff(attempt int, err error, left time.Duration) time.Duration {
	cfg := &rn.c.r.cfg
	d := core.Backoff(attempt, cfg.base, cfg.max, cfg.rand())
	if cfg.backoff != nil {
		d = max(cfg.backoff(attempt, cfg.rand()), 0)
	}
	return min(max(d, core.RetryAfter(err)), max(left, 0))
}

// lose records why the lease was lost and cancels the handler's context
// with it.
func (rn *renewal) lose(cause error) {
	rn.mu.Lock()
	rn.lost = cause
	rn.mu.Unlock()
	rn.cancel(cause)
	rn.c.r.logLost(rn.c.ctx, rn.rec, cause)
}

// logLost records, as a warning, that a try's lease was lost while its
// handler ran: its context was cancelled.
func (r *Runner) logLost(ctx context.Context, rec core.Record, cause error) {
	r.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "idem lease lost", append(keyAttrs(rec.Key),
		slog.Int("attempt", rec.Attempts), slog.String("error", cause.Error()))...)
}
