package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemgo/idem/core"
)

// minPoll is the shortest time between two reads of a wait, whatever the
// backoff says (a zero base, a jitter draw of 0).
const minPoll = 10 * time.Millisecond

// WithWait makes a call that finds its key in progress wait up to bound for
// that execution to finish, and answer with its outcome (a replay, with
// Outcome.Waited set) instead of an immediate *core.InProgressError. 0, the
// default, turns waiting off; a negative bound is an error. A per-call bound
// (ContextWithWait) overrides it.
//
// A waiting call reads the key's record (Store.Get, one strongly consistent
// read each) with backoff: WithRetry's base and max with jitter over the
// upper half (or WithBackoff's policy), at least every 10 ms, and never past
// the blocking lease's end. On each read it decides again as Do does: a
// success or a permanent failure is replayed; a lease that ended without an
// outcome (its holder crashed) is taken over and the handler runs in this
// call. The wait ends at bound after the call started, or earlier when
// only the retry reserve (WithRetryReserve) is left before the context's
// deadline (without one, before the lease this call would take ends, less
// the lease margin); then the answer is the *core.InProgressError it would
// have had at once.
//
// Within one Runner, calls with a wait for one key and one payload
// fingerprint coalesce: the first makes the store calls and the others wait
// for its outcome in memory, with no store call of their own (as
// golang.org/x/sync/singleflight does). They get a copy of it if it is a
// recorded success or permanent failure, as a replay. Any other outcome of
// the first call (a transient failure, an outcome not recorded, a store
// error, key reused, in progress) is not theirs to copy: each then makes
// its own store calls, waiting up to its own bound. A call with another
// fingerprint is never coalesced: the store's record rejects it as key
// reused.
func WithWait(bound time.Duration) Option {
	return func(c *config) error {
		if bound < 0 {
			return fmt.Errorf("idem: wait bound %v must not be negative", bound)
		}
		c.wait = bound
		return nil
	}
}

// waitKey is the context key of ContextWithWait's bound.
type waitKey struct{}

// waitValue is ContextWithWait's value; set is false for the marker that
// hides a bound from the handler's context.
type waitValue struct {
	bound time.Duration
	set   bool
}

// ContextWithWait returns a copy of ctx with which calls of Runner.Do wait
// up to bound for a concurrent execution of their key (see WithWait),
// whatever the runner's own WithWait says: 0 (or a negative bound) turns
// waiting off for them. The wrappers use it for their WithWait options. The
// bound applies to the call made with ctx only: the handler's context does
// not carry it on to the calls the handler makes.
func ContextWithWait(ctx context.Context, bound time.Duration) context.Context {
	return context.WithValue(ctx, waitKey{}, waitValue{bound: max(bound, 0), set: true})
}

// waitBound is the call's wait bound: its context's, or the runner's. A
// bound from the context is hidden from the handler's context.
func (c *call) waitBound() time.Duration {
	v, _ := c.ctx.Value(waitKey{}).(waitValue)
	if !v.set {
		return c.r.cfg.wait
	}
	c.ctx = context.WithValue(c.ctx, waitKey{}, waitValue{})
	return v.bound
}

// join runs the call, waiting for a concurrent execution of its key if the
// call has a wait: as a follower of the runner's call in flight for the key
// and fingerprint, or as the leader its followers wait for, or (another
// fingerprint in flight) on its own.
func (c *call) join(now time.Time, fn Handler) (Outcome, error) {
	if bound := c.waitBound(); bound > 0 {
		c.waitUntil = now.Add(bound)
		if limit := c.w.limit.Add(-c.r.cfg.retryReserve); limit.Before(c.waitUntil) {
			c.waitUntil = limit
		}
	}
	if !c.waitUntil.After(now) {
		c.waitUntil = time.Time{}
		return c.reserve(now, fn)
	}
	f, leader := c.r.flights.join(c.key, c.fp, c.w.leaseUntil)
	var out Outcome
	var err error
	switch {
	case f == nil:
		out, err = c.reserve(now, fn)
	case leader:
		out, err = c.lead(f, now, fn)
	default:
		var ok bool
		if out, err, ok = c.follow(f); !ok {
			out, err = c.reserve(c.r.cfg.now(), fn)
		}
	}
	out.Waited = out.Waited || c.waited
	return out, err
}

// lead runs the call as the leader of flight f, and gives its outcome to
// f's followers when it ends, panics included (they then make their own
// store calls).
func (c *call) lead(f *flight, now time.Time, fn Handler) (Outcome, error) {
	var s *shared
	defer func() { c.r.flights.finish(c.key, f, s) }()
	out, err := c.reserve(now, fn)
	s = share(out, err)
	return out, err
}

// follow waits, until the call's wait ends, for the leader of f: ok is
// false when its outcome is not one to copy.
func (c *call) follow(f *flight) (Outcome, error, bool) {
	c.waited = true
	cfg := &c.r.cfg
	for {
		select {
		case <-f.ctx.Done():
			if f.result == nil {
				return Outcome{}, nil, false
			}
			out, err := f.result.copy()
			return out, err, true
		default:
		}
		left := c.waitUntil.Sub(cfg.now())
		if left <= 0 || c.ctx.Err() != nil {
			return Outcome{Waited: true}, &core.InProgressError{RetryAt: f.leaseUntil}, true
		}
		wctx, cancel := context.WithCancel(c.ctx)
		stop := context.AfterFunc(f.ctx, cancel)
		_ = cfg.sleep(wctx, left) // ends early when the leader finishes
		stop()
		cancel()
	}
}

// await polls the key's record while d, the decision on existing, is
// InProgress and the call's wait allows, deciding again on each read. It
// returns the last record read, the decision on it and the time of the
// read. A read that fails, other than transiently, ends the wait.
func (c *call) await(existing core.Record, d core.Decision, now time.Time) (core.Record, core.Decision, time.Time) {
	cfg := &c.r.cfg
	policy := core.Policy{MaxAttempts: cfg.maxAttempts}
	for poll := 1; d.Action == core.InProgress; poll++ {
		delay, ok := c.pollDelay(poll, d.RetryAt, now)
		if !ok {
			break
		}
		c.waited = true
		if cfg.sleep(c.ctx, delay) != nil {
			break
		}
		now = cfg.now()
		rec, err := c.storeGet(now)
		switch {
		case errors.Is(err, ErrNotFound):
			existing, d = core.Record{}, core.Decide(c.key, nil, c.fp, now, policy)
		case err == nil:
			existing, d = rec, core.Decide(c.key, &rec, c.fp, now, policy)
		case core.Classify(err, c.r.storeChain...) != core.Transient:
			return existing, d, now
		}
	}
	return existing, d, now
}

// pollDelay is the time before the next read of a wait, and true if one is
// left: the backoff (at least minPoll), but no later than the blocking
// lease's end (retryAt) nor the end of the wait.
func (c *call) pollDelay(poll int, retryAt, now time.Time) (time.Duration, bool) {
	left := c.waitUntil.Sub(now)
	if c.waitUntil.IsZero() || left <= 0 {
		return 0, false
	}
	cfg := &c.r.cfg
	var d time.Duration
	if cfg.backoff != nil {
		d = cfg.backoff(poll, cfg.rand())
	} else {
		// Jitter over the upper half: polls spread out without bunching
		// at the start.
		d = core.Backoff(poll, cfg.base, cfg.max, (1+cfg.rand())/2)
	}
	d = max(d, minPoll)
	if until := retryAt.Sub(now); !retryAt.IsZero() && until > 0 && until < d {
		d = until
	}
	return min(d, left), true
}

// storeGet is the call's read of its key, timed and counted with its
// writes.
func (c *call) storeGet(now time.Time) (core.Record, error) {
	t := c.r.cfg.now()
	rec, err := c.r.store.Get(c.ctx, c.key, now)
	c.storeCalls, c.storeTime = c.storeCalls+1, c.storeTime+c.r.cfg.now().Sub(t)
	return rec, err
}

// flights are a runner's calls in flight with a wait, by key. The zero
// value is ready; safe for concurrent use (mu guards m).
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

// flight is one leading call. Its fields other than ctx are written before
// it is shared (fp, leaseUntil) or before ctx is done (result) and read
// after: ctx's Done orders them.
type flight struct {
	fp         string
	leaseUntil time.Time // the leader's lease end: the followers' retry hint
	ctx        context.Context
	done       context.CancelFunc
	result     *shared // nil: followers make their own calls
}

// join returns the flight of key and whether the caller leads it (a new
// one), or nil if a flight of another fingerprint holds the key.
func (g *flights) join(key, fp string, leaseUntil time.Time) (*flight, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f, ok := g.m[key]; ok {
		if f.fp != fp {
			return nil, false
		}
		return f, false
	}
	if g.m == nil {
		g.m = map[string]*flight{}
	}
	f := &flight{fp: fp, leaseUntil: leaseUntil}
	f.ctx, f.done = context.WithCancel(context.Background())
	g.m[key] = f
	return f, true
}

// finish ends flight f of key with result s, releasing its followers.
func (g *flights) finish(key string, f *flight, s *shared) {
	g.mu.Lock()
	if g.m[key] == f {
		delete(g.m, key)
	}
	g.mu.Unlock()
	f.result = s
	f.done()
}

// shared is a leader's outcome that its followers may copy: a recorded
// success (result) or permanent failure (failure).
type shared struct {
	result   []byte
	omitted  bool
	attempts int
	failure  *core.FailureError
}

// share is the part of a leader's outcome its followers may copy, or nil.
func share(out Outcome, err error) *shared {
	var fe *core.FailureError
	switch {
	case err == nil && (out.Verdict == Executed || out.Verdict == Replayed):
		s := &shared{omitted: out.ResultOmitted, attempts: out.Attempts}
		if !out.ResultOmitted {
			s.result = bytes.Clone(out.Result)
		}
		return s
	case errors.Is(err, ErrOutcomeNotRecorded) || errors.Is(err, ErrLeaseLost):
		return nil
	case (VerdictOf(err) == FailedPermanently || VerdictOf(err) == ReplayedFailure) && errors.As(err, &fe):
		return &shared{attempts: fe.Attempts, failure: &core.FailureError{Message: fe.Message, Attempts: fe.Attempts, Replayed: true}}
	}
	return nil
}

// copy is a follower's answer: a replay of the leader's outcome, with its
// own copies of the result and the error.
func (s *shared) copy() (Outcome, error) {
	out := Outcome{Verdict: Replayed, Replayed: true, Attempts: s.attempts, ResultOmitted: s.omitted, Waited: true}
	if s.failure != nil {
		f := *s.failure
		return out, &f
	}
	out.Result = bytes.Clone(s.result)
	return out, nil
}
