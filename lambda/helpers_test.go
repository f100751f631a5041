package idemlambda_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
	"github.com/idemgo/idem/memstore"
)

// t0 is the fake clock's start.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// env is a runner over a memstore with a fake clock, deterministic tokens
// and no backoff jitter.
type env struct {
	clock  *fakeclock.Clock
	store  *memstore.Store
	runner *idem.Runner
}

func newEnv(t testing.TB, opts ...idem.Option) *env {
	t.Helper()
	e := &env{clock: fakeclock.New(t0), store: memstore.New()}
	var mu sync.Mutex
	n := 0
	base := []idem.Option{
		idem.WithClock(e.clock.Now),
		idem.WithSleep(e.clock.Sleep),
		idem.WithRand(func() float64 { return 0 }),
		idem.WithTokens(func() string { mu.Lock(); defer mu.Unlock(); n++; return fmt.Sprintf("token-%d", n) }),
	}
	r, err := idem.New(e.store, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.runner = r
	return e
}

// ctx returns a context whose deadline is d after the fake clock's now. The
// deadline is in the clock's future (2030), so it never fires by itself.
func (e *env) ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), e.clock.Now().Add(d))
	t.Cleanup(cancel)
	return ctx
}

// hold writes a live in-progress record for key, as another sandbox that is
// still running would, with its lease ending at leaseUntil.
func (e *env) hold(t testing.TB, key string, payload []byte, leaseUntil time.Time) {
	t.Helper()
	fp, err := core.Fingerprint(payload)
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	rec := core.Reserve(key, fp, "other-sandbox", nil, now, leaseUntil, time.Hour)
	if err := e.store.Reserve(context.Background(), rec, nil, now); err != nil {
		t.Fatal(err)
	}
}

// counter counts executions per name; safe for concurrent use.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) inc(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
	return c.n[name]
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}
