package sim

import (
	"container/heap"
	"context"
	"fmt"
	"time"
)

// epoch is simulated time zero. Simulated instants are durations since it.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// never is the instant of a park that no event ends (see actor.park).
const never time.Duration = -1

// wakeKind is how a parked actor is resumed.
type wakeKind uint8

const (
	wakeRun       wakeKind = iota // go on
	wakeCrash                     // the process dies here
	wakeKill                      // the deadline passed: the platform kills the process
	wakeHalt                      // the run stopped: unwind without further checks
	wakeInterrupt                 // an interruptible park ended early (see simulation.interrupt)
)

// event is one entry of the queue: an actor to resume (if its park is still
// the one the event was made for), or a function to run on the scheduler's
// goroutine.
type event struct {
	at   time.Duration // simulated time
	tie  uint64        // random order among events of the same time
	seq  uint64        // insertion order, for a total order
	a    *actor
	gen  uint64 // the actor's park the event ends
	kind wakeKind
	fn   func()
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	a, b := &q[i], &q[j]
	if a.at != b.at {
		return a.at < b.at
	}
	if a.tie != b.tie {
		return a.tie < b.tie
	}
	return a.seq < b.seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = event{}
	*q = old[:len(old)-1]
	return e
}

// errCrash is the panic value that unwinds a crashed task's goroutine.
var errCrash = &struct{ name string }{"sim: process crashed"}

// push queues ev at ev.at (never before now).
func (s *simulation) push(ev event) {
	if ev.at < s.now {
		ev.at = s.now
	}
	s.seq++
	ev.seq = s.seq
	ev.tie = s.rng.Uint64()
	heap.Push(&s.q, ev)
}

// after runs fn on the scheduler at now+d.
func (s *simulation) after(d time.Duration, fn func()) { s.push(event{at: s.now + d, fn: fn}) }

// loop runs events in order until the queue is empty or the run stops.
// Exactly one goroutine runs at a time: the scheduler hands control to an
// actor and waits until the actor parks again (or, for a renewal goroutine
// that ends, says it is about to end).
func (s *simulation) loop() {
	for len(s.q) > 0 {
		ev := heap.Pop(&s.q).(event)
		if ev.a == nil && ev.fn == nil {
			panic("sim: an event with neither an actor nor a function: the queue was changed by a goroutine that did not hold the turn")
		}
		if ev.a != nil && ev.gen != ev.a.gen {
			continue // the park ended otherwise (interrupted, or stopped)
		}
		s.now = ev.at
		s.steps++
		s.mix(uint64(ev.at), ev.seq)
		if ev.fn != nil {
			ev.fn()
		} else {
			s.resume(ev.a, ev.kind)
		}
		if s.halted() {
			s.drain()
			return
		}
	}
}

// resume hands the turn to a and waits until it hands it back.
func (s *simulation) resume(a *actor, k wakeKind) {
	s.mix(uint64(a.id), uint64(k))
	s.hand(a, k)
}

// hand wakes a, parked, with k, and waits until it hands the turn back. An
// actor that does not take the turn within a minute on the wall clock is
// not parked: its goroutine ended, or a goroutine the simulation does not
// schedule parked in its place (a renewal goroutine it did not expect) and
// went on. The run cannot go on, and stops with a panic that says so
// rather than wait forever.
func (s *simulation) hand(a *actor, k wakeKind) {
	s.cur = a
	select {
	case a.wake <- k:
	default:
		// A renewal goroutine may be about to park for the first time.
		timer := time.NewTimer(time.Minute)
		select {
		case a.wake <- k:
			timer.Stop()
		case <-timer.C:
			panic(fmt.Sprintf("sim: actor %d (%s of task %d) was woken at %s but is not parked: its goroutine ended, or another parked in its place",
				a.id, a.role(), a.t.id, fmtRel(s.now)))
		}
	}
	<-s.back
}

// drain unwinds every parked task after the run stopped. Renewal goroutines
// are not woken: each ends when the try it renews unwinds and stops it.
func (s *simulation) drain() {
	for len(s.q) > 0 {
		ev := heap.Pop(&s.q).(event)
		if ev.a == nil || ev.gen != ev.a.gen || ev.a.rn != nil {
			continue
		}
		s.hand(ev.a, wakeHalt)
	}
}

// actor is a thread of control the scheduler resumes: a task's thread (the
// goroutine of its Do call, or, one after another, those the batch wrapper
// runs its records on), or the renewal goroutine of one of its tries (rn).
type actor struct {
	s    *simulation
	id   int64
	t    *task
	rn   *renewal // nil for a task's thread
	wake chan wakeKind
	gen  uint64 // the current park; events made for older ones are stale
	intr bool   // the current park may be interrupted (simulation.interrupt)
	// handoff, if not nil, is signalled instead of the scheduler at the
	// next park: a renewal goroutine's first, made while its task holds
	// the turn.
	handoff chan struct{}
}

// role names what a runs: a task's thread or a renewal goroutine.
func (a *actor) role() string {
	if a.rn != nil {
		return "the renewal goroutine"
	}
	return "the thread"
}

func (s *simulation) newActor(t *task, rn *renewal) *actor {
	s.actorN++
	return &actor{s: s, id: s.actorN, t: t, rn: rn, wake: make(chan wakeKind)}
}

// park blocks a until at (never: until stop) and hands the turn back. A
// task's thread is killed instead if its deadline comes first, and unwinds
// (a panic of errCrash) when resumed to crash, be killed or halt, or when it
// parks after its task ended. intr lets simulation.interrupt end the park
// early. stop, if not nil, ends the park early too: a renewal goroutine's
// context cancelled by its task, which holds the turn and waits for the
// goroutine to end. An ended park returns wakeInterrupt.
func (a *actor) park(at time.Duration, kind wakeKind, intr bool, stop <-chan struct{}) wakeKind {
	s, t := a.s, a.t
	if a.rn == nil {
		if t.ended != 0 {
			panic(errCrash)
		}
		if t.killAt >= 0 && (at == never || at > t.killAt) {
			at, kind = t.killAt, wakeKill
		}
	}
	a.gen++
	a.intr = intr
	if at != never {
		s.push(event{at: at, a: a, gen: a.gen, kind: kind})
	}
	if h := a.handoff; h != nil {
		a.handoff = nil
		h <- struct{}{}
	} else {
		s.back <- struct{}{}
	}
	var k wakeKind
	select {
	case k = <-a.wake:
	case <-stop:
		a.gen++
		k = wakeInterrupt
	}
	a.intr = false
	if a.rn == nil && (k == wakeCrash || k == wakeKill || k == wakeHalt) {
		t.ended = k
		panic(errCrash)
	}
	return k
}

// interrupt ends a's park now if it is interruptible: the park returns
// wakeInterrupt. Called with the turn, while a is parked.
func (s *simulation) interrupt(a *actor) {
	if !a.intr {
		return
	}
	a.intr = false
	a.gen++
	s.push(event{at: s.now, a: a, gen: a.gen, kind: wakeInterrupt})
}

// simCtx is a delivery's context: its deadline is in simulated time and it
// is done from the task's cancelAt on. Only the task's goroutines use it.
type simCtx struct {
	t           *task
	deadline    time.Time
	hasDeadline bool
	done        chan struct{}
	closed      bool
}

type taskKey struct{}

func (c *simCtx) Deadline() (time.Time, bool) { return c.deadline, c.hasDeadline }

// Done returns a channel closed once Err has observed the end (the
// scheduler, not a timer, decides when that is).
func (c *simCtx) Done() <-chan struct{} { return c.done }

func (c *simCtx) Err() error {
	t := c.t
	if t.cancelAt < 0 || t.s.now < t.cancelAt {
		return nil
	}
	if !c.closed {
		c.closed = true
		close(c.done)
	}
	return t.cancelErr
}

func (c *simCtx) Value(key any) any {
	if key == (taskKey{}) {
		return c.t
	}
	return nil
}

// taskOf returns the task whose context ctx is or derives from.
func taskOf(ctx context.Context) *task {
	t, ok := ctx.Value(taskKey{}).(*task)
	if !ok {
		panic("sim: a call outside a simulated delivery")
	}
	return t
}

// simDone reports ctx's error if ctx is the task's own context, or a
// context that only adds values to it, and it is done. Contexts the runner
// derives from it with their own cancellation are done when the simulation
// says so (see call.ctxErr), never by a timer.
func (t *task) simDone(ctx context.Context) error {
	if ctx.Done() != (<-chan struct{})(t.ctx.done) {
		return nil
	}
	return t.ctx.Err()
}
