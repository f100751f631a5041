package idem

import "github.com/idemgo/idem/core"

// try runs one try of fn under the reservation rec, with the context the
// handler is given: the call's context, carrying what the handler may use
// of its execution. Each try stages its writes afresh (Stage); the stage
// closes when fn returns and its writes are kept for the success. With
// WithLeaseRenewal, the lease is renewed while fn runs (renew), and the
// renewals end, even if fn panics, before try returns.
func (c *call) try(rec core.Record, fn Handler) (result []byte, err error) {
	ctx, end := c.renew(rec)
	defer func() { result, err = end(result, err) }()
	st, ctx := newStage(ctx, c.r.store)
	defer func() { c.staged = st.close() }()
	return fn(ctx)
}
