package idem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem/core"
)

// Store keeps idempotency records. Implementations must be safe for
// concurrent use by multiple goroutines. Every method treats a record that
// is past its retention (core.Record.Expired, the one rule of absence: an
// in-progress record with a live lease is never absent) as absent, whether
// or not it has been deleted yet.
//
// A write may be retried after its answer was lost (a timeout or a reset
// after the store applied it). Stores recognise their own writes so that a
// retry is answered as the first try would have been: Reserve of a record
// that is already stored (same key, lease token and attempt, in progress)
// returns nil, and Complete of an outcome that is already stored (same
// key, lease token, status and attempt) returns the stored record and nil.
// Lease tokens are unique per reservation, so no other writer can be taken
// for the caller.
//
// Errors: a conflict is a *ConflictError; a lost lease is ErrLeaseLost;
// failures of the store itself should be marked with core.MarkTransient when
// the operation certainly did not take effect and a retry may succeed
// (throttling, a refused connection), and be permanent otherwise
// (validation, missing table, access denied).
type Store interface {
	// Reserve atomically writes rec, an in-progress record, if and only if
	// core.Reservable holds at now for the live stored record and prev:
	//   - prev is nil and no live record exists for rec.Key (absent or
	//     Expired at now);
	//   - prev is not nil and the live stored record is still the one prev
	//     describes (same LeaseToken, Status and number of steps) and it is
	//     either in progress with a lease that ended by now, or a retryable
	//     failure (core.Replaceable).
	// A live record that is rec itself is a retried write: nil. Otherwise
	// it writes nothing and returns a *ConflictError holding the live record
	// that blocked it or, where prev is not nil and no live record exists
	// (prev was released, deleted or ended), an error wrapping
	// ErrRecordChanged: rec carries prev's attempt count and steps, which a
	// new record lifetime must not have, so the caller decides again. prev
	// is the record a core.Decide was made on; it is nil for a first
	// attempt. A store that keeps steps apart from the record may leave the
	// blocking record's steps out (nil) where rec could not resume it
	// (core.Resumable): no decision needs them.
	Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error

	// Complete atomically replaces the in-progress record of rec.Key with
	// rec (status succeeded or failed) if and only if the stored record is
	// in progress, holds rec.LeaseToken and is not Expired at rec.UpdatedAt
	// (the completion's time); otherwise it writes nothing and returns an
	// error wrapping ErrLeaseLost, unless the stored record is this very
	// outcome (a retried write: it is returned with nil). It returns the
	// record as stored: a store may omit a result too large to keep,
	// setting ResultOmitted, but never drops the outcome. A store that
	// keeps large results elsewhere (a blob store) and cannot keep one
	// writes no record and returns an error wrapping ErrCommitRefused.
	Complete(ctx context.Context, rec core.Record) (core.Record, error)

	// Get returns the live record of key, or an error wrapping ErrNotFound
	// if there is none (absent or Expired at now). Reads are strongly
	// consistent.
	Get(ctx context.Context, key string, now time.Time) (core.Record, error)
}

// Errors of the Store contract, checked with errors.Is.
var (
	// ErrNotFound: the store has no live record for the key.
	ErrNotFound = errors.New("idem: record not found")
	// ErrLeaseLost: a completion or a lease renewal (LeaseRenewer) was
	// refused because the caller no longer holds the key's lease (it
	// expired and was taken over, or the record expired). With
	// WithLeaseRenewal, the cause of a handler's context cancelled because
	// its lease could not be held wraps it too.
	ErrLeaseLost = errors.New("idem: lease lost")
	// ErrRecordChanged: a write conditioned on a record the caller read
	// was refused because that record is gone or another is stored: a
	// Releaser's Release (the record was taken over, completed or retried
	// since), or a Store's Reserve over prev where no live record exists
	// any more (prev was released, deleted or ended).
	ErrRecordChanged = errors.New("idem: record changed since it was read")
	// ErrMisconfigured: the store's configuration does not fit what it
	// stores in (ddbstore: a table whose key schema is not the one the
	// store's options describe), so every call fails alike until the
	// configuration is fixed. Stores wrap it in such errors, which are
	// permanent; the runner logs them at ERROR (verdict StoreFailed, or
	// OutcomeNotRecorded when a completion revealed it).
	ErrMisconfigured = errors.New("idem: store misconfigured")
)

// Releaser is an optional capability of a Store: deleting a key's record on
// an operator's decision, so that the key runs again on its next delivery
// (a permanent failure re-run after a fix, before a dead-letter queue is
// redriven), or the runner's own reservation, for a handler error marked
// core.MarkNoRecord. Release is fenced: it deletes only the record the
// caller read.
//
// Release atomically deletes the stored record of rec.Key if and only if it
// is still rec: same lease token, status and attempt (core.SameWrite).
// Retention is not consulted: a matching record past retention is deleted
// too (it counted as absent already). Otherwise it deletes nothing and
// returns an error wrapping ErrRecordChanged if another record is stored,
// or ErrNotFound if none is (never written, already released, or removed
// by the store's expiry). A Release retried after its answer was lost
// therefore reports ErrNotFound. Release does not look at the lease:
// releasing an in-progress record whose lease lives lets a second
// execution start beside the first, so callers check the lease first.
// Implementations are safe for concurrent use; of concurrent Releases of
// one record, one succeeds.
type Releaser interface {
	// Release deletes the stored record of rec.Key if it is still rec.
	Release(ctx context.Context, rec core.Record) error
}

// ConflictError is returned by Store.Reserve when a live record blocks the
// reservation. Found with errors.As.
type ConflictError struct {
	// Existing is the record that blocked the reservation. Its Steps may be
	// nil where the caller could not resume it (see Store.Reserve).
	Existing core.Record
}

// Error describes the conflict.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("idem: key (hash %s) is held by a %s record", HashKey(e.Existing.Key), e.Existing.Status)
}

// ErrorClassifier is an optional capability of a Store: it classifies the
// errors of the platform the store belongs to (ddbstore: AWS errors, with
// what the AWS SDK knows of throttling, 5xx and connection errors). The
// runner asks it before its own chain, for handler errors and for the
// store's errors alike, so that what the platform says is retryable is
// transient without the caller having configured anything. It returns
// core.Unknown for errors it has no opinion on, and should never answer
// core.Permanent for what it does not own.
type ErrorClassifier interface {
	// ClassifyError returns err's class, or core.Unknown.
	ClassifyError(err error) core.Class
}

// LeaseRenewer is an optional capability of a Store: extending the lease of
// an in-progress record that its holder still holds, so that a handler may
// run longer than one lease (WithLeaseRenewal needs it). Renewals are fenced
// by the lease token, as completions are.
//
// RenewLease atomically extends the lease of the stored record of rec.Key
// if and only if it is in progress, holds rec.LeaseToken and its lease has
// not ended at now (core.Renewable): it writes the LeaseUntil, ExpiresAt and
// UpdatedAt of core.Renew(rec, until, now) (the lease ends at until, and
// retention not before it) and leaves every other field as stored. rec is
// the record as the caller last wrote it: reserved, or returned by its last
// RenewLease. until must be after now. If the stored record already holds
// rec.LeaseToken's lease until until or later (core.Renewed: a renewal
// retried after its answer was lost, or one that would shorten the lease),
// it writes nothing and returns nil. Either way it returns the record as
// stored. Otherwise it writes nothing and returns an error wrapping
// ErrLeaseLost (the key was taken over, completed, or its lease ended).
// Implementations are safe for concurrent use; a renewal costs one
// conditional write.
type LeaseRenewer interface {
	// RenewLease extends the lease of rec's holder to until, at now.
	RenewLease(ctx context.Context, rec core.Record, until, now time.Time) (core.Record, error)
}
