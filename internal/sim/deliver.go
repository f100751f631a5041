package sim

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// Handler errors of the simulated handler.
var (
	errTransient = errors.New("sim: handler failed transiently")
	errPermanent = errors.New("sim: handler failed permanently")
)

// sandbox is one process of a service: its own runner and clock.
type sandbox struct {
	s      *simulation
	name   string
	skew   time.Duration
	runner *idem.Runner
}

// clock is the sandbox's clock: simulated time, skewed.
func (b *sandbox) clock() time.Time { return epoch.Add(b.s.now + b.skew) }

// sleep waits d in simulated time, or until the context is done.
func (b *sandbox) sleep(ctx context.Context, d time.Duration) error {
	t := taskOf(ctx)
	if err := t.simDone(ctx); err != nil {
		return err
	}
	b.s.hist(t.d.ks, t, hSleep, core.Record{}, nil)
	t.d.ks.note(d.String())
	end := b.s.now + max(d, 0)
	if ctx == context.Context(t.ctx) && t.cancelAt >= 0 && t.cancelAt < end {
		end = t.cancelAt
	}
	t.yieldUntil(end)
	return t.simDone(ctx)
}

// token returns a new lease token, unique in the run.
func (b *sandbox) token() string {
	b.s.tokenN++
	return "t" + strconv.FormatInt(b.s.tokenN, 10) + "." + b.name
}

// yieldUntil blocks the task until at, with a crash drawn for this point.
func (t *task) yieldUntil(at time.Duration) { t.yield(at - t.s.now) }

// delivery is one message of a key as a Do call receives it.
type delivery struct {
	id      int64
	sv      *service
	ks      *keyState
	variant int // payload variant: 0 usually, 1 for a reused key
	payload []byte
	gen     int // how many times it was redelivered
}

// arrive delivers a message of sv (now and then with copies) and schedules
// the service's next arrival.
func (s *simulation) arrive(sv *service) {
	if s.spawned >= s.cfg.Deliveries {
		return
	}
	ks := s.keyState(sv.pickKey(s), sv)
	variant := 0
	if s.chance(sv.Reuse) {
		variant = 1
	}
	d := &delivery{sv: sv, ks: ks, variant: variant,
		payload: fmt.Appendf(nil, `{"key":%q,"variant":%d}`, ks.key, variant)}
	s.spawn(d)
	if s.chance(sv.Burst) {
		for n := 1 + s.rng.IntN(3); n > 0; n-- {
			s.after(s.between(0, 50*time.Millisecond), func() { s.spawn(d) })
		}
	}
	s.after(s.expGap(sv.ArrivalGap), func() { s.arrive(sv) })
}

// pickKey returns one of the active keys, or opens a new one.
func (sv *service) pickKey(s *simulation) string {
	if len(sv.active) == 0 || s.chance(sv.NewKey) {
		k := fmt.Sprintf("%s:k%06d", sv.Name, sv.nextKey)
		sv.nextKey++
		if len(sv.active) >= sv.ActiveKeys {
			sv.active = sv.active[1:]
		}
		sv.active = append(sv.active, k)
		return k
	}
	return sv.active[s.rng.IntN(len(sv.active))]
}

// spawn starts a Do call for a copy of d in a new task.
func (s *simulation) spawn(d *delivery) {
	if s.spawned >= s.cfg.Deliveries || s.halted() {
		return
	}
	s.spawned++
	s.taskN++
	c := *d
	c.id = s.taskN
	sv := d.sv
	t := &task{s: s, id: s.taskN, d: &c, sb: sv.sandboxes[s.rng.IntN(len(sv.sandboxes))],
		wake: make(chan wakeKind), killAt: -1, cancelAt: -1}
	s.setDeadline(t)
	s.hist(c.ks, t, hDeliver, core.Record{}, nil)
	if c.gen > 0 {
		c.ks.note("(redelivery " + strconv.Itoa(c.gen) + ")")
	}
	go t.main()
	s.push(event{at: s.now, task: t, kind: wakeRun})
}

// setDeadline gives the task its context: a deadline of the drawn mode, and
// perhaps a caller that hangs up.
func (s *simulation) setDeadline(t *task) {
	sv := t.d.sv
	mode := sv.Deadlines[s.rng.IntN(len(sv.Deadlines))]
	t.ctx = &simCtx{t: t, done: make(chan struct{})}
	switch mode.Kind {
	case Kill: // the platform's deadline, on the true clock
		timeout := s.between(mode.Min, mode.Max)
		t.ctx.deadline, t.ctx.hasDeadline = epoch.Add(s.now+timeout), true
		t.killAt, t.cancelAt, t.cancelErr = s.now+timeout, s.now+timeout, context.DeadlineExceeded
	case Cancel: // context.WithTimeout on the sandbox's clock
		timeout := s.between(mode.Min, mode.Max)
		t.ctx.deadline, t.ctx.hasDeadline = t.sb.clock().Add(timeout), true
		t.cancelAt, t.cancelErr = s.now+timeout, context.DeadlineExceeded
	}
	if mode.Kind != Kill && s.chance(sv.ClientCancel) {
		if at := s.now + s.between(0, sv.HandlerMax); t.cancelAt < 0 || at < t.cancelAt {
			t.cancelAt, t.cancelErr = at, context.Canceled
		}
	}
}

// main is the task's goroutine: it waits for its first turn, calls Do, and
// reports how it ended, crashed or not.
func (t *task) main() {
	var (
		out      idem.Outcome
		err      error
		returned bool
	)
	defer func() {
		r := recover()
		t.s.finish(t, out, err, returned, r)
		t.s.back <- struct{}{}
	}()
	if k := <-t.wake; k != wakeRun {
		t.ended = k
		panic(errCrash)
	}
	out, err = t.sb.runner.Do(t.ctx, t.d.ks.key, t.d.payload, t.handle)
	returned = true
}

// finish checks how a task ended and redelivers its message if a queue
// would.
func (s *simulation) finish(t *task, out idem.Outcome, err error, returned bool, r any) {
	s.finished++
	ks := t.d.ks
	if t.try != nil { // it died in its handler: the try ends now
		s.endTry(t)
	}
	if r != nil && r != errCrash {
		s.violate(Outcome, ks, "call %d panicked: %v\n%s", t.id, r, debug.Stack())
	}
	if t.ended == wakeHalt {
		return
	}
	c := outCrash
	switch {
	case returned:
		c = s.checkOutcome(t, out, err)
	case t.ended == wakeKill:
		s.stats.Kills++
	default:
		s.stats.Crashes++
	}
	s.stats.count(c, out)
	s.hist(ks, t, hEnd, core.Record{}, err)
	ks.note(classNames[c])
	s.mix(uint64(c), uint64(out.Attempts))
	s.redeliver(t.d, c)
}

// redeliver delivers d again later unless its call ended for good.
func (s *simulation) redeliver(d *delivery, c outClass) {
	switch c {
	case outSuccess, outReplay, outPermanent, outKeyReused, outExhausted:
		return
	}
	if d.gen >= d.sv.Redeliveries || s.halted() {
		return
	}
	s.stats.Redeliveries++
	next := *d
	next.gen++
	s.after(s.between(d.sv.RedeliverMin, d.sv.RedeliverMax), func() { s.spawn(&next) })
}

// handle is the simulated handler: one try of a drawn duration and outcome.
// It heeds its context (when the context ends first, it stops then and
// returns the context's error) unless it overruns.
func (t *task) handle(ctx context.Context) ([]byte, error) {
	s, sv := t.s, t.d.sv
	t.yield(0) // a crash here is a crash before the handler
	tr := s.startTry(t)
	id, overrun := tr.id, s.chance(sv.Overrun)
	end := s.now + s.between(sv.HandlerMin, sv.HandlerMax)
	tr.heedEnd = s.now + sv.HandlerMax
	if t.cancelAt >= 0 && t.cancelAt < end {
		end = t.cancelAt
	}
	if t.cancelAt >= 0 && t.cancelAt < tr.heedEnd {
		tr.heedEnd = t.cancelAt
	}
	if overrun {
		tr.overrun, end = true, s.now+s.between(sv.OverrunMin, sv.OverrunMax)
	}
	if err := t.stepAt(ctx, sv, 0); err != nil {
		return nil, err
	}
	t.yieldUntil(end)
	if err := ctx.Err(); err != nil && !overrun {
		s.endTry(t)
		t.lastTry = tryCtx
		return nil, fmt.Errorf("sim: handler stopped: %w", err)
	}
	if err := t.stepAt(ctx, sv, 1); err != nil {
		return nil, err
	}
	s.endTry(t)
	r := s.rng.Float64() * (sv.Success + sv.Transient + sv.Permanent)
	switch {
	case r < sv.Success:
		t.lastTry = trySuccess
		return []byte("r" + strconv.FormatInt(id, 10)), nil
	case r < sv.Success+sv.Transient:
		t.lastTry = tryTransient
		if s.chance(0.2) {
			return nil, core.MarkTransientAfter(errTransient, s.between(0, 3*time.Second))
		}
		return nil, core.MarkTransient(errTransient)
	}
	t.lastTry = tryPermanent
	return nil, errPermanent
}
