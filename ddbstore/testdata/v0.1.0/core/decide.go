package core

import (
	"fmt"
	"time"
)

// Action is what a Decision tells the caller to do.
type Action int

const (
	// Execute: reserve the key (or take it over) and run the handler.
	Execute Action = iota + 1
	// Replay: return the stored outcome without running the handler.
	Replay
	// InProgress: another execution holds a live lease; retry at RetryAt.
	InProgress
	// Reject: refuse the call with Decision.Err.
	Reject
)

// String returns the action's lower-case name.
func (a Action) String() string {
	switch a {
	case Execute:
		return "execute"
	case Replay:
		return "replay"
	case InProgress:
		return "in_progress"
	case Reject:
		return "reject"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Policy holds the limits a decision depends on. The zero value allows one
// attempt per key.
type Policy struct {
	// MaxAttempts bounds the executions of one key across deliveries,
	// counting in-process retries and executions whose holder crashed.
	// Values below 1 mean 1.
	MaxAttempts int
}

func (p Policy) maxAttempts() int {
	if p.MaxAttempts < 1 {
		return 1
	}
	return p.MaxAttempts
}

// Decision is the outcome of Decide.
type Decision struct {
	// Action is what to do.
	Action Action
	// Err is, for Reject, an error wrapping ErrInvalidKey, ErrKeyReused or
	// ErrRetriesExhausted; for a replayed permanent failure (Action Replay
	// with a failed record), an error wrapping ErrPermanentFailure; for
	// InProgress, an *InProgressError. Nil otherwise.
	Err error
	// Takeover reports, for Execute, that an expired lease is taken over.
	Takeover bool
	// Attempt is, for Execute, the number the new execution will have.
	Attempt int
	// RetryAt is, for InProgress, when the blocking lease ends.
	RetryAt time.Time
	// Prev is the live stored record the decision was made on, if any; the
	// reservation of an Execute decision must be conditioned on it.
	Prev *Record
}

// Decide applies the decision table to a call for key with the given
// fingerprint at now, given the stored record (nil if there is none). A
// record past retention counts as absent. Decide never panics and never
// replays a record whose fingerprint differs.
func Decide(key string, rec *Record, fingerprint string, now time.Time, p Policy) Decision {
	if err := ValidateKey(key); err != nil {
		return Decision{Action: Reject, Err: err}
	}
	if rec == nil || rec.Expired(now) {
		return Decision{Action: Execute, Attempt: 1}
	}
	if rec.Fingerprint != fingerprint {
		return Decision{Action: Reject, Err: ErrKeyReused, Prev: rec}
	}
	switch rec.Status {
	case StatusInProgress:
		if !rec.LeaseExpired(now) {
			return Decision{Action: InProgress, Err: &InProgressError{RetryAt: rec.LeaseUntil}, RetryAt: rec.LeaseUntil, Prev: rec}
		}
		// The holder crashed or timed out, which is no handler verdict, but
		// its attempt counts: a key that keeps crashing its holder stops at
		// the bound like one that keeps failing.
		if rec.Attempts >= p.maxAttempts() {
			return Decision{Action: Reject, Err: fmt.Errorf("%w after %d attempts: the last holder's lease ended without an outcome", ErrRetriesExhausted, rec.Attempts), Prev: rec}
		}
		return Decision{Action: Execute, Takeover: true, Attempt: rec.Attempts + 1, Prev: rec}
	case StatusSucceeded:
		return Decision{Action: Replay, Prev: rec}
	case StatusFailed:
		if !rec.Retryable {
			return Decision{Action: Replay, Err: &FailureError{Message: rec.Error, Attempts: rec.Attempts, Replayed: true}, Prev: rec}
		}
		if rec.Attempts >= p.maxAttempts() {
			return Decision{Action: Reject, Err: fmt.Errorf("%w after %d attempts: %s", ErrRetriesExhausted, rec.Attempts, rec.Error), Prev: rec}
		}
		return Decision{Action: Execute, Attempt: rec.Attempts + 1, Prev: rec}
	}
	return Decision{Action: Reject, Err: fmt.Errorf("%w: stored record has unknown status %q", ErrPermanentFailure, rec.Status), Prev: rec}
}

// InProgressError is the answer while another execution holds a live lease
// on the key. errors.Is(err, ErrInProgress) holds for it.
type InProgressError struct {
	// RetryAt is when the blocking lease ends: retrying earlier is refused.
	RetryAt time.Time
}

// Error describes the wait.
func (e *InProgressError) Error() string {
	return fmt.Sprintf("idem: execution in progress, retry after %s", e.RetryAt.UTC().Format(time.RFC3339Nano))
}

// Is reports whether target is ErrInProgress.
func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }

// FailureError is a permanent handler failure, new or replayed from the
// store. errors.Is(err, ErrPermanentFailure) holds for it.
type FailureError struct {
	// Message is the handler error's message, as stored.
	Message string
	// Attempts is the number of executions made for the key.
	Attempts int
	// Replayed reports that the failure was read from the store rather
	// than produced by this call's execution.
	Replayed bool
	// Err is the handler's error for a new failure (nil when replayed).
	Err error
}

// Error returns the failure's message.
func (e *FailureError) Error() string {
	if e.Replayed {
		return fmt.Sprintf("idem: permanent failure (replayed, %d attempts): %s", e.Attempts, e.Message)
	}
	return fmt.Sprintf("idem: permanent failure (%d attempts): %s", e.Attempts, e.Message)
}

// Is reports whether target is ErrPermanentFailure.
func (e *FailureError) Is(target error) bool { return target == ErrPermanentFailure }

// Unwrap returns the handler's error of a new failure.
func (e *FailureError) Unwrap() error { return e.Err }
