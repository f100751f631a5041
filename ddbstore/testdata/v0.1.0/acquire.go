package idem

import (
	"context"
	"time"

	"github.com/idemgo/idem/core"
)

// Acquirer is an optional capability of a Store: reserving a key in one
// conditional write whatever the stored record is, without a decision made
// first. A retry of a retryable failure and a takeover of an expired lease
// then cost one write, like a first run, where Reserve needs a refused
// write (which returns the blocking record), a core.Decide and a second
// write conditioned on that record. The runner uses it when the store
// implements it, and Reserve otherwise.
//
// Acquire atomically writes rec, an in-progress record as core.Reserve
// makes it without prev, with the attempt number core.Acquire gives over
// the stored record, if and only if core.Acquirable holds for the stored
// record, rec.Fingerprint, now and p: the key is absent or its record
// Expired at now, or the record has rec.Fingerprint and fewer than p's
// attempts and is in progress with a lease that ended by now or a
// retryable failure. It returns the record written (its Attempts counted by
// the store) and prev, the live record it replaced (nil when the key was
// absent or its record expired). Otherwise it writes nothing and returns a
// *ConflictError holding the live record that blocked it, from which
// core.Decide answers the call (a replay, in progress, key reused, retries
// exhausted), unless that record is rec itself (core.Acquired: a retried
// write whose answer was lost), which is returned with a nil prev and a nil
// error. Errors are as for Store. Implementations are safe for concurrent
// use; of concurrent Acquires of one key, at most one writes.
type Acquirer interface {
	// Acquire reserves rec.Key in one write if core.Acquirable allows it.
	Acquire(ctx context.Context, rec core.Record, now time.Time, p core.Policy) (acquired core.Record, prev *core.Record, err error)
}

// claim writes the call's reservation. With an Acquirer it is one write
// that replaces whatever core.Acquirable allows, whatever was decided
// before (prev is not needed); otherwise it is Reserve over prev, the
// record the last decision was made on (nil the first time).
func (c *call) claim(prev *core.Record, now time.Time, p core.Policy) (core.Record, error) {
	cfg := &c.r.cfg
	a, ok := c.r.store.(Acquirer)
	if !ok {
		rec := core.Reserve(c.key, c.fp, cfg.token(), prev, now, c.w.leaseUntil, cfg.retention)
		return rec, c.storeReserve(c.ctx, rec, prev, now)
	}
	rec := core.Reserve(c.key, c.fp, cfg.token(), nil, now, c.w.leaseUntil, cfg.retention)
	rec, replaced, err := c.storeAcquire(a, rec, now, p)
	if err == nil && replaced != nil {
		c.tookOver = core.Decide(c.key, replaced, c.fp, now, p).Takeover
	}
	return rec, err
}

// storeAcquire is the call's one-write reservation, timed.
func (c *call) storeAcquire(a Acquirer, rec core.Record, now time.Time, p core.Policy) (core.Record, *core.Record, error) {
	t := c.r.cfg.now()
	got, prev, err := a.Acquire(c.ctx, rec, now, p)
	c.storeCalls, c.storeTime = c.storeCalls+1, c.storeTime+c.r.cfg.now().Sub(t)
	return got, prev, err
}
