package idem

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/idemgo/idem/core"
)

// Verdict is what happened to one call of Runner.Do, or to one event a
// wrapper decided without Do or after it (Runner.Report). It is the one
// vocabulary of idem's logs, the wrappers' answers, metrics and benchmarks:
// Outcome.Verdict carries it, VerdictOf derives it from an error, String
// gives the name every log and metric uses, and Level the level of its log
// record. The zero value is VerdictUnknown.
type Verdict int

const (
	// VerdictUnknown is the zero Verdict: no call was made.
	VerdictUnknown Verdict = iota
	// Executed: the handler ran and its success was recorded.
	Executed
	// Replayed: a recorded success was returned; the handler did not run.
	Replayed
	// ReplayedFailure: a recorded permanent failure was returned
	// (*core.FailureError with Replayed set); the handler did not run.
	ReplayedFailure
	// InProgress: another execution holds a live lease (*core.InProgressError).
	InProgress
	// KeyReused: the key was recorded with another payload (core.ErrKeyReused).
	KeyReused
	// InvalidKey: the key is missing or malformed (core.ErrInvalidKey).
	InvalidKey
	// InvalidPayload: the payload is not acceptable: not JSON where JSON is
	// required, or larger than where it goes accepts (core.ErrInvalidPayload).
	InvalidPayload
	// RetriesExhausted: the key's attempts are used up (core.ErrRetriesExhausted).
	RetriesExhausted
	// FailedPermanently: the handler failed permanently (*core.FailureError); the
	// failure was recorded unless the error also wraps
	// ErrOutcomeNotRecorded.
	FailedPermanently
	// FailedTransiently: the handler failed transiently (ErrTransientFailure):
	// the failure was recorded as retryable, or, if that write failed, the
	// key stays in progress until its lease ends; for an error marked
	// core.MarkNoRecord, the reservation was released instead. Either way a
	// later delivery runs again. See also FailedUnclassified.
	FailedTransiently
	// OutcomeNotRecorded: the handler succeeded but its success could not
	// be recorded, or may have been (ErrOutcomeNotRecorded, ErrLeaseLost):
	// whether the store applied the write is not known, the store failed
	// for itself (unavailable, throttled) rather than refusing what the
	// success commits (see CommitRefused), or the lease was lost. The
	// handler's work outside the store is done; the key stays in progress
	// until its lease ends.
	OutcomeNotRecorded
	// StoreFailed: the store failed before the handler ran; nothing was
	// recorded and the handler did not run.
	StoreFailed

	// The verdicts below are reached by a wrapper (the Lambda wrappers,
	// the net/http middleware), without Do or after it, and reported with
	// Runner.Report or an Annotation.

	// MissingKey: the event carries no key where one is required (a key
	// source that finds nothing in a message, a request without an
	// Idempotency-Key header); the handler did not run and nothing was
	// stored.
	MissingKey
	// NotStarted: a batch wrapper did not start the record, because less
	// than its safety margin was left before the invocation's deadline, or
	// the invocation's context had ended; it is reported for redelivery.
	NotStarted
	// Blocked: a batch wrapper did not start the record, because an
	// earlier record of its ordered lane (a FIFO message group, a stream
	// shard) did not succeed; it comes back after that one.
	Blocked
	// Panicked: the handler panicked and the wrapper recovered it; the key
	// stays in progress until its lease ends.
	Panicked
	// ReplayOmitted: a recorded success was found, but its result had been
	// too large to keep (Outcome.ResultOmitted): the handler did not run
	// and the wrapper has no result to answer with.
	ReplayOmitted
	// ReplayCorrupt: a recorded success was found, but the wrapper cannot
	// decode its result (another type, a format it does not know): the
	// handler did not run.
	ReplayCorrupt
	// Unkeyed: the request had no key and the wrapper let it through to
	// the handler unprotected, as configured (the HTTP wrappers'
	// WithOptionalKey); nothing was stored.
	Unkeyed
	// Unauthorized: an HTTP request was refused for its credentials: a
	// webhook's signature missing or invalid (WithWebhook; 401, before
	// anything was read or written), or the handler's own 401 or 403
	// answer (not stored: the reservation is released, so the next
	// delivery runs).
	Unauthorized

	// Verdicts added since are appended here, whatever reaches them, so
	// that every other verdict keeps its value.

	// CommitRefused: the handler succeeded, but the store refused to
	// commit its success and certainly wrote nothing (ErrCommitRefused):
	// the writes it staged were refused as a whole, or its result could
	// not be kept. A retryable failure is recorded in its place under the
	// call's lease (if that write fails too, the key stays in progress
	// until its lease ends); the next delivery runs the handler again.
	// Batch wrappers report it; HTTP wrappers answer 503.
	CommitRefused
	// FailedUnclassified: the handler failed with an error that no mark
	// and no classifier knows (ErrUnclassifiedFailure; core.Unclassified),
	// such as a plain errors.New: not retried in the call, recorded as a
	// retryable failure (or, if that write failed, the key stays in
	// progress until its lease ends), so that a later delivery runs again,
	// as for FailedTransiently. Logged at ERROR: the error may be a bug,
	// and says what it is to nobody; classify it (core.MarkTransient,
	// core.MarkPermanent, idem.WithClassifiers).
	FailedUnclassified
)

var verdictNames = [...]string{
	VerdictUnknown:     "unknown",
	Executed:           "executed",
	Replayed:           "replayed",
	ReplayedFailure:    "replayed_failure",
	InProgress:         "in_progress",
	KeyReused:          "key_reused",
	InvalidKey:         "invalid_key",
	InvalidPayload:     "invalid_payload",
	RetriesExhausted:   "retries_exhausted",
	FailedPermanently:  "failed_permanently",
	FailedTransiently:  "failed_transiently",
	OutcomeNotRecorded: "outcome_not_recorded",
	StoreFailed:        "store_failed",
	MissingKey:         "missing_key",
	NotStarted:         "not_started",
	Blocked:            "blocked",
	Panicked:           "panicked",
	ReplayOmitted:      "replay_omitted",
	ReplayCorrupt:      "replay_corrupt",
	Unkeyed:            "unkeyed",
	Unauthorized:       "unauthorized",
	CommitRefused:      "commit_refused",
	FailedUnclassified: "failed_unclassified",
}

// String returns the verdict's snake_case name, as logs and metrics use it.
func (v Verdict) String() string {
	if v >= 0 && int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Verdicts lists every verdict but VerdictUnknown, in order (for metrics
// and reports that want a row for each).
func Verdicts() []Verdict {
	out := make([]Verdict, 0, len(verdictNames)-1)
	for v := Executed; int(v) < len(verdictNames); v++ {
		out = append(out, v)
	}
	return out
}

// Ran reports whether the handler ran in the call (executed or failed, with
// or without a recorded outcome, its commit refused, panicked, or ran
// unkeyed).
func (v Verdict) Ran() bool {
	switch v {
	case Executed, FailedPermanently, FailedTransiently, FailedUnclassified, OutcomeNotRecorded, Panicked, Unkeyed, CommitRefused:
		return true
	}
	return false
}

// Level is the level of the log record of a call with verdict v:
//   - slog.LevelInfo: the event was handled (Executed, Replayed, Unkeyed);
//   - slog.LevelError: the handler failed for good, or with an error
//     nobody classified, or idem could not record or read back what it
//     did, and someone must look (FailedPermanently, FailedUnclassified,
//     RetriesExhausted, OutcomeNotRecorded, CommitRefused, Panicked,
//     ReplayCorrupt);
//   - slog.LevelWarn: every other verdict: the event was not handled now,
//     and comes back (a store failure, StoreFailed, included), was a
//     duplicate, or was refused as it was sent.
//
// So the default logger (DefaultLogger, from WARN up) records every call
// that was neither executed nor replayed. The runner logs a store error
// that wraps ErrMisconfigured at ERROR, whatever its verdict.
func (v Verdict) Level() slog.Level {
	switch v {
	case Executed, Replayed, Unkeyed:
		return slog.LevelInfo
	case FailedPermanently, FailedUnclassified, RetriesExhausted, OutcomeNotRecorded, CommitRefused, Panicked, ReplayCorrupt:
		return slog.LevelError
	}
	return slog.LevelWarn
}

// VerdictOf returns the verdict an error returned by Runner.Do implies.
// A nil error implies Executed or Replayed, which only Outcome.Verdict tells
// apart: VerdictOf(nil) is VerdictUnknown. A handler failure whose record
// could not be written keeps its failure's verdict (a transient failure
// stays one to retry); OutcomeNotRecorded is the verdict of a success that
// could not be recorded, or may have been, and CommitRefused that of a
// success whose commit the store refused, certainly writing nothing.
func VerdictOf(err error) Verdict {
	var fe *core.FailureError
	switch {
	case err == nil:
		return VerdictUnknown
	case errors.Is(err, core.ErrInvalidKey):
		return InvalidKey
	case errors.Is(err, core.ErrInvalidPayload):
		return InvalidPayload
	case errors.Is(err, core.ErrKeyReused):
		return KeyReused
	case errors.Is(err, core.ErrInProgress):
		return InProgress
	case errors.Is(err, ErrCommitRefused):
		return CommitRefused
	case errors.Is(err, ErrTransientFailure):
		return FailedTransiently
	case errors.Is(err, ErrUnclassifiedFailure):
		return FailedUnclassified
	case errors.Is(err, core.ErrRetriesExhausted):
		return RetriesExhausted
	case errors.As(err, &fe) && fe.Replayed:
		return ReplayedFailure
	case errors.As(err, &fe):
		return FailedPermanently
	case errors.Is(err, ErrOutcomeNotRecorded) || errors.Is(err, ErrLeaseLost):
		return OutcomeNotRecorded
	}
	return StoreFailed
}
