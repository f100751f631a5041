package sim

import (
	"context"
	"log/slog"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// The simulation's hooks into the runner: its tracer (which call of a task
// runs), its logger (the two records it acts on: a renewal goroutine's lost
// lease, and a call's next try), and its sleep (the runner's waits, in
// simulated time).

// tracer is every runner's idem.Tracer: a call's start tells which of its
// task's calls runs (for a batch, the next of that key in batch order: the
// wrapper runs the records of one key one after another), and its end
// wakes the calls of its sandbox waiting for its key.
type tracer struct{ s *simulation }

func (tr tracer) StartCall(ctx context.Context, keyHash string) (context.Context, func(idem.Observation)) {
	t := taskOf(ctx)
	for _, c := range t.calls {
		if !c.started && c.ks.hash == keyHash {
			c.started, t.cur = true, c
			return ctx, func(o idem.Observation) { tr.s.callEnded(c, o) }
		}
	}
	return ctx, func(idem.Observation) {}
}

func (tracer) StartStoreCall(ctx context.Context, _ string) (context.Context, func(error)) {
	return ctx, func(error) {}
}

// callEnded is told how a call ended (by the runner's tracer): it wakes the
// calls of the sandbox that wait, coalesced, for the call's key, and checks
// a batch record's verdict.
func (s *simulation) callEnded(c *call, o idem.Observation) {
	v := o.Verdict
	c.obs, c.obsErr, c.expect = &v, o.Err, nil
	s.wakeFollowers(c)
	if c.t.sv.Batch != 0 && c.t.ended == 0 {
		s.recordEnded(c, o)
	}
}

// leaseLostMessage and retryMessage are the messages of the runner's log
// records of a lease its renewal goroutine lost and of a call's next try
// (docs/observability.md).
const (
	leaseLostMessage = "idem lease lost"
	retryMessage     = "idem retry"
)

// logHandler is every runner's slog.Handler. It drops every record but
// acts on two: a renewal goroutine's lost lease, logged right before the
// goroutine ends without another call to schedule (see leaseLost), and a
// next try in a call, logged by the call's thread right before the backoff
// that precedes the try (see call.backoff).
type logHandler struct{ s *simulation }

func (h logHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h logHandler) Handle(_ context.Context, r slog.Record) error {
	a := h.s.cur
	switch {
	case r.Message == leaseLostMessage && a.rn != nil:
		h.s.leaseLost(a.rn)
	case r.Message == retryMessage && a.rn == nil && a.t.cur != nil:
		a.t.cur.retrying = true
	}
	return nil
}

func (h logHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logHandler) WithGroup(string) slog.Handler      { return h }

// sleep is every runner's sleep (WithSleep): it waits d in simulated time,
// for the actor that calls it: a renewal goroutine (its first sleep makes
// it an actor), or a task's thread.
func (b *sandbox) sleep(ctx context.Context, d time.Duration) error {
	a := b.s.cur
	if a.rn != nil {
		return a.rn.sleep(d)
	}
	switch c := a.t.cur; {
	case c != nil && c.expect != nil:
		return c.expect.start(ctx, d)
	case c != nil && c.retrying:
		return c.backoff(ctx, d)
	}
	return a.t.sleep(ctx, d)
}

// backoff is the sleep before a next try of c, which the runner announced
// (retryMessage). If it ends without an error, the runner starts the try
// at once, under the same reservation, and with it, if leases are renewed,
// a renewal goroutine that renews the lease held (expectRenewal).
func (c *call) backoff(ctx context.Context, d time.Duration) error {
	c.retrying = false
	err := c.t.sleep(ctx, d)
	if err == nil {
		c.t.s.expectRenewal(c)
	}
	return err
}

// sleep is a sleep of the task's thread. It ends early when its context, if
// it can end, ends: the task's (at cancelAt), or the handler's (its lease
// lost too). A wait for a coalesced call's outcome (a sleep on a context of
// its own, outside a handler) also ends when a call of its key in the
// sandbox ends.
func (t *task) sleep(ctx context.Context, d time.Duration) error {
	s, c := t.s, t.cur
	if err := t.simDone(ctx); err != nil {
		return err
	}
	s.hist(c, hSleep, core.Record{}, nil)
	c.ks.note(d.String())
	end := s.now + max(d, 0)
	cancellable := ctx.Done() != nil
	if cancellable && t.cancelAt >= 0 && t.cancelAt < end {
		end = t.cancelAt
	}
	handler := c.try != nil && cancellable
	follower := cancellable && !handler && ctx.Done() != (<-chan struct{})(t.ctx.done)
	if follower {
		s.follow(c, t.main.gen+1)
	}
	t.wait(end-s.now, handler || follower)
	switch {
	case !cancellable:
		return nil
	case handler:
		return c.ctxErr()
	case t.cancelAt >= 0 && s.now >= t.cancelAt:
		return t.cancelErr
	}
	return t.simDone(ctx)
}

// followKey names the calls of a sandbox that wait for a key.
type followKey struct {
	sb *sandbox
	ks *keyState
}

// parked is a park of an actor.
type parked struct {
	a   *actor
	gen uint64
}

// follow registers c's thread, about to park (as park gen), as waiting in
// its sandbox for a call of its key to end.
func (s *simulation) follow(c *call, gen uint64) {
	k := followKey{c.t.sb, c.ks}
	s.followers[k] = append(s.followers[k], parked{c.t.main, gen})
}

// wakeFollowers wakes the calls of c's sandbox waiting for c's key. A call
// woken whose leader has not ended waits again, until its own bound.
func (s *simulation) wakeFollowers(c *call) {
	k := followKey{c.t.sb, c.ks}
	for _, p := range s.followers[k] {
		if p.a.gen == p.gen && p.a.t.ended == 0 {
			s.interrupt(p.a)
		}
	}
	delete(s.followers, k)
}
