package refusecommit

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/memstore"
)

// Store is a memstore.Store whose CompleteStaged refuses the next Refuse
// commits (negative: every one) with an error wrapping
// idem.ErrCommitRefused, marked transient, or permanent if Permanent is
// set; then it commits. FailWrites makes every Complete fail too, with a
// transient error, as a throttled table would. Commits counts the calls of
// CompleteStaged. Safe for concurrent use; set Permanent before use.
type Store struct {
	*memstore.Store
	Refuse     atomic.Int32
	Permanent  bool
	FailWrites atomic.Bool
	Commits    atomic.Int32
}

// New returns a Store over a new memstore that refuses every commit.
func New() *Store {
	s := &Store{Store: memstore.New()}
	s.Refuse.Store(-1)
	return s
}

// CompleteStaged refuses the commit, or makes it (see Store).
func (s *Store) CompleteStaged(ctx context.Context, rec core.Record, staged []any) (core.Record, error) {
	s.Commits.Add(1)
	if s.Refuse.Load() == 0 {
		return s.Store.CompleteStaged(ctx, rec, staged)
	}
	s.Refuse.Add(-1)
	cause := core.MarkTransient(errors.New("refusecommit: transaction cancelled [None, TransactionConflict]"))
	if s.Permanent {
		cause = core.MarkPermanent(errors.New("refusecommit: access denied to a staged write"))
	}
	return core.Record{}, fmt.Errorf("%w: %w", idem.ErrCommitRefused, cause)
}

// Complete fails while FailWrites is set, else completes.
func (s *Store) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	if s.FailWrites.Load() {
		return core.Record{}, core.MarkTransient(errors.New("refusecommit: throttled"))
	}
	return s.Store.Complete(ctx, rec)
}
