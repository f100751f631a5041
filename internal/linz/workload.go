package linz

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
)

// Workload is the shape of a run of concurrent clients on one target.
type Workload struct {
	// Clients is the number of random clients: each makes deliveries as a
	// runner would (read or acquire, decide with core.Decide, reserve,
	// record steps, renew, complete or crash), and also what a runner never
	// does: decisions on a stale read, completions after the lease ended,
	// releases of records read earlier, callers whose clocks lag.
	Clients int
	// Runners is the number of clients that are idem.Runners, whose
	// handlers record steps, stage writes, fail and run past their lease.
	Runners int
	// Ops is the number of store calls each client makes (it finishes the
	// delivery under way).
	Ops int
	// Prefix starts every key of the run: a run of its own on a shared
	// store or table.
	Prefix string
	// Keys is the number of keys the clients share at a time. Every
	// KeyLife of the fake clock, they move on to Keys new ones, so that a
	// run has many independent keys, each with a short history.
	Keys    int
	KeyLife time.Duration
	// Seed seeds every random draw of the clients.
	Seed uint64
	// Start is the time the clients' fake clock starts at (whole
	// milliseconds). The clock advances by whole milliseconds.
	Start time.Time
	// FirstClient is the number of the first client, so that the clients
	// of several processes are numbered apart; it also makes their lease
	// tokens unique.
	FirstClient int
}

// Leases and retentions the clients draw from: short enough that leases
// end and records expire within a run, long enough that most deliveries
// finish under their lease.
var (
	leases     = []time.Duration{15 * time.Millisecond, 60 * time.Millisecond, 250 * time.Millisecond}
	retentions = []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 500 * time.Millisecond}
)

// Run runs w's clients on t until each has made its calls, recording them
// in h.
func (w Workload) Run(ctx context.Context, t *Target, h *History) {
	clock := fakeclock.New(w.Start)
	fps := [2]string{fingerprint(`{"order":1}`), fingerprint(`{"order":2}`)}
	var wg sync.WaitGroup
	for i := range w.Clients + w.Runners {
		c := &client{id: w.FirstClient + i, w: &w, t: t, h: h, clock: clock, fps: fps,
			rng: rand.New(rand.NewPCG(w.Seed, uint64(w.FirstClient+i)))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i < w.Clients {
				c.run(ctx)
			} else {
				c.runRunner(ctx)
			}
		}()
	}
	wg.Wait()
}

func fingerprint(payload string) string {
	fp, err := core.Fingerprint([]byte(payload))
	if err != nil {
		panic(err)
	}
	return fp
}

// client is one client of a workload. Its fields other than those shared
// (clock, h, t) are its own goroutine's.
type client struct {
	id    int
	w     *Workload
	t     *Target
	h     *History
	clock *fakeclock.Clock
	fps   [2]string
	rng   *rand.Rand
	n     int          // calls made
	seq   int          // tokens made
	stale *core.Record // a record read earlier
}

func (c *client) run(ctx context.Context) {
	for c.n < c.w.Ops && ctx.Err() == nil {
		c.delivery(ctx)
	}
}

func (c *client) do(ctx context.Context, op Op) Result {
	c.n++
	res, _ := c.h.Do(ctx, c.t, c.id, op, nil)
	return res
}

// write makes op, and again (a retried write) up to twice while its answer
// is unknown and a coin says so.
func (c *client) write(ctx context.Context, op Op) Result {
	res := c.do(ctx, op)
	for i := 0; i < 2 && res.Verdict == Unknown && c.rng.IntN(2) == 0; i++ {
		res = c.do(ctx, op)
	}
	return res
}

// now advances the shared clock by 0–5 ms and reads it; one caller in
// eight lags it by up to 40 ms.
func (c *client) now() time.Time {
	c.clock.Advance(time.Duration(c.rng.IntN(6)) * time.Millisecond)
	now := c.clock.Now()
	if c.rng.IntN(8) == 0 {
		now = now.Add(-time.Duration(c.rng.IntN(41)) * time.Millisecond)
	}
	return now
}

// key returns one of the keys of the moment.
func (c *client) key() string {
	gen := int(c.clock.Now().Sub(c.w.Start) / c.w.KeyLife)
	return fmt.Sprintf("%s:key-%d", c.w.Prefix, gen*c.w.Keys+c.rng.IntN(c.w.Keys))
}

func (c *client) token() string {
	c.seq++
	return fmt.Sprintf("c%d-%d", c.id, c.seq)
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func (c *client) policy() core.Policy { return core.Policy{MaxAttempts: 1 + c.rng.IntN(3)} }

// newReservation returns the in-progress record of a new execution of key
// over prev (nil: none).
func (c *client) newReservation(key, fp string, prev *core.Record, now time.Time) core.Record {
	return core.Reserve(key, fp, c.token(), prev, now, now.Add(pick(c.rng, leases)), pick(c.rng, retentions))
}

// delivery is one delivery of a random key: reserve it, work, finish.
func (c *client) delivery(ctx context.Context) {
	key := c.key()
	fp := c.fps[0]
	if c.rng.IntN(10) == 0 {
		fp = c.fps[1]
	}
	var rec core.Record
	var ok bool
	if c.t.Can(Acquire) && c.rng.IntN(2) == 0 {
		rec, ok = c.acquire(ctx, key, fp)
	} else {
		rec, ok = c.reserve(ctx, key, fp)
	}
	if ok {
		c.work(ctx, rec)
	}
}

func (c *client) acquire(ctx context.Context, key, fp string) (core.Record, bool) {
	now := c.now()
	rec := c.newReservation(key, fp, nil, now)
	res := c.write(ctx, Op{Kind: Acquire, Key: key, Rec: rec, Now: now, Policy: c.policy()})
	switch res.Verdict {
	case OK:
		return *res.Rec, true
	case Conflict:
		c.blocked(ctx, res.Rec)
	}
	return core.Record{}, false
}

// reserve reads key, decides with core.Decide (now and then on a stale
// read), and reserves it if the decision is to execute.
func (c *client) reserve(ctx context.Context, key, fp string) (core.Record, bool) {
	now := c.now()
	var stored *core.Record
	switch res := c.do(ctx, Op{Kind: Get, Key: key, Now: now}); res.Verdict {
	case OK:
		stored = res.Rec
	case NotFound:
	default:
		return core.Record{}, false
	}
	if c.stale != nil && c.stale.Key == key && c.rng.IntN(6) == 0 {
		stored = c.stale
	}
	p := c.policy()
	d := core.Decide(key, stored, fp, now, p)
	if d.Action != core.Execute {
		if stored != nil {
			c.blocked(ctx, stored)
		}
		return core.Record{}, false
	}
	rec := c.newReservation(key, fp, d.Prev, now)
	switch res := c.write(ctx, Op{Kind: Reserve, Key: key, Rec: rec, Prev: d.Prev, Now: now}); res.Verdict {
	case OK:
		return rec, true
	case Unknown:
		return rec, c.rng.IntN(2) == 0 // carry on as if it held the key, or give up
	case Conflict:
		c.blocked(ctx, res.Rec)
	}
	return core.Record{}, false
}

// blocked is what a client does with a record that blocked it: keep it
// (a stale read for a later decision), and now and then release it (an
// operator's release, fenced by the record read).
func (c *client) blocked(ctx context.Context, rec *core.Record) {
	if c.rng.IntN(8) == 0 && c.t.Can(Release) {
		target := rec
		if c.stale != nil && c.rng.IntN(3) == 0 {
			target = c.stale
		}
		c.write(ctx, Op{Kind: Release, Key: target.Key, Rec: *target})
	}
	c.stale = rec
}

// work is the handler's part of a delivery that holds rec: steps,
// renewals, reads and time passing, then an outcome or a crash.
func (c *client) work(ctx context.Context, rec core.Record) {
	for i := c.rng.IntN(5); i > 0; i-- {
		switch c.rng.IntN(4) {
		case 0:
			if c.t.Can(RecordStep) {
				step := core.Step{Name: pick(c.rng, []string{"charge", "mail", "ship"}), Result: []byte(pick(c.rng, []string{"1", "2"}))}
				c.write(ctx, Op{Kind: RecordStep, Key: rec.Key, Token: rec.LeaseToken, Step: step, Now: c.now()})
			}
		case 1:
			if c.t.Can(RenewLease) {
				now := c.now()
				res := c.write(ctx, Op{Kind: RenewLease, Key: rec.Key, Rec: rec, Until: now.Add(pick(c.rng, leases)), Now: now})
				if res.Verdict == OK {
					rec = *res.Rec
				}
			}
		case 2:
			// A slow handler: the fake clock moves on, and the other
			// clients get a moment to interleave their calls.
			c.clock.Advance(time.Duration(c.rng.IntN(80)) * time.Millisecond)
			time.Sleep(time.Duration(c.rng.IntN(300)) * time.Microsecond)
		case 3:
			c.do(ctx, Op{Kind: Get, Key: rec.Key, Now: c.now()})
		}
	}
	c.finish(ctx, rec)
}

// finish writes the outcome of rec's execution, or crashes.
func (c *client) finish(ctx context.Context, rec core.Record) {
	now := c.now()
	ret := pick(c.rng, retentions)
	kind := Complete
	var out core.Record
	switch c.rng.IntN(10) {
	case 0:
		return // a crash: the lease ends without an outcome
	case 1, 2:
		out = core.Fail(rec, errors.New("linz: flaky"), true, now, ret)
	case 3:
		out = core.Fail(rec, errors.New("linz: broken"), false, now, ret)
	case 4, 5:
		if c.t.Can(CompleteStaged) {
			kind = CompleteStaged
		}
		fallthrough
	default:
		out = core.Succeed(rec, []byte(fmt.Sprintf(`{"by":%q}`, rec.LeaseToken)), now, ret)
	}
	c.write(ctx, Op{Kind: kind, Key: rec.Key, Rec: out})
	if kind == CompleteStaged && c.rng.IntN(2) == 0 {
		c.do(ctx, Op{Kind: Effects, Key: rec.Key})
	}
}

// runRunner is a client that is an idem.Runner over the target (through a
// proxy that records its calls): it delivers random keys to a handler that
// records steps, stages a write, takes time (now and then past its lease)
// and succeeds or fails.
func (c *client) runRunner(ctx context.Context) {
	p := &proxy{t: c.t, h: c.h, client: c.id, calls: func() { c.n++ }}
	r, err := idem.New(p, idem.WithClock(c.clock.Now), idem.WithSleep(c.clock.Sleep),
		idem.WithRand(c.rng.Float64), idem.WithTokens(c.token), idem.WithLease(0, pick(c.rng, leases)),
		idem.WithRetention(pick(c.rng, retentions)), idem.WithMaxAttempts(3),
		idem.WithRetry(2, time.Millisecond, 5*time.Millisecond))
	if err != nil {
		panic(err) // the options are constants
	}
	for c.n < c.w.Ops && ctx.Err() == nil {
		key := c.key()
		payload := `{"order":1}`
		if c.rng.IntN(10) == 0 {
			payload = `{"order":2}`
		}
		_, _ = r.Do(ctx, key, []byte(payload), c.handler(key))
		c.clock.Advance(time.Duration(c.rng.IntN(20)) * time.Millisecond) // the next delivery
	}
}

// handler is the runner client's handler for key.
func (c *client) handler(key string) idem.Handler {
	return func(ctx context.Context) ([]byte, error) {
		for _, name := range []string{"charge", "mail"} {
			if c.rng.IntN(2) == 0 {
				continue
			}
			if _, err := idem.Step(ctx, name, func(context.Context) ([]byte, error) { return []byte(name), nil }); err != nil {
				return nil, err
			}
		}
		if c.t.Can(CompleteStaged) && c.rng.IntN(2) == 0 {
			if err := idem.Stage(ctx, c.t.Stage(key)); err != nil {
				return nil, err
			}
		}
		c.clock.Advance(time.Duration(c.rng.IntN(40)) * time.Millisecond)
		switch c.rng.IntN(8) {
		case 0:
			return nil, core.MarkTransient(errors.New("linz: flaky"))
		case 1:
			return nil, errors.New("linz: broken")
		}
		return []byte(`{"ok":true}`), nil
	}
}
