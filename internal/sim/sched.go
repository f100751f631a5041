package sim

import (
	"container/heap"
	"context"
	"time"
)

// epoch is simulated time zero. Simulated instants are durations since it.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// wakeKind is how a blocked task is resumed.
type wakeKind uint8

const (
	wakeRun   wakeKind = iota // go on
	wakeCrash                 // the process dies here
	wakeKill                  // the deadline passed: the platform kills the process
	wakeHalt                  // the run stopped: unwind without further checks
)

// event is one entry of the queue: a task to resume, or a function to run on
// the scheduler's goroutine.
type event struct {
	at   time.Duration // simulated time
	tie  uint64        // random order among events of the same time
	seq  uint64        // insertion order, for a total order
	task *task
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
// Exactly one goroutine runs at a time: the scheduler hands control to a
// task and waits until the task yields or ends.
func (s *simulation) loop() {
	for len(s.q) > 0 {
		ev := heap.Pop(&s.q).(event)
		s.now = ev.at
		s.steps++
		s.mix(uint64(ev.at), ev.seq)
		if ev.fn != nil {
			ev.fn()
		} else {
			s.mix(uint64(ev.task.id), uint64(ev.kind))
			ev.task.wake <- ev.kind
			<-s.back
		}
		if s.halted() {
			s.drain()
			return
		}
	}
}

// drain unwinds every blocked task after the run stopped.
func (s *simulation) drain() {
	for len(s.q) > 0 {
		ev := heap.Pop(&s.q).(event)
		if ev.task != nil {
			ev.task.wake <- wakeHalt
			<-s.back
		}
	}
}

// task is one Runner.Do call running in its own goroutine under the
// scheduler.
type task struct {
	s    *simulation
	id   int64
	d    *delivery
	sb   *sandbox
	ctx  *simCtx
	wake chan wakeKind

	killAt    time.Duration // when the platform kills it; -1: never
	cancelAt  time.Duration // when its context is done; -1: never
	cancelErr error         // the context's error from cancelAt on

	try     *try     // the running handler try, if any
	lastTry tryClass // outcome of its last finished try
	ended   wakeKind // how it was unwound, if it was
	success []byte   // result of a success the store accepted for it
}

// yield blocks the task until now+d. A crash may be drawn for this point, at
// a random instant of the wait; a kill replaces the wake-up if the deadline
// comes first. A crashed or killed task unwinds with a panic of errCrash.
func (t *task) yield(d time.Duration) {
	s := t.s
	at, kind := s.now+d, wakeRun
	if s.chance(s.cfg.Faults.Crash) {
		at, kind = s.now+time.Duration(s.rng.Float64()*float64(d)), wakeCrash
	}
	t.block(at, kind)
}

// block blocks the task until at (or its kill, if earlier).
func (t *task) block(at time.Duration, kind wakeKind) {
	s := t.s
	if t.killAt >= 0 && at > t.killAt {
		at, kind = t.killAt, wakeKill
	}
	s.push(event{at: at, task: t, kind: kind})
	s.back <- struct{}{}
	if k := <-t.wake; k != wakeRun {
		t.ended = k
		panic(errCrash)
	}
}

// simCtx is a delivery's context: its deadline is in simulated time and it
// is done from the task's cancelAt on. Only the task's goroutine uses it.
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
		panic("sim: a store or sleep call outside a simulated delivery")
	}
	return t
}

// simDone reports ctx's error if ctx is the task's own context and it is
// done. Contexts the runner derives from it (WithoutCancel, then a timeout on
// the wall clock) are never done in simulated time.
func (t *task) simDone(ctx context.Context) error {
	if ctx != context.Context(t.ctx) {
		return nil
	}
	return t.ctx.Err()
}
