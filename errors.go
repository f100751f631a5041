package idem

import (
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem/core"
)

// Errors of the runner, checked with errors.Is.
var (
	// ErrTransientFailure: the handler failed transiently and the deadline
	// or the per-call attempt limit left no room for another try; the
	// record allows a later delivery to execute again.
	ErrTransientFailure = errors.New("idem: transient failure, retry later")
	// ErrOutcomeNotRecorded: the handler finished but its outcome could not
	// be written to the store within the deadline. The key stays in
	// progress until its lease ends; then a later delivery takes it over
	// and runs the handler again.
	ErrOutcomeNotRecorded = errors.New("idem: outcome not recorded")
)

// InProgressError is returned while another execution holds a live lease on
// the key. errors.Is(err, ErrInProgress) holds for it.
type InProgressError struct {
	// RetryAt is when the blocking lease ends: retrying earlier is refused.
	RetryAt time.Time
}

// Error describes the wait.
func (e *InProgressError) Error() string {
	return fmt.Sprintf("idem: execution in progress, retry after %s", e.RetryAt.UTC().Format(time.RFC3339Nano))
}

// Is reports whether target is ErrInProgress.
func (e *InProgressError) Is(target error) bool { return target == core.ErrInProgress }

// FailureError is a permanent handler failure, new or replayed; see
// core.FailureError. errors.Is(err, ErrPermanentFailure) holds for it.
type FailureError = core.FailureError
