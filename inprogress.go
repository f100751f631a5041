package idem

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/idemgo/idem/core"
)

// Defaults of the runner's memory of keys in progress
// (WithInProgressMemory).
const (
	// DefaultInProgressMemory is how many keys a runner remembers in
	// progress.
	DefaultInProgressMemory = 1024
	// DefaultInProgressRecheck is how long a runner answers "in progress"
	// for a key the store said was in progress, before it asks the store
	// again (never past the lease end the store gave).
	DefaultInProgressRecheck = time.Second
)

// WithInProgressMemory sets how many keys the runner remembers in progress
// (default DefaultInProgressMemory; 0 turns the memory off; not negative).
//
// A call that finds its key in progress (its reservation refused by a live
// lease) costs a store write, charged on DynamoDB even though its condition
// fails; 10,000 deliveries of one key within its lease (a redrive, a client
// retrying hard) would be 10,000 such writes on one partition. So the runner
// remembers, for the keys it last saw in progress, the record the store
// returned, and answers the next calls of such a key with the payload's
// fingerprint, without a store call, as the store would: *core.InProgressError
// whose RetryAt is the lease end the store gave, Outcome.Cached set. It
// answers so until the lease end, but for at most the recheck interval
// (WithInProgressRecheck, default DefaultInProgressRecheck) after the store
// last said so: then one call asks the store again, and the others go on
// being answered from memory meanwhile. So a runner makes at most about one
// store call per key in progress per recheck interval, and answers "in
// progress" for at most that long after the holder, in another process,
// recorded its outcome. A key whose execution runs in this runner is
// remembered until its call ends, with no recheck.
//
// The memory only ever answers "in progress", which makes no call execute
// or replay: a replay always comes from the store or from the cache
// (WithCache), and a takeover happens once the lease has ended, as without
// the memory. A call with another fingerprint is not answered from memory:
// the store rejects it as key reused. A call with a wait (WithWait,
// ContextWithWait) is not answered from memory either: it reads the store
// within its bound, as it would without the memory. When the store fails
// transiently (throttling) on a recheck, the call gets the store's error
// and the next recheck of that key backs off: twice the recheck interval,
// then four times, and so on, with jitter, never past the lease end, until
// the store answers again. The least recently used keys are forgotten
// first.
//
// Turn it off (WithInProgressMemory(0)) when duplicates must see an
// outcome the moment another process records it, and a store call per
// duplicate is the price.
func WithInProgressMemory(size int) Option {
	return func(c *config) error {
		if size < 0 {
			return fmt.Errorf("idem: in-progress memory size %d must not be negative", size)
		}
		c.progressSize = size
		return nil
	}
}

// WithInProgressRecheck sets how long the runner answers "in progress" from
// its memory (WithInProgressMemory) for a key the store said was in progress
// before it asks the store again (positive; default
// DefaultInProgressRecheck). The answers never go past the lease end the
// store gave: a recheck of a lease's length or more answers until the lease
// end, one store call per key and lease. It does not turn the memory on.
func WithInProgressRecheck(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("idem: in-progress recheck %v must be positive", d)
		}
		c.progressRecheck = d
		return nil
	}
}

// progressMemory is a runner's bounded memory of keys in progress. Its zero
// value (and nil) is a memory that is off. Safe for concurrent use (mu
// guards lru and every entry).
type progressMemory struct {
	mu      sync.Mutex
	lru     *simplelru.LRU[string, *remembered]
	recheck time.Duration
}

// remembered is what the runner knows of a key in progress.
type remembered struct {
	// rec is the in-progress record, without its result and steps.
	rec core.Record
	// until is when answers from memory end and the store is asked again;
	// for a key held by this runner (own), the lease end.
	until time.Time
	// own reports that a call of this runner holds the key (rec is its
	// reservation).
	own bool
	// failures counts the rechecks in a row that failed transiently.
	failures int
}

func newProgressMemory(size int, recheck time.Duration) *progressMemory {
	if size <= 0 {
		return nil
	}
	l, err := simplelru.NewLRU[string, *remembered](size, nil)
	if err != nil { // only for size <= 0, excluded above
		return nil
	}
	return &progressMemory{lru: l, recheck: recheck}
}

// answer answers a call of key with fingerprint fp at now from memory: ok
// reports that it did, with *core.InProgressError. A remembered record
// whose lease ended is forgotten, unless this runner holds it. When a
// recheck is due, the caller is sent to the store (ok false) and the other
// calls keep being answered until the next recheck.
func (m *progressMemory) answer(key, fp string, now time.Time, p core.Policy) (out Outcome, ok bool, err error) {
	if m == nil {
		return Outcome{}, false, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.lru.Get(key)
	if !ok {
		return Outcome{}, false, nil
	}
	d := core.Decide(key, &e.rec, fp, now, p)
	switch {
	case d.Action == core.InProgress && (e.own || now.Before(e.until)):
		return Outcome{Attempts: e.rec.Attempts, Cached: true}, true, d.Err
	case d.Action == core.InProgress:
		e.until = now.Add(m.recheck) // this call rechecks; the others wait for it
	case !e.own && (e.rec.LeaseExpired(now) || e.rec.Expired(now)):
		m.lru.Remove(key) // an own lease may have been renewed: the call's end forgets it
	}
	return Outcome{}, false, nil
}

// observe records what the store said of key at now: rec, the live record
// that refused the call. An in-progress record with a live lease is
// remembered until the next recheck (or, held by this runner, until its
// lease end); any other answer forgets the key.
func (m *progressMemory) observe(key string, rec core.Record, now time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec.Key != key || rec.Status != core.StatusInProgress || rec.LeaseExpired(now) || rec.Expired(now) {
		m.lru.Remove(key)
		return
	}
	rec.Result, rec.Steps = nil, nil
	if e, ok := m.lru.Peek(key); ok && e.own && e.rec.LeaseToken == rec.LeaseToken {
		e.rec, e.until, e.failures = rec, rec.LeaseUntil, 0 // this runner's own lease, renewed
		return
	}
	m.lru.Add(key, &remembered{rec: rec, until: minTime(rec.LeaseUntil, now.Add(m.recheck))})
}

// failed records that a call of key found no answer at now: the store
// failed transiently. If the key is remembered in progress, its next
// recheck backs off: the recheck interval times 2^failures, jittered over
// its upper half by a draw of r, never past the lease end.
func (m *progressMemory) failed(key string, now time.Time, r func() float64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.lru.Peek(key)
	if !ok || e.own || e.rec.LeaseExpired(now) {
		return
	}
	e.failures++
	e.until = now.Add(core.Backoff(e.failures+1, m.recheck, e.rec.LeaseUntil.Sub(now), (1+r())/2))
}

// hold remembers rec, the reservation a call of this runner holds, until
// its lease end or release.
func (m *progressMemory) hold(rec core.Record) {
	if m == nil {
		return
	}
	rec.Result, rec.Steps = nil, nil
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lru.Add(rec.Key, &remembered{rec: rec, until: rec.LeaseUntil, own: true})
}

// release forgets key if this runner's call with lease token holds it.
func (m *progressMemory) release(key, token string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.lru.Peek(key); ok && e.own && e.rec.LeaseToken == token {
		m.lru.Remove(key)
	}
}
