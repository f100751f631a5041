package idem

import (
	"errors"
	"fmt"

	"github.com/idemgo/idem/core"
)

// Verdict is what happened to one call of Runner.Do. It is the one
// vocabulary of idem's logs, the wrappers' answers, metrics and benchmarks:
// Outcome.Verdict carries it, VerdictOf derives it from an error, and
// String gives the name every log and metric uses. The zero value is
// VerdictUnknown.
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
	// InvalidPayload: the payload is not acceptable JSON (core.ErrInvalidPayload).
	InvalidPayload
	// RetriesExhausted: the key's attempts are used up (core.ErrRetriesExhausted).
	RetriesExhausted
	// FailedPermanently: the handler failed permanently (*core.FailureError); the
	// failure was recorded unless the error also wraps
	// ErrOutcomeNotRecorded.
	FailedPermanently
	// FailedTransiently: the handler failed transiently (ErrTransientFailure):
	// the failure was recorded as retryable, or, if that write failed, the
	// key stays in progress until its lease ends; either way a later
	// delivery runs again.
	FailedTransiently
	// OutcomeNotRecorded: the handler succeeded but its success could not
	// be recorded (ErrOutcomeNotRecorded, ErrLeaseLost).
	OutcomeNotRecorded
	// StoreFailed: the store failed before the handler ran; nothing was
	// recorded and the handler did not run.
	StoreFailed
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
// or without a recorded outcome).
func (v Verdict) Ran() bool {
	return v == Executed || v == FailedPermanently || v == FailedTransiently || v == OutcomeNotRecorded
}

// VerdictOf returns the verdict an error returned by Runner.Do implies.
// A nil error implies Executed or Replayed, which only Outcome.Verdict tells
// apart: VerdictOf(nil) is VerdictUnknown. A handler failure whose record
// could not be written keeps its failure's verdict (a transient failure
// stays one to retry); OutcomeNotRecorded is the verdict of a success that
// could not be recorded.
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
	case errors.Is(err, ErrTransientFailure):
		return FailedTransiently
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
