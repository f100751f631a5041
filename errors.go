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
	// ErrUnclassifiedFailure: the handler failed with an error that no
	// mark and no classifier knows (core.Unclassified: an ordinary error).
	// It was not retried in the call; the record allows a later delivery
	// to execute again. Mark or classify the error (core.MarkPermanent,
	// core.MarkTransient, WithClassifiers) to say what it is, or make such
	// errors permanent with WithUnclassifiedPermanent.
	ErrUnclassifiedFailure = errors.New("idem: unclassified handler error, not retried in the call; a later delivery runs again")
	// ErrOutcomeNotRecorded: the handler finished but its outcome could not
	// be written to the store within the deadline. The key stays in
	// progress until its lease ends; then a later delivery takes it over
	// and runs the handler again.
	ErrOutcomeNotRecorded = errors.New("idem: outcome not recorded")
	// ErrCommitRefused: the store refused the commit of a handler's
	// success, and certainly wrote nothing: the writes the handler staged
	// (StagedCompleter) were refused as a whole (a conflicting
	// transaction after the completion's retries, a staged table that does
	// not exist, access denied to a staged write), or its result could not
	// be kept (a large result the blob store refused). Stores wrap it in
	// the errors of Complete and CompleteStaged that say so. The runner
	// records a retryable failure in its place, under the call's lease, so
	// that the next delivery runs the handler again, and Do returns an
	// error wrapping it (verdict CommitRefused). Checked with errors.Is.
	ErrCommitRefused = errors.New("idem: commit refused, nothing written")
)
