package ddbstore_test

import (
	"context"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// RenewLease makes the serialized store a LeaseRenewer, so that the suite's
// renewal cases run on every server.
func (s *serialized) RenewLease(ctx context.Context, rec core.Record, until, now time.Time) (core.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.s.(idem.LeaseRenewer).RenewLease(ctx, rec, until, now)
}
