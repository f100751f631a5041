package fakeclock

import (
	"context"
	"slices"
	"time"
)

// waiter is a goroutine parked in Block until the clock reads at.
type waiter struct {
	at   time.Time
	wake chan struct{}
}

// Block waits, without moving the clock, until others have moved it (Advance,
// Sleep) to at least its reading at the call plus d, or ctx is done (its
// error). Unlike Sleep, it lets a background goroutine wait for time that a
// test makes pass. A goroutine counts as blocked (WaitBlocked) from the call
// until the clock's move that wakes it.
func (c *Clock) Block(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	if d <= 0 {
		c.mu.Unlock()
		return nil
	}
	w := &waiter{at: c.now.Add(d), wake: make(chan struct{})}
	c.waiters = append(c.waiters, w)
	c.notifyLocked()
	c.mu.Unlock()
	select {
	case <-w.wake:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		if i := slices.Index(c.waiters, w); i >= 0 {
			c.waiters = slices.Delete(c.waiters, i, i+1)
			c.notifyLocked()
		}
		return ctx.Err()
	}
}

// WaitBlocked waits until at least n goroutines are blocked in Block, or ctx
// is done (its error).
func (c *Clock) WaitBlocked(ctx context.Context, n int) error {
	return c.waitUntil(ctx, func() bool { return len(c.waiters) >= n })
}

// waitUntil waits until cond, called with c.mu held, holds, or ctx is done
// (its error).
func (c *Clock) waitUntil(ctx context.Context, cond func() bool) error {
	for {
		c.mu.Lock()
		if cond() {
			c.mu.Unlock()
			return nil
		}
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// wakeLocked wakes the goroutines blocked until now or earlier. c.mu must be
// held.
func (c *Clock) wakeLocked() {
	kept := c.waiters[:0]
	woken := false
	for _, w := range c.waiters {
		if c.now.Before(w.at) {
			kept = append(kept, w)
			continue
		}
		close(w.wake)
		woken = true
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
	if woken {
		c.notifyLocked()
	}
}

// notifyLocked tells WaitBlocked that the blocked goroutines changed. c.mu
// must be held.
func (c *Clock) notifyLocked() {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// Drive moves the clock by step each time at least waiters goroutines are
// blocked in Block, until stop is called (stop waits for the driving
// goroutine to end). waiters is the number of goroutines that use the
// clock: moving it while one of them is awake could pass a time it has to
// act at. setWaiters changes it while the clock is driven.
func (c *Clock) Drive(step time.Duration, waiters int) (setWaiters func(n int), stop func()) {
	c.mu.Lock()
	c.driven = waiters
	c.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		driven := func() bool { return len(c.waiters) >= c.driven }
		for ctx.Err() == nil && c.waitUntil(ctx, driven) == nil {
			c.Advance(step)
		}
	}()
	setWaiters = func(n int) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.driven = n
		c.notifyLocked()
	}
	return setWaiters, func() { cancel(); <-done }
}
