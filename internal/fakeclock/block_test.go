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
