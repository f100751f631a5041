package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem/core"
)

// Handler errors of the simulated handler: marked transient, marked
// permanent, and ordinary (no mark, no classifier knows it).
var (
	errTransient = errors.New("sim: handler failed transiently")
	errPermanent = errors.New("sim: handler failed permanently")
	errRefused   = errors.New("sim: handler refused the request for its credentials")
	errOrdinary  = errors.New("sim: handler failed with an ordinary error")
)

// handle is the simulated handler: one try of a drawn duration and outcome,
// with the service's steps (one at its start, one at its end) and staged
// writes. It heeds its context (when the context ends first, or its lease is
// lost, it stops then and returns the context's error) unless it overruns.
func (c *call) handle(ctx context.Context) ([]byte, error) {
	s, t := c.t.s, c.t
	c.staged = nil
	c.awaitRenewal()
	t.yield(0) // a crash here is a crash before the handler
	tr := s.startTry(c, ctx)
	if err := c.stepAt(ctx, 0); err != nil {
		return nil, err
	}
	if err := c.run(tr); err != nil {
		return nil, err
	}
	if err := c.stepAt(ctx, 1); err != nil {
		return nil, err
	}
	if err := c.stage(ctx, tr); err != nil {
		s.endTry(c)
		c.lastTry = tryTransient
		return nil, err
	}
	s.endTry(c)
	return c.outcome(tr)
}

// run is the body of the try: it lasts a drawn duration, less if its
// context ends first (or its lease is lost) and it heeds it; an overrunning
// try ignores its context and runs past any lease.
func (c *call) run(tr *try) error {
	s, t, sv := c.t.s, c.t, c.d.sv
	end := s.now + s.between(sv.HandlerMin, sv.HandlerMax)
	tr.heedEnd = s.now + sv.HandlerMax
	if t.cancelAt >= 0 {
		end, tr.heedEnd = min(end, max(t.cancelAt, s.now)), min(tr.heedEnd, max(t.cancelAt, s.now))
	}
	if s.chance(sv.Overrun) {
		tr.overrun, end = true, s.now+s.between(sv.OverrunMin, sv.OverrunMax)
	}
	if err := c.ctxErr(); err == nil || tr.overrun {
		t.wait(end-s.now, !tr.overrun)
	}
	if err := c.ctxErr(); err != nil && !tr.overrun {
		s.endTry(c)
		c.lastTry = tryCtx
		return fmt.Errorf("sim: handler stopped: %w", err)
	}
	return nil
}

// ctxErr is the error of the handler's context as the simulation decides
// it: the lease lost (the renewal goroutine cancelled it), or the task's
// context done.
func (c *call) ctxErr() error {
	if c.rn != nil && c.rn.lost {
		return context.Canceled
	}
	t := c.t
	if t.cancelAt >= 0 && t.s.now >= t.cancelAt {
		return t.cancelErr
	}
	return nil
}

// outcome draws what the try returns: a result, a transient failure (now
// and then with a Retry-After), a permanent one, a refusal that leaves no
// record, or an ordinary error.
func (c *call) outcome(tr *try) ([]byte, error) {
	s, sv := c.t.s, c.d.sv
	r := s.rng.Float64() * (sv.Success + sv.Transient + sv.Permanent + sv.NoRecord + sv.Ordinary)
	switch {
	case r < sv.Success:
		c.lastTry = trySuccess
		return s.newResult(sv, tr.id), nil
	case r < sv.Success+sv.Transient:
		c.lastTry = tryTransient
		if s.chance(0.2) {
			return nil, core.MarkTransientAfter(errTransient, s.between(0, 3*time.Second))
		}
		return nil, core.MarkTransient(errTransient)
	case r < sv.Success+sv.Transient+sv.Permanent:
		c.lastTry = tryPermanent
		return nil, core.MarkPermanent(errPermanent)
	case r < sv.Success+sv.Transient+sv.Permanent+sv.NoRecord:
		c.lastTry = tryNoRecord
		return nil, core.MarkNoRecord(errRefused)
	}
	c.lastTry = tryOrdinary
	return nil, errOrdinary
}
