package core

import (
	"fmt"
	"time"
)

// Status is the state of a stored record. The zero value is not a valid
// status.
type Status string

const (
	// StatusInProgress marks a record whose handler is running under a lease.
	StatusInProgress Status = "in_progress"
	// StatusSucceeded marks a record whose handler succeeded; its result is kept.
	StatusSucceeded Status = "succeeded"
	// StatusFailed marks a record whose handler failed, permanently or
	// retryably (see Record.Retryable).
	StatusFailed Status = "failed"
)

// Valid reports whether s is one of the three statuses.
func (s Status) Valid() bool {
	return s == StatusInProgress || s == StatusSucceeded || s == StatusFailed
}

// Record is what a store keeps for one idempotency key. Records are values:
// the transition functions return a new Record and never modify their input.
type Record struct {
	// Key is the stored idempotency key (already validated or hashed).
	Key string
	// Fingerprint is the hex SHA-256 of the canonical payload (see Fingerprint).
	Fingerprint string
	// Status is the record's state.
	Status Status
	// LeaseToken identifies the holder of the current lease: the fencing
	// token a completion must present. It is kept after completion.
	LeaseToken string
	// LeaseUntil is when the lease of an in-progress record ends.
	LeaseUntil time.Time
	// ExpiresAt is the end of retention: from then on the record counts as
	// absent, whether or not the store has deleted it yet.
	ExpiresAt time.Time
	// Attempts is the number of executions started for this key, across
	// deliveries, including the current one of an in-progress record.
	Attempts int
	// Result is the stored result of a succeeded record (nil if omitted).
	Result []byte
	// ResultOmitted reports that a succeeded record's result was too large
	// to keep: the outcome is known, its body is not.
	ResultOmitted bool
	// Retryable reports, for a failed record, that the failure was transient
	// and a later delivery may execute again while attempts are left.
	Retryable bool
	// Error is the message of a failed record's error.
	Error string
	// UpdatedAt is when the record was last written.
	UpdatedAt time.Time
	// Steps are the completed recovery points of an in-progress record or
	// a retryable failure, in the order they completed (see Step, AddStep).
	// A reservation that takes over or retries a record of the same
	// fingerprint carries them (Reserve, Acquire); a success and a
	// permanent failure drop them (Succeed, Fail); a retryable failure
	// keeps them.
	Steps []Step
}

// Expired reports whether the record counts as absent at now: its retention
// has ended and it is not an in-progress record whose lease is still live. An
// in-progress record never counts as absent while its lease lives, whatever
// the retention. A record with a zero ExpiresAt never expires. This is the one
// rule of absence: every store applies it (ddbstore's condition expression
// mirrors it and is tested against it).
func (r *Record) Expired(now time.Time) bool {
	if r.ExpiresAt.IsZero() || now.Before(r.ExpiresAt) {
		return false
	}
	return r.Status != StatusInProgress || r.LeaseExpired(now)
}

// LeaseExpired reports whether an in-progress record's lease has ended at now.
func (r *Record) LeaseExpired(now time.Time) bool {
	return !now.Before(r.LeaseUntil)
}

// String describes the record for logs and test failures, without the result.
func (r Record) String() string {
	return fmt.Sprintf("{key=%s status=%s attempts=%d lease_until=%s expires_at=%s retryable=%v}",
		r.Key, r.Status, r.Attempts, r.LeaseUntil.Format(time.RFC3339Nano), r.ExpiresAt.Format(time.RFC3339Nano), r.Retryable)
}

// Reserve returns the in-progress record that a new execution writes: from
// nothing (prev nil, or prev past retention at now) it is attempt 1; over an
// expired lease or a retryable failure it continues prev's attempt count and,
// if prev has the same fingerprint, carries prev's completed steps, so that
// the new execution resumes after them; a fresh reservation has none. The
// lease ends at leaseUntil and retention at now+retention, or at leaseUntil
// if that is later: a store that deletes expired records by itself (DynamoDB's
// TTL) must never delete a record whose lease lives.
func Reserve(key, fingerprint, token string, prev *Record, now, leaseUntil time.Time, retention time.Duration) Record {
	expires := now.Add(retention)
	if leaseUntil.After(expires) {
		expires = leaseUntil
	}
	return Acquire(Record{
		Key:         key,
		Fingerprint: fingerprint,
		Status:      StatusInProgress,
		LeaseToken:  token,
		LeaseUntil:  leaseUntil,
		ExpiresAt:   expires,
		UpdatedAt:   now,
	}, prev, now)
}

// Succeed returns rec completed as succeeded with result, retained until
// now+retention. Its steps are dropped: the result replaces them.
func Succeed(rec Record, result []byte, now time.Time, retention time.Duration) Record {
	rec.Status = StatusSucceeded
	rec.Steps = nil
	rec.Result = result
	rec.ResultOmitted = false
	rec.Retryable = false
	rec.Error = ""
	rec.LeaseUntil = time.Time{}
	rec.ExpiresAt = now.Add(retention)
	rec.UpdatedAt = now
	return rec
}

// Fail returns rec completed as failed with the message of err; retryable
// says whether a later delivery may execute again. A retryable failure
// keeps its steps, so that its retry resumes after them (Reserve and
// Acquire carry them) while it lives; a permanent failure drops them, like
// a success. A reservation over a record past retention carries none,
// whatever that record holds: a store that re-reserves an expired record
// in place must remove its steps (ddbstore's one-write Acquire does so in
// place only for a record without steps).
func Fail(rec Record, err error, retryable bool, now time.Time, retention time.Duration) Record {
	rec.Status = StatusFailed
	if !retryable {
		rec.Steps = nil
	}
	rec.Result = nil
	rec.ResultOmitted = false
	rec.Retryable = retryable
	rec.Error = ""
	if err != nil {
		rec.Error = err.Error()
	}
	rec.LeaseUntil = time.Time{}
	rec.ExpiresAt = now.Add(retention)
	rec.UpdatedAt = now
	return rec
}

// Replaceable is the takeover rule: a reservation conditioned on prev may
// replace the live stored record at now if stored is still prev (same lease
// token, status and number of steps) and is either in progress with a lease
// that ended by now, or a retryable failure. The number of steps matters
// because a holder's step write may land after the caller read prev (the
// lease had ended by the caller's clock, not by the holder's when it sent
// the write): the reservation, which carries prev's steps, must not erase
// it. A nil prev replaces nothing. memstore applies this function;
// ddbstore's condition expression is its translation and is tested against
// it.
func Replaceable(stored Record, prev *Record, now time.Time) bool {
	if prev == nil || stored.LeaseToken != prev.LeaseToken || stored.Status != prev.Status || len(stored.Steps) != len(prev.Steps) {
		return false
	}
	return stored.Status == StatusInProgress && stored.LeaseExpired(now) ||
		stored.Status == StatusFailed && stored.Retryable
}

// Reservable is the rule of a reservation made on a decision (a store's
// Reserve): it reports whether a reservation decided on prev (nil: on no
// live record, a first attempt) may be written at now over live, the live
// stored record (nil: none, or only one that is Expired at now). Without
// prev it is written only where no live record exists; with prev, only
// over prev itself, still replaceable (Replaceable). A reservation decided
// on prev carries prev's attempt count and, for the same payload, its
// steps: written where prev has gone (an operator's release, a deletion),
// it would start a record lifetime with them. Refused with no live record,
// it is to be decided again (with no prev).
func Reservable(live, prev *Record, now time.Time) bool {
	if prev == nil {
		return live == nil
	}
	return live != nil && Replaceable(*live, prev, now)
}

// SameWrite reports whether stored is the write rec itself (same key, lease
// token, status and attempt): a write retried after its answer was lost,
// which a store answers as it answered the first try. Lease tokens are
// unique per reservation, so no other writer's record matches.
func SameWrite(stored, rec Record) bool {
	return stored.Key == rec.Key && stored.LeaseToken == rec.LeaseToken &&
		stored.Status == rec.Status && stored.Attempts == rec.Attempts
}
