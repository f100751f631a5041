package idem

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/idemgo/idem/core"
)

// StagedCompleter is an optional capability of a Store: committing the
// writes a handler staged (Stage) in one atomic write together with its
// success, so that the handler's business writes and its outcome land
// together or not at all. Staged writes are only committed with a success;
// a failure discards them. Implementations are safe for concurrent use.
type StagedCompleter interface {
	// CheckStaged reports whether staged, the writes staged so far by one
	// try (oldest first, the newest last), can be committed by
	// CompleteStaged. It returns an error wrapping ErrNoStaging if the
	// store cannot commit staged writes at all (a client without the
	// needed call), or a *StagedWriteError if a write is of a type the
	// store does not take, is malformed, or the writes exceed the store's
	// limits where they can be known before the commit. It makes no calls
	// and must not keep or change staged.
	CheckStaged(staged []any) error

	// CompleteStaged is Complete of rec, a succeeded record, together with
	// the staged writes, in one atomic write: either rec replaces the
	// in-progress record and every staged write is applied, or nothing is
	// written. It is fenced as Complete is: if the stored record is not in
	// progress, does not hold rec.LeaseToken or is Expired at
	// rec.UpdatedAt, nothing is written and the error wraps ErrLeaseLost,
	// unless the stored record is this very outcome (core.SameWrite): a
	// retried commit whose answer was lost, whose writes were applied by
	// the first; it is returned with nil and nothing is applied again.
	// If a staged write is refused by its own condition, or the writes
	// exceed the store's limits, nothing is written and the error is a
	// *StagedWriteError: the handler's error, not the store's. Failures
	// of the store itself are marked as Complete's are.
	CompleteStaged(ctx context.Context, rec core.Record, staged []any) (core.Record, error)
}

// Errors of staging, checked with errors.Is.
var (
	// ErrNoStaging: Stage was given a context that is not a handler's
	// context under a Runner (a Handler's ctx, or one derived from it), or
	// the runner's store cannot commit staged writes (it does not
	// implement StagedCompleter, or its client lacks the call). Nothing
	// was staged: a write is never dropped silently.
	ErrNoStaging = errors.New("idem: no staging here: not a handler's context, or the store cannot commit staged writes")
	// ErrStageClosed: Stage was called after the try that owned the stage
	// had returned (from a goroutine that outlived the handler). Nothing
	// was staged.
	ErrStageClosed = errors.New("idem: staging closed: the handler's try has returned")
	// ErrStagedConditionFailed: a staged write was refused by its own
	// condition at the commit. Found inside a *StagedWriteError.
	ErrStagedConditionFailed = errors.New("idem: staged write's condition failed")
	// ErrStagedLimit: the staged writes exceed a limit of the store (count,
	// size of one write, aggregate size). Found inside a *StagedWriteError.
	ErrStagedLimit = errors.New("idem: staged writes exceed the store's limits")
)

// StagedWriteError is the error of a commit, or of Stage, refused because
// of the staged writes themselves: a staged write's condition failed
// (ErrStagedConditionFailed), the writes exceed the store's limits
// (ErrStagedLimit), or a write is malformed. Nothing was written. The
// runner treats it as an error returned by the handler: it is classified
// by the handler's chain (permanent unless marked, for example by a
// staged function of memstore returning an error marked with
// core.MarkTransient) and recorded as the key's failure, with the staged
// writes discarded. Found with errors.As.
type StagedWriteError struct {
	// Index is the position of the staged write at fault (0 for the first
	// staged), or -1 when the error concerns the writes as a whole.
	Index int
	// Err is the cause: ErrStagedConditionFailed, an error wrapping
	// ErrStagedLimit, or the store's own reason.
	Err error
}

// Error describes the refused write.
func (e *StagedWriteError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("idem: staged writes refused: %v", e.Err)
	}
	return fmt.Sprintf("idem: staged write %d refused: %v", e.Index, e.Err)
}

// Unwrap returns the cause.
func (e *StagedWriteError) Unwrap() error { return e.Err }

// stage is the buffer of the writes one try stages. Safe for concurrent
// use: mu guards writes and closed.
type stage struct {
	check func([]any) error

	mu     sync.Mutex
	writes []any
	closed bool
}

type stageKey struct{}

// Stage adds writes to those the handler's execution commits with its
// success (see StagedCompleter), after the store has checked them
// (StagedCompleter.CheckStaged): on an error nothing of this call is
// staged. ctx must be the Handler's context or derived from it. The
// writes' type is the store's (ddbstore: types.TransactWriteItem, through
// ddbstore.Stage; memstore: memstore.Apply). Staged writes are committed
// only if the try succeeds; a failure, or a retried try (which starts with
// an empty stage), discards them. Safe for concurrent use by the
// handler's goroutines.
//
// Errors: ErrNoStaging (wrapped) when ctx is not a handler's context whose
// store can stage, ErrStageClosed after the try has returned, or the
// store's *StagedWriteError.
func Stage(ctx context.Context, writes ...any) error {
	st, _ := ctx.Value(stageKey{}).(*stage)
	if st == nil {
		return ErrNoStaging
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return ErrStageClosed
	}
	all := append(st.writes[:len(st.writes):len(st.writes)], writes...)
	if err := st.check(all); err != nil {
		return err
	}
	st.writes = all
	return nil
}

// newStage returns the stage of one try over store, and ctx carrying it;
// with a store that cannot stage, no stage and ctx as it is.
func newStage(ctx context.Context, store Store) (*stage, context.Context) {
	sc, ok := store.(StagedCompleter)
	if !ok {
		return nil, ctx
	}
	st := &stage{check: sc.CheckStaged}
	return st, context.WithValue(ctx, stageKey{}, st)
}

// close ends the stage's staging and returns its writes. A nil stage has
// none.
func (st *stage) close() []any {
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	return st.writes
}
