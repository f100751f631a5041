package idem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem/core"
)

// Store keeps idempotency records. Implementations must be safe for
// concurrent use by multiple goroutines. Every method treats a record past
// its retention (Record.Expired(now)) as absent, whether or not it has been
// deleted yet.
//
// Errors: a conflict is a *ConflictError; a lost lease is ErrLeaseLost;
// failures of the store itself should be marked with core.MarkTransient when
// the operation certainly did not take effect and a retry may succeed
// (throttling, a refused connection), and be permanent otherwise
// (validation, missing table, access denied).
type Store interface {
	// Reserve atomically writes rec, an in-progress record, if and only if
	// one of these holds at now:
	//   - no live record exists for rec.Key (absent or past retention);
	//   - prev is not nil and the stored record is still the one prev
	//     describes (same LeaseToken and Status) and it is either in
	//     progress with a lease that ended by now, or a retryable failure.
	// Otherwise it writes nothing and returns a *ConflictError holding the
	// live record that blocked it. prev is the record a core.Decide was made
	// on; it is nil for a first attempt.
	Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error

	// Complete atomically replaces the in-progress record of rec.Key with
	// rec (status succeeded or failed) if and only if the stored record is
	// in progress and holds rec.LeaseToken; otherwise it writes nothing and
	// returns an error wrapping ErrLeaseLost. It returns the record as
	// stored: a store may omit a result too large to keep, setting
	// ResultOmitted, but never drops the outcome.
	Complete(ctx context.Context, rec core.Record) (core.Record, error)

	// Get returns the live record of key, or an error wrapping ErrNotFound
	// if there is none (absent or past retention at now). Reads are
	// strongly consistent.
	Get(ctx context.Context, key string, now time.Time) (core.Record, error)
}

// Errors of the Store contract, checked with errors.Is.
var (
	// ErrNotFound: the store has no live record for the key.
	ErrNotFound = errors.New("idem: record not found")
	// ErrLeaseLost: a completion was refused because the caller no longer
	// holds the key's lease (it expired and was taken over, or the record
	// expired).
	ErrLeaseLost = errors.New("idem: lease lost")
)

// ConflictError is returned by Store.Reserve when a live record blocks the
// reservation. Found with errors.As.
type ConflictError struct {
	// Existing is the record that blocked the reservation.
	Existing core.Record
}

// Error describes the conflict.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("idem: key %s is held by a %s record", e.Existing.Key, e.Existing.Status)
}

// Sentinel errors of the decision table, re-exported from core so that
// callers need import only this package. Checked with errors.Is.
var (
	ErrInvalidKey       = core.ErrInvalidKey
	ErrInvalidPayload   = core.ErrInvalidPayload
	ErrKeyReused        = core.ErrKeyReused
	ErrInProgress       = core.ErrInProgress
	ErrPermanentFailure = core.ErrPermanentFailure
	ErrRetriesExhausted = core.ErrRetriesExhausted
)
