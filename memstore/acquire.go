package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

var _ idem.Acquirer = (*Store)(nil)

// Acquire implements idem.Acquirer atomically under the store's lock,
// applying core.Acquirable and core.Acquire to the stored record.
func (s *Store) Acquire(ctx context.Context, rec core.Record, now time.Time, p core.Policy) (core.Record, *core.Record, error) {
	if err := ctx.Err(); err != nil {
		return core.Record{}, nil, err
	}
	if rec.Status != core.StatusInProgress {
		return core.Record{}, nil, fmt.Errorf("memstore: acquire needs an in_progress record, got %q", rec.Status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var prev *core.Record
	if cur, ok := s.records[rec.Key]; ok && !cur.Expired(now) {
		if core.Acquired(cur, rec) {
			return clone(cur), nil, nil // a retried write whose answer was lost
		}
		if !core.Acquirable(&cur, rec.Fingerprint, now, p) {
			return core.Record{}, nil, &idem.ConflictError{Existing: clone(cur)}
		}
		prev = &cur
	}
	rec = core.Acquire(rec, prev, now)
	if s.records == nil {
		s.records = make(map[string]core.Record)
	}
	s.records[rec.Key] = clone(rec)
	if prev != nil {
		old := clone(*prev)
		prev = &old
	}
	return clone(rec), prev, nil
}
