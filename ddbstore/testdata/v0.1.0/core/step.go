package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Step is a recovery point of an execution: a named part of a handler (a
// charge, an email) that completed, with the result it returned. A record
// in progress, or failed retryably, keeps its steps in order, so that the
// execution that takes it over resumes after the last completed step
// instead of from the start.
type Step struct {
	// Name names the step within its execution (see ValidateStepName).
	Name string
	// Result is what the step returned (nil if nothing).
	Result []byte
}

// MaxStepName is the longest step name, in bytes.
const MaxStepName = 64

// ErrInvalidStepName is returned for a step name that is empty, longer than
// MaxStepName or has characters outside [A-Za-z0-9._:-]. Checked with
// errors.Is.
var ErrInvalidStepName = errors.New("idem: invalid step name")

// ValidateStepName checks a step name: 1 to MaxStepName characters of
// [A-Za-z0-9._:-]. Names are constants of the handler's code ("charge",
// "email:receipt"), never data.
func ValidateStepName(name string) error {
	if name == "" || len(name) > MaxStepName {
		return fmt.Errorf("%w: %d bytes, want 1 to %d", ErrInvalidStepName, len(name), MaxStepName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '-'
		if !ok {
			return fmt.Errorf("%w: byte %d is %q, want [A-Za-z0-9._:-]", ErrInvalidStepName, i, c)
		}
	}
	return nil
}

// FindStep returns the step of rec named name, and whether there is one.
func FindStep(rec Record, name string) (Step, bool) {
	for _, s := range rec.Steps {
		if s.Name == name {
			return s, true
		}
	}
	return Step{}, false
}

// StepWrite is what a store does with a step write, as AddStep decides it.
type StepWrite int

const (
	// StepAppend: the store writes the record AddStep returns.
	StepAppend StepWrite = iota + 1
	// StepRecorded: the step is already stored with this result under the
	// caller's lease, a write retried after its answer was lost. The store
	// writes nothing and answers success.
	StepRecorded
	// StepLeaseLost: the stored record is not the caller's in-progress
	// record with a live lease (absent, expired, completed, taken over, or
	// its lease ended). The store writes nothing and answers a lost lease.
	StepLeaseLost
	// StepConflict: the caller's record already holds a step of this name
	// with another result. The store writes nothing and answers an error.
	StepConflict
)

// String names the write for test failures.
func (w StepWrite) String() string {
	switch w {
	case StepAppend:
		return "append"
	case StepRecorded:
		return "recorded"
	case StepLeaseLost:
		return "lease_lost"
	case StepConflict:
		return "conflict"
	}
	return fmt.Sprintf("StepWrite(%d)", int(w))
}

// AddStep is the rule of recording a step: stored (nil if the store has no
// record of the key) gets step appended at now if and only if it is in
// progress, holds the lease token and its lease is live at now (so it is
// not Expired either); a step is recorded once per name. It returns the
// record to write (StepAppend: stored with step appended and UpdatedAt now)
// or what the store answers instead. memstore and redisstore apply this
// rule; ddbstore's update condition is its translation and is tested
// against it.
func AddStep(stored *Record, token string, step Step, now time.Time) (Record, StepWrite) {
	if stored == nil || stored.Status != StatusInProgress || stored.LeaseToken != token || stored.LeaseExpired(now) {
		return Record{}, StepLeaseLost
	}
	if s, ok := FindStep(*stored, step.Name); ok {
		if bytes.Equal(s.Result, step.Result) {
			return Record{}, StepRecorded
		}
		return Record{}, StepConflict
	}
	rec := *stored
	rec.Steps = append(append(make([]Step, 0, len(stored.Steps)+1), stored.Steps...), step)
	rec.UpdatedAt = now
	return rec, StepAppend
}

// carriedSteps returns the steps a reservation over prev inherits: those of
// a live in-progress or retryable failed record of the same fingerprint,
// which the reservation takes over or retries. A copy: records are values.
func carriedSteps(prev *Record, fingerprint string, now time.Time) []Step {
	if prev == nil || len(prev.Steps) == 0 || prev.Expired(now) || prev.Fingerprint != fingerprint {
		return nil
	}
	if prev.Status != StatusInProgress && !(prev.Status == StatusFailed && prev.Retryable) {
		return nil
	}
	return append([]Step(nil), prev.Steps...)
}

// DownstreamKey returns a stable key for an external API call named name
// made on behalf of the idempotency key key: 32 lowercase hex characters,
// the first 128 bits of SHA-256 over a domain-separated, length-prefixed
// encoding of both, so that ("a", "bc") and ("ab", "c") differ. Every
// execution of the key (retries, takeovers, redeliveries) gets the same
// downstream key, and different names or keys get different ones. It fits
// the usual limits: AWS ClientToken (64 ASCII), Stripe (255), most mail and
// ticketing APIs.
func DownstreamKey(key, name string) string {
	d := downstreamDigest("idem/downstream-key/v1", key, name)
	return hex.EncodeToString(d[:16])
}

// DownstreamUUID returns a stable UUID for an external API that accepts
// only UUIDs as idempotency keys, derived as DownstreamKey is (under
// another domain label): an RFC 9562 version 8 UUID (the name-based
// SHA-256 layout of its appendix B.2: the first 128 bits of the digest with
// the version and variant bits set), formatted 8-4-4-4-12 in lowercase hex.
func DownstreamUUID(key, name string) string {
	d := downstreamDigest("idem/downstream-uuid/v1", key, name)
	u := d[:16]
	u[6] = u[6]&0x0f | 0x80 // version 8
	u[8] = u[8]&0x3f | 0x80 // variant 10
	h := hex.EncodeToString(u)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// downstreamDigest is SHA-256 over label and then key and name, each
// preceded by its length as 8 bytes big-endian.
func downstreamDigest(label, key, name string) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	for _, part := range []string{label, key, name} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}
