package idem

import (
	"context"

	"github.com/idemgo/idem/core"
)

// try runs one try of fn under the reservation rec, with the context the
// handler is given: the call's context, carrying what the handler may use
// of its execution (its steps, its downstream keys). When fn returns,
// rec.Steps holds the steps the stored record now has, so that the outcome
// written next keeps them (a failure) or drops them (a success).
func (c *call) try(rec *core.Record, fn Handler) ([]byte, error) {
	x := &execution{c: c, key: rec.Key, token: rec.LeaseToken, steps: append([]core.Step(nil), rec.Steps...), running: map[string]bool{}}
	result, err := fn(context.WithValue(c.ctx, executionKey{}, x))
	steps, calls, storeTime := x.finish()
	rec.Steps = steps
	c.storeCalls, c.storeTime = c.storeCalls+calls, c.storeTime+storeTime
	return result, err
}
