package memstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

var _ idem.StagedCompleter = (*Store)(nil)

// Write is a write a handler stages (Stage) to be applied atomically with
// its success: under the store's lock, every staged Cond is called first,
// in order; if all return nil, every Apply is called, in order, and the
// succeeded record is written. If a Cond returns an error, no Apply is
// called, the record is not written, and the commit returns a
// *idem.StagedWriteError wrapping idem.ErrStagedConditionFailed and that
// error (mark it with core.MarkTransient to have the handler retried).
// Either function may be nil, not both. They run under the store's lock:
// they must be quick and must not call the store.
type Write struct {
	// Cond is the write's condition, or nil for none.
	Cond func() error
	// Apply is the write's effect, or nil for a condition check alone.
	Apply func()
}

// Stage stages writes in the handler's execution ctx, to be applied with
// its success: idem.Stage with memstore's type.
func Stage(ctx context.Context, writes ...Write) error {
	all := make([]any, len(writes))
	for i, w := range writes {
		all[i] = w
	}
	return idem.Stage(ctx, all...)
}

// CheckStaged implements idem.StagedCompleter: every staged write must be
// a Write with a Cond or an Apply. memstore has no count or size limits.
func (s *Store) CheckStaged(staged []any) error {
	_, err := writesOf(staged)
	return err
}

func writesOf(staged []any) ([]Write, error) {
	ws := make([]Write, len(staged))
	for i, v := range staged {
		w, ok := v.(Write)
		if !ok {
			return nil, &idem.StagedWriteError{Index: i, Err: fmt.Errorf("memstore: a staged write is a memstore.Write, got %T", v)}
		}
		if w.Cond == nil && w.Apply == nil {
			return nil, &idem.StagedWriteError{Index: i, Err: errors.New("memstore: a staged Write has neither Cond nor Apply")}
		}
		ws[i] = w
	}
	return ws, nil
}

// CompleteStaged implements idem.StagedCompleter atomically under the
// store's lock: the record's condition is Complete's, then each staged
// Cond, then each Apply and the record (see Write).
func (s *Store) CompleteStaged(ctx context.Context, rec core.Record, staged []any) (core.Record, error) {
	if err := ctx.Err(); err != nil {
		return core.Record{}, err
	}
	if rec.Status != core.StatusSucceeded {
		return core.Record{}, fmt.Errorf("memstore: complete with staged writes needs a succeeded record, got %q", rec.Status)
	}
	ws, err := writesOf(staged)
	if err != nil {
		return core.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[rec.Key]
	if ok && core.SameWrite(cur, rec) {
		return clone(cur), nil // a retried commit: its writes were applied by the first
	}
	if !ok || cur.Expired(rec.UpdatedAt) || cur.Status != core.StatusInProgress || cur.LeaseToken != rec.LeaseToken {
		return core.Record{}, fmt.Errorf("memstore: key hash %s: %w", idem.HashKey(rec.Key), idem.ErrLeaseLost)
	}
	for i, w := range ws {
		if w.Cond == nil {
			continue
		}
		if err := w.Cond(); err != nil {
			return core.Record{}, &idem.StagedWriteError{Index: i, Err: fmt.Errorf("%w: %w", idem.ErrStagedConditionFailed, err)}
		}
	}
	for _, w := range ws {
		if w.Apply != nil {
			w.Apply()
		}
	}
	s.records[rec.Key] = clone(rec)
	return clone(rec), nil
}
