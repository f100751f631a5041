package idem

import (
	"bytes"
	"fmt"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/idemgo/idem/core"
)

// DefaultCacheTTL is how long the runner's cache (WithCache) replays an
// outcome without reading the store: an outcome released from the store
// (Releaser, the CLI's release) or deleted is still replayed by a runner
// that cached it, for at most this long after it was cached.
const DefaultCacheTTL = time.Minute

// WithCache turns on a per-process cache of up to size succeeded outcomes
// (off by default). A duplicate that hits it is answered without calling the
// store, and the fingerprint is checked exactly as on a store read, so a key
// reused with another payload is still rejected. The cache only holds
// succeeded records, which no call changes until they expire, but an
// operator may release one (Releaser, the CLI's release) or delete it: a
// runner that cached it then still replays it, without reading the store,
// until the entry ends. An entry ends DefaultCacheTTL after it was cached
// (WithCacheTTL sets another bound), by the runner's clock, or when the
// record's retention ends, whichever comes first.
func WithCache(size int) Option {
	return func(c *config) error {
		if size < 1 {
			return fmt.Errorf("idem: cache size %d must be at least 1", size)
		}
		c.cacheSize = size
		return nil
	}
}

// WithCacheTTL sets how long an outcome cached by WithCache is replayed
// without reading the store (positive; default DefaultCacheTTL): the
// longest time a process may replay an outcome released from the store.
// It does not turn the cache on.
func WithCacheTTL(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("idem: cache TTL %v must be positive", d)
		}
		c.cacheTTL = d
		return nil
	}
}

// resultCache is a bounded LRU of succeeded records, each kept until its
// entry's end. Its zero value is a disabled cache. Safe for concurrent use
// (the LRU locks internally).
type resultCache struct {
	lru *lru.Cache[string, cached]
	ttl time.Duration
}

// cached is a cache entry: a succeeded record, replayed until until.
type cached struct {
	rec   core.Record
	until time.Time
}

func newResultCache(size int, ttl time.Duration) resultCache {
	c, err := lru.New[string, cached](size)
	if err != nil { // only for size <= 0, excluded by WithCache
		return resultCache{}
	}
	return resultCache{lru: c, ttl: ttl}
}

// add caches rec, a record read or written at now, if it is a success.
func (c resultCache) add(rec core.Record, now time.Time) {
	if c.lru == nil || rec.Status != core.StatusSucceeded {
		return
	}
	rec.Result = bytes.Clone(rec.Result) // callers may reuse or edit their buffer
	c.lru.Add(rec.Key, cached{rec: rec, until: now.Add(c.ttl)})
}

// lookup answers a call from the cache: ok reports a hit. An entry past its
// end or its record's retention is dropped.
func (c resultCache) lookup(key, fingerprint string, now time.Time) (Outcome, error, bool) {
	if c.lru == nil {
		return Outcome{}, nil, false
	}
	e, ok := c.lru.Get(key)
	if !ok {
		return Outcome{}, nil, false
	}
	rec := e.rec
	if !now.Before(e.until) || rec.Expired(now) {
		c.lru.Remove(key)
		return Outcome{}, nil, false
	}
	if rec.Fingerprint != fingerprint {
		return Outcome{Attempts: rec.Attempts, Cached: true}, core.ErrKeyReused, true
	}
	return Outcome{Verdict: Replayed, Result: bytes.Clone(rec.Result), Replayed: true, Attempts: rec.Attempts, ResultOmitted: rec.ResultOmitted, Cached: true}, nil, true
}

// CacheLen returns the number of outcomes in the runner's cache (0 when off).
func (r *Runner) CacheLen() int {
	if r.cache.lru == nil {
		return 0
	}
	return r.cache.lru.Len()
}
