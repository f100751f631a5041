// Package fakeclock is a manual clock for tests: Sleep advances the clock
// instead of waiting, and records the durations slept.
package fakeclock

import (
	"context"
	"sync"
	"time"
)

// Clock is a fake clock. The zero value starts at the zero time; use New.
// Safe for concurrent use (mu guards every field).
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	sleeps  []time.Duration
	waiters []*waiter     // goroutines in Block
	changed chan struct{} // closed when waiters or driven changes (WaitBlocked, Drive)
	driven  int           // the goroutines Drive waits for
}

// New returns a clock reading t.
func New(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.wakeLocked()
}

// Sleep advances the clock by d and records d; it returns ctx's error if ctx
// is done.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	c.wakeLocked()
	return nil
}

// Sleeps returns the durations slept so far.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}
