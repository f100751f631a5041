package idem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem/core"
)

// noRecord ends an execution under rec whose try returned herr, marked with
// core.MarkNoRecord: the call is to leave no record, so it releases its
// reservation (Releaser.Release, fenced on rec: one conditional delete), and
// the next delivery runs as if this one had never come, with no attempt
// counted for it (and no step kept). The answer is the transient failure's
// (ErrTransientFailure). On a store that cannot release (no Releaser, or a
// Release that reports errors.ErrUnsupported), the try is recorded as a
// retryable failure instead, as one marked core.MarkRetryLater is. A release
// that fails leaves the key in progress until its lease ends.
func (c *call) noRecord(rec core.Record, herr error, now time.Time) (Outcome, error) {
	outErr := fmt.Errorf("%w after %d attempts: %w", ErrTransientFailure, rec.Attempts, herr)
	rl, ok := c.r.store.(Releaser)
	if !ok {
		return c.fail(rec, herr, true, now, outErr)
	}
	err := c.release(rl, rec)
	switch {
	case err == nil, errors.Is(err, ErrNotFound), errors.Is(err, ErrRecordChanged):
		// Released, by this call or by an earlier try of it whose answer
		// was lost; or no longer this call's to release.
		return c.outcome(rec, nil), outErr
	case errors.Is(err, errors.ErrUnsupported):
		return c.fail(rec, herr, true, now, outErr)
	}
	return c.outcome(rec, nil), errors.Join(outErr, fmt.Errorf("idem: reservation of attempt %d not released (the key stays in progress until %s): %w",
		rec.Attempts, c.w.leaseUntil.UTC().Format(time.RFC3339Nano), err))
}

// release deletes the reservation rec, retrying transient store errors with
// backoff within the window's limit, as complete does.
func (c *call) release(rl Releaser, rec core.Record) error {
	cfg := &c.r.cfg
	for attempt := 1; ; attempt++ {
		// The write is made even if ctx is done, as complete's is.
		wctx, cancel := c.ctx, context.CancelFunc(func() {})
		if c.ctx.Err() != nil {
			wctx, cancel = context.WithTimeout(context.WithoutCancel(c.ctx), 2*time.Second)
		}
		t := cfg.now()
		tctx, end := c.r.traceStore(wctx, OpRelease)
		err := rl.Release(tctx, rec)
		end(err)
		cancel()
		c.storeCalls, c.storeTime = c.storeCalls+1, c.storeTime+cfg.now().Sub(t)
		if err == nil || core.Classify(err, c.r.storeChain...) != core.Transient {
			return err
		}
		d, ok := core.NextRetry(core.RetryPlan{
			Attempt: attempt, MaxAttempts: cfg.completeTries, Base: cfg.base, Max: cfg.max,
			Now: cfg.now(), Deadline: c.w.limit, RetryAfter: core.RetryAfter(err), R: cfg.rand(),
			Backoff: cfg.backoff,
		})
		if !ok || cfg.sleep(context.WithoutCancel(c.ctx), d) != nil {
			return err
		}
	}
}
