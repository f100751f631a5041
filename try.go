package idem

import "github.com/idemgo/idem/core"

// try runs one try of fn under the reservation rec, with the context the
// handler is given: the call's context, carrying what the handler may use
// of its execution. Each try stages its writes afresh (Stage); the stage
// closes when fn returns and its writes are kept for the success.
func (c *call) try(rec core.Record, fn Handler) ([]byte, error) {
	_ = rec
	st, ctx := newStage(c.ctx, c.r.store)
	result, err := fn(ctx)
	c.staged = st.close()
	return result, err
}
