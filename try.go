package idem

import "github.com/idemgo/idem/core"

// try runs one try of fn under the reservation rec, with the context the
// handler is given: the call's context, carrying what the handler may use
// of its execution (its steps and downstream keys: withExecution). When fn
// returns, rec.Steps holds the steps the stored record now has, so that the
// outcome written next keeps them (a failure) or drops them (a success).
func (c *call) try(rec *core.Record, fn Handler) ([]byte, error) {
	ctx, finish := c.withExecution(c.ctx, rec)
	result, err := fn(ctx)
	finish()
	return result, err
}
