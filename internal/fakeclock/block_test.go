package fakeclock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBlockWaitsForOthersToMoveTheClock(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	c := New(t0)
	done := make(chan error, 1)
	go func() { done <- c.Block(context.Background(), 10*time.Second) }()
	if err := c.WaitBlocked(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	c.Advance(9 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("Block returned %v after 9 of its 10 seconds", err)
	default:
	}
	if err := c.Sleep(context.Background(), time.Second); err != nil { // another goroutine's sleep moves it too
		t.Fatal(err)
	}
	if err := <-done; err != nil || !c.Now().Equal(t0.Add(10*time.Second)) {
		t.Fatalf("Block = %v at %s, want nil at t0+10s (Block never moves the clock)", err, c.Now())
	}
	if err := c.Block(context.Background(), 0); err != nil {
		t.Fatalf("Block(0) = %v, want nil at once", err)
	}
}

func TestBlockEndsWithItsContext(t *testing.T) {
	c := New(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Block(ctx, time.Hour) }()
	if err := c.WaitBlocked(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Block after its context ended = %v, want context.Canceled", err)
	}
	waitCtx, stop := context.WithCancel(context.Background())
	stop()
	if err := c.WaitBlocked(waitCtx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitBlocked with no one blocked = %v, want its context's error", err)
	}
}

func TestDriveMovesTheClockWhenTheWaitersAreBlocked(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	c := New(t0)
	setWaiters, stop := c.Drive(time.Second, 2)
	defer stop()
	first := make(chan error, 1)
	go func() { first <- c.Block(context.Background(), 5*time.Second) }()
	if err := c.WaitBlocked(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if !c.Now().Equal(t0) {
		t.Fatalf("the clock moved to %s while one of two waiters was blocked", c.Now())
	}
	if err := c.Block(context.Background(), 3*time.Second); err != nil { // the second waiter: the clock moves
		t.Fatal(err)
	}
	if now := c.Now(); !now.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("the second waiter woke at %s, want t0+3s (the clock moved while it was awake)", now)
	}
	setWaiters(1) // the first waiter alone now
	if err := <-first; err != nil || !c.Now().Equal(t0.Add(5*time.Second)) {
		t.Fatalf("Block = %v at %s, want nil at t0+5s", err, c.Now())
	}
	stop()
	before := c.Now()
	go func() { _ = c.Block(context.Background(), time.Hour) }()
	if err := c.WaitBlocked(context.Background(), 1); err != nil || !c.Now().Equal(before) {
		t.Fatalf("the clock moved after stop: %s, want %s", c.Now(), before)
	}
}
