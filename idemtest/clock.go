package idemtest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// DefaultStart is where NewClock(time.Time{}) starts: a fixed instant, in
// the future of any machine running the tests, so that a deadline on the
// fake clock never passes by itself in real time.
var DefaultStart = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// Clock is a fake clock: time passes only when a test moves it (Advance,
// Set) or when the runner sleeps on it (Sleep). Give its Now to
// idem.WithClock and its Sleep to idem.WithSleep. Safe for concurrent use.
// Create it with NewClock; the zero value is not usable.
type Clock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

// NewClock returns a clock at start (DefaultStart when start is zero).
func NewClock(start time.Time) *Clock {
	if start.IsZero() {
		start = DefaultStart
	}
	return &Clock{now: start}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (a negative d is ignored).
func (c *Clock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t, forward or back.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Sleep advances the clock by d at once, or returns ctx's error if ctx is
// done: the runner's waits (in-process retries' backoff, bounded waits)
// pass without real time passing. Its signature is idem.WithSleep's.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Advance(d)
	return nil
}

// invocations numbers the invocations' request ids.
var invocations struct {
	sync.Mutex
	n int
}

// Invocation returns the context Lambda gives a handler, on the clock: a
// deadline timeout after the clock's now (the runner's lease ends from it),
// and the invocation's lambdacontext (a request id, the function's ARN), as
// the wrappers and idemlambda.LogHandler read it. Call the CancelFunc when
// the invocation is over. With a clock in the future (DefaultStart), the
// deadline never passes in real time; move the clock past it to make the
// runner see an invocation out of time.
func (c *Clock) Invocation(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	invocations.Lock()
	invocations.n++
	n := invocations.n
	invocations.Unlock()
	ctx := lambdacontext.NewContext(parent, &lambdacontext.LambdaContext{
		AwsRequestID:       fmt.Sprintf("00000000-0000-4000-8000-%012d", n),
		InvokedFunctionArn: "arn:aws:lambda:" + Region + ":" + Account + ":function:handler",
	})
	return context.WithDeadline(ctx, c.Now().Add(timeout))
}
