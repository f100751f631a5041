package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// release deletes the stored record of key, as the CLI's release does.
func (f *fixture) release(key string) {
	f.t.Helper()
	rec, err := f.store.Get(context.Background(), key, f.clock.Now())
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.store.Release(context.Background(), rec); err != nil {
		f.t.Fatal(err)
	}
}

// After an operator released a succeeded record, a warm runner with a cache
// runs the key again once the cache's bound has passed (two minutes is past
// the default bound, and well within the record's retention): it does not
// replay, from memory, an outcome the store no longer holds.
func TestCacheDoesNotReplayAReleasedRecordPastItsBound(t *testing.T) {
	f := newFixture(t, idem.WithCache(8))
	h := &counter{result: []byte(`"sent"`)}
	if err := f.do("evt:rel-1:notify", `{}`, h.handler); err != nil {
		t.Fatal(err)
	}
	f.release("evt:rel-1:notify")
	f.clock.Advance(2 * time.Minute)
	out, err := f.runner.Do(f.ctx(t, 30*time.Second), "evt:rel-1:notify", []byte(`{}`), h.handler)
	if err != nil || out.Verdict != idem.Executed || out.Cached || h.n.Load() != 2 {
		t.Fatalf("after release: %s cached=%v (%v), handler ran %d times; want executed again, 2 runs", out.Verdict, out.Cached, err, h.n.Load())
	}
}

// The cache's bound, step by step on the runner's clock: an entry is
// replayed until its TTL ends (the documented window in which a released
// record may still be replayed), and not from then on.
func TestCacheTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []idem.Option
		ttl  time.Duration
	}{
		{"default", nil, idem.DefaultCacheTTL},
		{"WithCacheTTL", []idem.Option{idem.WithCacheTTL(10 * time.Second)}, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, append([]idem.Option{idem.WithCache(8)}, tc.opts...)...)
			h := &counter{result: []byte(`"sent"`)}
			key := "evt:ttl-1:notify"
			steps := []struct {
				at      time.Duration // since the first call
				release bool          // release the record before the call
				verdict idem.Verdict
				cached  bool
			}{
				{0, false, idem.Executed, false},
				{tc.ttl / 2, false, idem.Replayed, true},
				{tc.ttl - time.Nanosecond, true, idem.Replayed, true}, // released, still within the bound
				{tc.ttl, false, idem.Executed, false},
			}
			for i, s := range steps {
				f.clock.Advance(t0.Add(s.at).Sub(f.clock.Now()))
				if s.release {
					f.release(key)
				}
				out, err := f.runner.Do(f.ctx(t, 30*time.Second), key, []byte(`{}`), h.handler)
				if err != nil || out.Verdict != s.verdict || out.Cached != s.cached {
					t.Fatalf("step %d (at %v): %s cached=%v (%v), want %s cached=%v", i, s.at, out.Verdict, out.Cached, err, s.verdict, s.cached)
				}
			}
		})
	}
	if _, err := idem.New(newFixture(t).store, idem.WithCacheTTL(0)); err == nil {
		t.Errorf("WithCacheTTL(0) accepted, want an error")
	}
}
