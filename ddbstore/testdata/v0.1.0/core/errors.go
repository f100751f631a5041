package core

import "errors"

// Sentinel errors of the decision table, checked with errors.Is.
var (
	// ErrInvalidKey is returned for a key that is missing, too short, too
	// long or has characters outside [A-Za-z0-9:_-].
	ErrInvalidKey = errors.New("idem: invalid idempotency key")
	// ErrInvalidPayload is returned for a payload that is not valid JSON.
	ErrInvalidPayload = errors.New("idem: invalid payload")
	// ErrKeyReused is returned when a key arrives with a payload whose
	// fingerprint differs from the stored one. The handler does not run.
	ErrKeyReused = errors.New("idem: key reused with another payload")
	// ErrInProgress is returned while another execution holds a live lease
	// on the key. Retry after the lease ends.
	ErrInProgress = errors.New("idem: execution in progress")
	// ErrPermanentFailure is returned for a permanent handler failure, new
	// or replayed.
	ErrPermanentFailure = errors.New("idem: permanent failure")
	// ErrRetriesExhausted is returned when transient failures have used up
	// the attempts allowed for a key.
	ErrRetriesExhausted = errors.New("idem: retries exhausted")
)
