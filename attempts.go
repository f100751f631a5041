package idem

import (
	"context"

	"github.com/idemgo/idem/core"
)

// sourceLimitKey is the context key of ContextWithSourceLimit's mark.
type sourceLimitKey struct{}

// ContextWithSourceLimit returns a copy of ctx with which a call of
// Runner.Do says that its event source limits the deliveries of an event
// itself: an SQS queue's redrive policy (maxReceiveCount), Lambda's
// retries of an asynchronous invocation. Unless the runner was given
// WithMaxAttempts, the call's key then has no bound on its executions
// (core.NoAttemptLimit): a message whose handler keeps failing runs on
// every delivery until the source's limit moves it to its dead-letter
// queue or failure destination. The SQS and SNS wrappers of package
// idemlambda use it; a consumer of such a source outside Lambda may too.
// Without it, the bound is DefaultMaxAttempts. The mark applies to the
// call made with ctx only: the handler's context does not carry it on to
// the calls the handler makes.
func ContextWithSourceLimit(ctx context.Context) context.Context {
	return context.WithValue(ctx, sourceLimitKey{}, true)
}

// attemptLimit resolves the bound of the call's key's executions
// (WithMaxAttempts, else the source's, else DefaultMaxAttempts) and hides
// the source's mark from the handler's context.
func (c *call) attemptLimit() int {
	limited, _ := c.ctx.Value(sourceLimitKey{}).(bool)
	if limited {
		c.ctx = context.WithValue(c.ctx, sourceLimitKey{}, false)
	}
	switch {
	case c.r.cfg.maxAttempts > 0:
		return c.r.cfg.maxAttempts
	case limited:
		return core.NoAttemptLimit
	}
	return DefaultMaxAttempts
}

// policy is the decision policy of the call's key.
func (c *call) policy() core.Policy { return core.Policy{MaxAttempts: c.maxAttempts} }
