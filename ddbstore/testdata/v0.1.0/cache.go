package idem

import (
	"bytes"
	"fmt"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/idemgo/idem/core"
)

// WithCache turns on a per-process cache of up to size succeeded outcomes
// (off by default). A duplicate that hits it is answered without calling the
// store; entries expire with their record's retention, and the fingerprint is
// checked exactly as on a store read, so a key reused with another payload is
// still rejected. The cache only ever holds succeeded records, which never
// change until they expire, so it cannot replay a stale outcome.
func WithCache(size int) Option {
	return func(c *config) error {
		if size < 1 {
			return fmt.Errorf("idem: cache size %d must be at least 1", size)
		}
		c.cacheSize = size
		return nil
	}
}

// resultCache is a bounded LRU of succeeded records. Its zero value is a
// disabled cache. Safe for concurrent use (the LRU locks internally).
type resultCache struct {
	lru *lru.Cache[string, core.Record]
}

func newResultCache(size int) resultCache {
	c, err := lru.New[string, core.Record](size)
	if err != nil { // only for size <= 0, excluded by WithCache
		return resultCache{}
	}
	return resultCache{lru: c}
}

func (c resultCache) add(rec core.Record) {
	if c.lru == nil || rec.Status != core.StatusSucceeded {
		return
	}
	rec.Result = bytes.Clone(rec.Result) // callers may reuse or edit their buffer
	c.lru.Add(rec.Key, rec)
}

// lookup answers a call from the cache: ok reports a hit.
func (c resultCache) lookup(key, fingerprint string, now time.Time) (Outcome, error, bool) {
	if c.lru == nil {
		return Outcome{}, nil, false
	}
	rec, ok := c.lru.Get(key)
	if !ok {
		return Outcome{}, nil, false
	}
	if rec.Expired(now) {
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
