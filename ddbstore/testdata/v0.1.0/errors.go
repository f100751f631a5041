package idem

import (
	"errors"
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
