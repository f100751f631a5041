package idem

import "github.com/idemgo/idem/core"

// try runs one try of fn under the reservation rec, with the context the
// handler is given: the call's context, carrying what the handler may use
// of its execution: its steps and downstream keys (withExecution), its
// staged writes (Stage: each try stages afresh; the stage closes when fn
// returns and its writes are kept for the success) and, with
// WithLeaseRenewal, the renewals of its lease while fn runs (renew; they
// end, even if fn panics, before try returns). When fn returns, rec.Steps
// holds the steps the stored record now has, so that the outcome written
// next keeps them (a failure) or drops them (a success).
func (c *call) try(rec *core.Record, fn Handler) (result []byte, err error) {
	ctx, end := c.renew(*rec)
	defer func() { result, err = end(result, err) }()
	ctx, finish := c.withExecution(ctx, rec)
	defer finish()
	st, ctx := newStage(ctx, c.r.store)
	defer func() { c.staged = st.close() }()
	return fn(ctx)
}
