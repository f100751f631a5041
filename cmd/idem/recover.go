package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem/core"
)

// Why a redrive or a bulk release releases a record, or leaves it as it is:
// the record's disposition.
const (
	whyPermanent  = "will not run again on its own: it replays its permanent failure"
	whyExhausted  = "will not run again on its own: its retries are exhausted (--max-attempts)"
	whyRetryable  = "runs again on its own: a retryable failure with attempts left (not released)"
	whyStuck      = "runs again on its own: the next delivery takes over its ended lease"
	whySucceeded  = "succeeded: a delivery replays its result, the handler does not run"
	whyInProgress = "in progress under a live lease: a delivery is refused until the lease ends"
	whyNoRecord   = "no record: a delivery runs it as a new key"
)

// A disposition is what recovery does with a record: release it, when no
// delivery would run its handler again (it replays a permanent failure, or
// its retries are exhausted), or leave it as it is, and why.
type disposition struct {
	release bool
	why     string
}

// dispose returns the disposition of rec (nil: no record) at now, by
// core.Decide with the runner's WithMaxAttempts.
func dispose(rec *core.Record, now time.Time, maxAttempts int) disposition {
	if rec == nil {
		return disposition{why: whyNoRecord}
	}
	d := decision(*rec, now, maxAttempts)
	switch {
	case d.Action == core.Replay && rec.Status == core.StatusFailed:
		return disposition{release: true, why: whyPermanent}
	case d.Action == core.Reject && errors.Is(d.Err, core.ErrRetriesExhausted):
		return disposition{release: true, why: whyExhausted}
	case d.Action == core.Execute && d.Takeover:
		return disposition{why: whyStuck}
	case d.Action == core.Execute:
		return disposition{why: whyRetryable}
	case d.Action == core.Replay:
		return disposition{why: whySucceeded}
	case d.Action == core.InProgress:
		return disposition{why: whyInProgress}
	}
	return disposition{why: fmt.Sprintf("left as it is: %v", d.Err)}
}

// A pacer spaces actions at least every apart (a rate limit; 0: none), by
// the command's clock.
type pacer struct {
	every time.Duration
	next  time.Time
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
}

// newPacer returns the pacer of perSecond actions a second (0: no limit).
func (c *cli) newPacer(perSecond float64) *pacer {
	p := &pacer{now: c.now, sleep: c.sleep}
	if p.sleep == nil {
		p.sleep = sleepContext
	}
	if perSecond > 0 {
		p.every = time.Duration(float64(time.Second) / perSecond)
	}
	return p
}

// wait returns when the next action may start, or with ctx's error.
func (p *pacer) wait(ctx context.Context) error {
	if p.every <= 0 {
		return ctx.Err()
	}
	t := p.now()
	if p.next.After(t) {
		if err := p.sleep(ctx, p.next.Sub(t)); err != nil {
			return err
		}
		t = p.next
	}
	p.next = t.Add(p.every)
	return nil
}
