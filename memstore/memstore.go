package memstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// Store is an in-memory idem.Store. The zero value is an empty store ready
// for use; it is safe for concurrent use (one mutex guards the map). A Store
// must not be copied after first use.
type Store struct {
	mu      sync.Mutex // guards records
	records map[string]core.Record
}

// New returns an empty Store.
func New() *Store { return &Store{} }

var (
	_ idem.Store        = (*Store)(nil)
	_ idem.Releaser     = (*Store)(nil)
	_ idem.StepRecorder = (*Store)(nil)
)

func clone(r core.Record) core.Record {
	if r.Result != nil {
		r.Result = append([]byte(nil), r.Result...)
	}
	if r.Steps != nil {
		steps := make([]core.Step, len(r.Steps))
		for i, st := range r.Steps {
			steps[i] = core.Step{Name: st.Name, Result: append([]byte(nil), st.Result...)}
		}
		r.Steps = steps
	}
	return r
}

// Reserve implements idem.Store.Reserve atomically under the store's lock,
// by core.Reservable.
func (s *Store) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if rec.Status != core.StatusInProgress {
		return fmt.Errorf("memstore: reserve needs an in_progress record, got %q", rec.Status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var live *core.Record
	if cur, ok := s.records[rec.Key]; ok && !cur.Expired(now) {
		live = &cur
	}
	switch {
	case live != nil && core.SameWrite(*live, rec):
		return nil // a retried write whose answer was lost
	case core.Reservable(live, prev, now):
	case live != nil:
		return &idem.ConflictError{Existing: clone(*live)}
	default:
		return fmt.Errorf("memstore: reserve key hash %s: %w: the record the reservation replaces is gone",
			idem.HashKey(rec.Key), idem.ErrRecordChanged)
	}
	if s.records == nil {
		s.records = make(map[string]core.Record)
	}
	s.records[rec.Key] = clone(rec)
	return nil
}

// Complete implements idem.Store.Complete atomically under the store's lock.
// Results of any size are kept.
func (s *Store) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	if err := ctx.Err(); err != nil {
		return core.Record{}, err
	}
	if rec.Status != core.StatusSucceeded && rec.Status != core.StatusFailed {
		return core.Record{}, fmt.Errorf("memstore: complete needs a succeeded or failed record, got %q", rec.Status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[rec.Key]
	if ok && core.SameWrite(cur, rec) {
		return clone(cur), nil // a retried write whose answer was lost
	}
	if !ok || cur.Expired(rec.UpdatedAt) || cur.Status != core.StatusInProgress || cur.LeaseToken != rec.LeaseToken {
		return core.Record{}, fmt.Errorf("memstore: key hash %s: %w", idem.HashKey(rec.Key), idem.ErrLeaseLost)
	}
	s.records[rec.Key] = clone(rec)
	return clone(rec), nil
}

// Get implements idem.Store.Get.
func (s *Store) Get(ctx context.Context, key string, now time.Time) (core.Record, error) {
	if err := ctx.Err(); err != nil {
		return core.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[key]
	if !ok || cur.Expired(now) {
		return core.Record{}, fmt.Errorf("memstore: key hash %s: %w", idem.HashKey(key), idem.ErrNotFound)
	}
	return clone(cur), nil
}

// Release implements idem.Releaser atomically under the store's lock: it
// deletes the record of rec.Key if it is still rec (core.SameWrite).
func (s *Store) Release(ctx context.Context, rec core.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[rec.Key]
	if !ok {
		return fmt.Errorf("memstore: release key hash %s: %w", idem.HashKey(rec.Key), idem.ErrNotFound)
	}
	if !core.SameWrite(cur, rec) {
		return fmt.Errorf("memstore: release key hash %s: %w: the store holds status %s, attempt %d",
			idem.HashKey(rec.Key), idem.ErrRecordChanged, cur.Status, cur.Attempts)
	}
	delete(s.records, rec.Key)
	return nil
}

// RecordStep implements idem.StepRecorder atomically under the store's
// lock, by core.AddStep. Steps of any size are kept.
func (s *Store) RecordStep(ctx context.Context, key, leaseToken string, step core.Step, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var stored *core.Record
	if cur, ok := s.records[key]; ok {
		stored = &cur
	}
	rec, w := core.AddStep(stored, leaseToken, step, now)
	switch w {
	case core.StepAppend:
		s.records[key] = clone(rec)
		return nil
	case core.StepRecorded:
		return nil
	case core.StepConflict:
		return fmt.Errorf("memstore: key hash %s, step %q: %w", idem.HashKey(key), step.Name, idem.ErrStepConflict)
	}
	return fmt.Errorf("memstore: key hash %s, step %q: %w", idem.HashKey(key), step.Name, idem.ErrLeaseLost)
}

// Len returns the number of records held, expired ones included.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}
