package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// renewal is the renewal goroutine of one try (WithLeaseRenewal), as the
// simulation schedules it. The runner starts one before each try of a call:
// the first after the reservation, and each next one after the backoff
// that precedes it (the tries share the reservation, and each renews the
// lease the last one held). Its first call (a sleep) makes it an actor,
// handed to the scheduler by the try's thread, which waits for it at the
// handler's start (see awaitRenewal). From then on it runs only when the
// scheduler resumes it, and it is stopped (its context cancelled) only
// while its task holds the turn and waits for it to end.
//
// The goroutine ends without another call the simulation could schedule in
// three cases, each known beforehand: the lease held is already at its cap
// (the deadline plus the margin) when the try starts (no goroutine is
// awaited); a renewal reached the cap (its answer is held until the try
// ends, as a late answer, see RenewLease); the lease is lost (the runner
// logs it: the log handler hands the turn back, see leaseLost).
type renewal struct {
	c     *call
	a     *actor
	ctx   context.Context    // the renewals' context: the runner's, from the first sleep
	cap   time.Time          // the latest lease end (deadline + margin); zero: none
	first chan time.Duration // the end of its first sleep, sent to the try's thread
	lost  bool               // the lease was lost: the handler's context is cancelled
}

// reserved records that the runner holds the reservation of c until
// leaseUntil, and expects the renewal goroutine of its first try.
func (s *simulation) reserved(c *call, leaseUntil time.Time) {
	c.held = leaseUntil
	if c.ks.steps == nil {
		c.ks.steps = map[string]string{}
	}
	c.lifeSteps = c.ks.steps
	s.expectRenewal(c)
}

// expectRenewal records, if c's service renews leases, that the try the
// runner starts next under c's reservation starts a renewal goroutine,
// unless the lease held (c.held) is at its cap already. It is told so at
// the reservation, and after the backoff before a next try (see
// call.backoff).
func (s *simulation) expectRenewal(c *call) {
	c.expect = nil
	sv := c.d.sv
	if sv.Renewal <= 0 {
		return
	}
	rn := &renewal{c: c}
	if deadline, ok := c.t.ctx.Deadline(); ok {
		rn.cap = deadline.Add(sv.leaseMargin())
	}
	if !rn.more(c.held) {
		return
	}
	rn.a = s.newActor(c.t, rn)
	rn.first = make(chan time.Duration)
	c.expect = rn
}

// more reports whether a lease ending at until may be extended: the
// runner's test (renewal.more) that keeps its goroutine going.
func (rn *renewal) more(until time.Time) bool { return rn.cap.IsZero() || until.Before(rn.cap) }

// awaitRenewal waits, at the start of the handler, for the renewal
// goroutine of the try to make its first call, and queues its wake-up. Only
// then may the thread go on: the two never run at once.
func (c *call) awaitRenewal() {
	rn := c.expect
	if rn == nil {
		return
	}
	s := c.t.s
	var at time.Duration
	select {
	case at = <-rn.first:
	case <-time.After(time.Minute):
		panic(fmt.Sprintf("sim: the renewal goroutine of delivery %d did not start", c.d.id))
	}
	c.expect, c.rn = nil, rn
	rn.a.gen++
	s.push(event{at: at, a: rn.a, gen: rn.a.gen, kind: wakeRun})
}

// start is the goroutine's first call: a sleep of d. It tells the try's
// thread when to wake it, and parks.
func (rn *renewal) start(ctx context.Context, d time.Duration) error {
	if inExecution(ctx) {
		panic("sim: a renewal goroutine was expected, and a handler slept")
	}
	rn.ctx = ctx
	select {
	case rn.first <- rn.a.s.now + max(d, 0):
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-rn.a.wake:
		return nil
	case <-ctx.Done():
		rn.a.gen++
		return ctx.Err()
	}
}

// inExecution reports whether ctx is a handler's (it carries its
// execution).
func inExecution(ctx context.Context) bool {
	_, err := idem.DownstreamKey(ctx, "sim")
	return err == nil
}

// sleep is a later sleep of the goroutine: it ends early when the try
// stops the renewals.
func (rn *renewal) sleep(d time.Duration) error {
	if rn.a.park(rn.a.s.now+max(d, 0), wakeRun, false, rn.ctx.Done()) == wakeInterrupt {
		return rn.ctx.Err()
	}
	return nil
}

// rule is how the legs of a renewal park the goroutine: they end at the
// lease's end less the margin (the runner bounds the call there), or when
// the try stops the renewals.
func (rn *renewal) rule() *legRule {
	sb, margin := rn.c.t.sb, rn.c.d.sv.leaseMargin()
	return &legRule{a: rn.a, call: rn.c, until: sb.simTime(rn.c.held.Add(-margin)), stop: rn.ctx.Done(), rn: rn}
}

// RenewLease implements idem.LeaseRenewer over the inner store for the
// renewal goroutine that calls it, with the faults and latencies of a
// write; each leg is cut at the lease's end less the margin. A renewal that
// brings the lease to its cap is answered only when the try stops the
// renewals (a late answer: the goroutine would end right after it without
// another call to schedule).
func (f *faultStore) RenewLease(ctx context.Context, rec core.Record, until, now time.Time) (core.Record, error) {
	s := f.s
	rn := s.cur.rn
	lr, ok := f.inner.(idem.LeaseRenewer)
	if rn == nil || !ok {
		return core.Record{}, core.MarkPermanent(errors.New("sim: a lease renewal outside a renewal goroutine, or over a store without renewals"))
	}
	r := rn.rule()
	got, err := faultWrite(f, r, "renew", func(ictx context.Context) (core.Record, error) {
		return lr.RenewLease(ictx, rec, until, now)
	}, func(v core.Record, err error, lost bool) {
		s.afterRenew(rn.c, rec, until, now, v, err)
		// The last renewal's answer leg lasts until the renewals stop.
		r.hold = err == nil && !lost && !rn.more(v.LeaseUntil)
	})
	if err == nil {
		rn.c.held = got.LeaseUntil
	}
	return got, err
}

// afterRenew checks a renewal's answer from the inner store against the
// shadow model (core.Renewed, core.Renewable) and updates the model.
func (s *simulation) afterRenew(c *call, rec core.Record, until, now time.Time, got core.Record, err error) {
	ks := c.ks
	renewed := ks.has && core.Renewed(ks.cur, rec.LeaseToken, until)
	renewable := ks.has && core.Renewable(ks.cur, rec.LeaseToken, now)
	if err != nil {
		s.hist(c, hRenewRefused, rec, err)
		if (renewed || renewable) && errors.Is(err, idem.ErrLeaseLost) {
			s.violate(StoreContract, ks, "the store refused the renewal of %s until %s at %s, which core.Renewable allows over %s: %v",
				rec, s.fmtAbs(until), s.fmtAbs(now), ks.cur, err)
		}
		return
	}
	s.stats.Renewals++
	if !renewed && !renewable {
		s.violate(ks.fencing(rec.LeaseToken), ks, "the store renewed lease %s until %s at %s, but holds %s",
			rec.LeaseToken, s.fmtAbs(until), s.fmtAbs(now), s.curString(ks))
		return
	}
	if !renewed {
		r := core.Renew(ks.cur, until, now)
		ks.cur.LeaseUntil, ks.cur.ExpiresAt, ks.cur.UpdatedAt = r.LeaseUntil, r.ExpiresAt, r.UpdatedAt
	}
	if d := got.LeaseUntil.Sub(ks.cur.LeaseUntil).Abs(); d > s.cfg.StoreResolution {
		s.violate(StoreContract, ks, "the store answered renewal %s until %s with lease until %s, but holds %s",
			rec.LeaseToken, s.fmtAbs(until), s.fmtAbs(got.LeaseUntil), ks.cur)
	} else if d > 0 {
		ks.cur.LeaseUntil = got.LeaseUntil // the store's rounding
	}
	s.hist(c, hRenewAccepted, ks.cur, nil)
}

// leaseLost is told, by the runner's log record, that the renewal
// goroutine rn lost its lease: it cancelled the handler's context and ends
// without another call. The handler, if it heeds its context, stops now.
// The turn goes back to the scheduler here.
func (s *simulation) leaseLost(rn *renewal) {
	rn.lost = true
	c := rn.c
	s.stats.LeasesLost++
	if tr := c.try; tr != nil && tr.overrun {
		tr.heedEnd = min(tr.heedEnd, s.now)
	}
	s.hist(c, hLeaseLost, core.Record{}, nil)
	s.interrupt(c.t.main)
	s.back <- struct{}{}
}
