package sim

import (
	"context"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// sandbox is one process of a service: its own runner (and, for a batch
// service, the wrapper around it) and clock.
type sandbox struct {
	s      *simulation
	sv     *service
	name   string
	region int // in a run of two Regions, its Region: 0 (A) for even sandboxes, 1 (B) for odd
	skew   time.Duration
	runner *idem.Runner
	batch  batchHandler // the batch wrapper's handler, for a batch service
}

// clock is the sandbox's clock: simulated time, skewed.
func (b *sandbox) clock() time.Time { return epoch.Add(b.s.now + b.skew) }

// simTime is the simulated instant at which the sandbox's clock reads x.
func (b *sandbox) simTime(x time.Time) time.Duration { return x.Sub(epoch) - b.skew }

// token returns a new lease token, unique in the run.
func (b *sandbox) token() string {
	b.s.tokenN++
	return "t" + strconv.FormatInt(b.s.tokenN, 10) + "." + b.name
}

// delivery is one message of a key as a call receives it.
type delivery struct {
	id      int64
	sv      *service
	ks      *keyState
	variant int   // payload variant: 0 usually, 1 for a reused key
	sent    int64 // the copy's own number, in payloads whose fingerprint ignores it
	gen     int   // how many times it was redelivered
	region  int   // in a run of two Regions, the Region it arrives in plus one; 0: any sandbox
}

// payload is the delivery's JSON payload (a batch record's body). With a
// fingerprint selection, each copy carries its own sent_at, which the
// fingerprint leaves out.
func (d *delivery) payload() []byte {
	if d.sv.Selection {
		return fmt.Appendf(nil, `{"id":%q,"variant":%d,"sent_at":%d}`, d.ks.name, d.variant, d.sent)
	}
	return fmt.Appendf(nil, `{"id":%q,"variant":%d}`, d.ks.name, d.variant)
}

// task is one invocation of a process: one Runner.Do call, or one batch of
// a batch service. Its calls run one after another on its thread (main).
type task struct {
	s    *simulation
	id   int64
	sv   *service
	sb   *sandbox
	ctx  *simCtx
	main *actor

	killAt    time.Duration // when the platform kills it; -1: never
	cancelAt  time.Duration // when its context is done; -1: never
	cancelErr error         // the context's error from cancelAt on
	ended     wakeKind      // how it was unwound, if it was

	calls []*call // its deliveries, in batch order
	cur   *call   // the call running on its thread
	lane  *lane   // the ordered lane of an ordered batch
}

// call is one delivery a task handles: its Runner.Do call (or, for a batch
// record not started, the verdict the wrapper reported without one).
type call struct {
	t  *task
	d  *delivery
	ks *keyState

	started    bool              // the runner started it (Tracer.StartCall)
	try        *try              // the running handler try, if any
	lastTry    tryClass          // outcome of its last finished try
	tries      int               // handler tries it started
	execLife   int               // the record lifetime its tries ran in (0: none yet)
	success    string            // resultKey of the success the store accepted from it
	held       time.Time         // lease end the runner holds: its reservation's, then its last renewal's
	lifeSteps  map[string]string // the steps of the record lifetime its reservation is in (nil: not known, the current one's)
	expect     *renewal          // the renewal goroutine its next try starts
	retrying   bool              // the runner announced a next try: its next sleep is the backoff before it
	rn         *renewal          // the renewal goroutine of its running try
	stepWrites int               // RecordStep calls it made
	staged     *stagedTry        // the staged writes of its last try
	obs        *idem.Verdict     // the verdict the tracer saw it end with
	obsErr     error
}

func (s *simulation) newTask(sv *service, sb *sandbox) *task {
	s.taskN++
	t := &task{s: s, id: s.taskN, sv: sv, sb: sb, killAt: -1, cancelAt: -1}
	t.main = s.newActor(t, nil)
	s.setDeadline(t)
	return t
}

// addCall adds a call of a copy of d to t.
func (t *task) addCall(d *delivery) *call {
	s := t.s
	s.spawned++
	s.deliveryN++
	cp := *d
	cp.id = s.deliveryN
	c := &call{t: t, d: &cp, ks: cp.ks}
	t.calls = append(t.calls, c)
	s.hist(c, hDeliver, core.Record{}, nil)
	if cp.gen > 0 {
		c.ks.note("(redelivery " + strconv.Itoa(cp.gen) + ")")
	}
	return c
}

// start starts t's thread.
func (s *simulation) start(t *task, run func()) {
	go func() {
		defer func() {
			r := recover()
			if r != nil && r != errCrash {
				s.violate(Outcome, t.calls[0].ks, "task %d panicked: %v\n%s", t.id, r, debug.Stack())
			}
			t.done()
			s.back <- struct{}{}
		}()
		if k := <-t.main.wake; k != wakeRun {
			t.ended = k
			panic(errCrash)
		}
		run()
	}()
	s.push(event{at: s.now, a: t.main, gen: t.main.gen})
}

// arrive delivers a message of sv (now and then with copies) and schedules
// the service's next arrival.
func (s *simulation) arrive(sv *service) {
	if s.spawned >= s.cfg.Deliveries {
		return
	}
	switch {
	case sv.Batch != 0:
		s.arriveBatch(sv)
	case sv.Copies > 0:
		s.arriveCopies(sv)
	default:
		d := s.newDelivery(sv)
		s.spawn(d)
		if s.chance(sv.Burst) {
			for n := 1 + s.rng.IntN(3); n > 0; n-- {
				s.after(s.between(0, 50*time.Millisecond), func() { s.spawn(d) })
			}
		}
	}
	s.after(s.expGap(sv.ArrivalGap), func() { s.arrive(sv) })
}

// newDelivery draws a message of sv: one of its keys, usually with the
// key's own payload.
func (s *simulation) newDelivery(sv *service) *delivery {
	ks := s.keyState(sv.pickKey(s), sv)
	variant := 0
	if s.chance(sv.Reuse) {
		variant = 1
	}
	return &delivery{sv: sv, ks: ks, variant: variant}
}

// pickKey returns the name of one of the active keys, or opens a new one.
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

// spawn starts a Do call of a copy of d in a new task.
func (s *simulation) spawn(d *delivery) {
	if s.spawned >= s.cfg.Deliveries && d.sv.Copies == 0 || s.halted() {
		return
	}
	sv := d.sv
	t := s.newTask(sv, s.sandboxFor(d))
	s.sentN++
	d.sent = s.sentN
	c := t.addCall(d)
	s.start(t, func() {
		var ctx context.Context = t.ctx
		if sv.SourceLimited {
			ctx = idem.ContextWithSourceLimit(ctx)
		}
		out, err := t.sb.runner.Do(ctx, c.ks.key, c.d.payload(), c.handle)
		s.finishCall(c, out, err)
	})
}

// setDeadline gives the task its context: a deadline of the drawn mode, and
// perhaps a caller that hangs up.
func (s *simulation) setDeadline(t *task) {
	sv := t.sv
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

// done ends the task's calls that the runner did not end (a crash, a kill).
func (t *task) done() {
	s := t.s
	for _, c := range t.calls {
		if c.try != nil { // it died in its handler: the try ends now
			s.endTry(c)
		}
	}
	s.finished += len(t.calls)
	if t.ended == 0 || t.ended == wakeHalt {
		return
	}
	if t.ended == wakeKill {
		s.stats.Kills++
	} else {
		s.stats.Crashes++
	}
	if t.sv.Batch != 0 {
		s.batchCrashed(t)
		return
	}
	c := t.calls[0]
	s.hist(c, hEnd, core.Record{}, nil)
	c.ks.note(classNames[outCrash])
	s.redeliver(c.d, outCrash)
}

// finishCall checks how a Do call that returned ended, and redelivers its
// message if a queue would.
func (s *simulation) finishCall(c *call, out idem.Outcome, err error) {
	cl := s.checkOutcome(c, out, err)
	s.stats.count(cl, out)
	s.hist(c, hEnd, core.Record{}, err)
	c.ks.note(classNames[cl])
	s.mix(uint64(cl), uint64(out.Attempts))
	s.redeliver(c.d, cl)
}

// redeliver delivers d again later unless its call ended for good.
func (s *simulation) redeliver(d *delivery, c outClass) {
	if done(c) || d.gen >= d.sv.Redeliveries || s.halted() {
		return
	}
	s.stats.Redeliveries++
	next := *d
	next.gen++
	s.after(s.between(d.sv.RedeliverMin, d.sv.RedeliverMax), func() { s.spawn(&next) })
}

// done reports whether a call that ended so needs no redelivery.
func done(c outClass) bool {
	switch c {
	case outSuccess, outReplay, outPermanent, outKeyReused, outExhausted:
		return true
	}
	return false
}

// yield parks the task's thread for d, with a crash drawn for this point.
func (t *task) yield(d time.Duration) { t.wait(d, false) }

// wait parks the task's thread for d, with a crash drawn for this point, at
// a random instant of the wait; a kill replaces the wake-up if the deadline
// comes first. intr lets an interrupt end the wait early: wait then reports
// true.
func (t *task) wait(d time.Duration, intr bool) bool {
	s := t.s
	at, kind := s.now+max(d, 0), wakeRun
	if s.chance(s.cfg.Faults.Crash) {
		at, kind = s.now+time.Duration(s.rng.Float64()*float64(max(d, 0))), wakeCrash
	}
	return t.main.park(at, kind, intr, nil) == wakeInterrupt
}
