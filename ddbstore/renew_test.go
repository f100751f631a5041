package ddbstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
)

// RenewLease makes the serialized store a LeaseRenewer, so that the suite's
// renewal cases run on every server.
func (s *serialized) RenewLease(ctx context.Context, rec core.Record, until, now time.Time) (core.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.s.(idem.LeaseRenewer).RenewLease(ctx, rec, until, now)
}

func TestRenewLeaseNeedsUpdateItem(t *testing.T) {
	s, err := ddbstore.New(apiOnly{}, "idem-table")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	rec := core.Reserve("evt:renew:1", fp, "tok", nil, t0, t0.Add(time.Minute), time.Hour)
	_, err = s.RenewLease(context.Background(), rec, t0.Add(2*time.Minute), t0)
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("RenewLease through a client without UpdateItem = %v, want errors.ErrUnsupported", err)
	}
}
