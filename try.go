package idem

import "github.com/idemgo/idem/core"

// try runs one try of fn under the reservation rec, with the context the
// handler is given: the call's context, carrying what the handler may use
// of its execution.
func (c *call) try(rec core.Record, fn Handler) ([]byte, error) {
	_ = rec
	return fn(c.ctx)
}
