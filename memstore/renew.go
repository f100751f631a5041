package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

var _ idem.LeaseRenewer = (*Store)(nil)

// RenewLease implements idem.LeaseRenewer atomically under the store's lock
// (core.Renewed, core.Renewable, core.Renew).
func (s *Store) RenewLease(ctx context.Context, rec core.Record, until, now time.Time) (core.Record, error) {
	if err := ctx.Err(); err != nil {
		return core.Record{}, err
	}
	if !until.After(now) {
		return core.Record{}, fmt.Errorf("memstore: renew until %s, not after now %s", until, now)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[rec.Key]
	if ok && core.Renewed(cur, rec.LeaseToken, until) {
		return clone(cur), nil // a retried renewal, or one that would shorten the lease
	}
	if !ok || !core.Renewable(cur, rec.LeaseToken, now) {
		return core.Record{}, fmt.Errorf("memstore: renew key hash %s: %w", idem.HashKey(rec.Key), idem.ErrLeaseLost)
	}
	r := core.Renew(rec, until, now)
	cur.LeaseUntil, cur.ExpiresAt, cur.UpdatedAt = r.LeaseUntil, r.ExpiresAt, r.UpdatedAt
	s.records[rec.Key] = cur
	return clone(cur), nil
}
