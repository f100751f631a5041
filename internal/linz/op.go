package linz

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/idemgo/idem/core"
)

// Kind names a store operation: a method of idem.Store or of one of its
// optional capabilities, or Effects.
type Kind string

// The operations the model knows.
const (
	// Reserve is idem.Store.Reserve(Rec, Prev, Now).
	Reserve Kind = "reserve"
	// Acquire is idem.Acquirer.Acquire(Rec, Now, Policy).
	Acquire Kind = "acquire"
	// Complete is idem.Store.Complete(Rec).
	Complete Kind = "complete"
	// CompleteStaged is idem.StagedCompleter.CompleteStaged(Rec) with one
	// staged write that adds 1 to the key's effect counter.
	CompleteStaged Kind = "complete_staged"
	// RecordStep is idem.StepRecorder.RecordStep(Key, Token, Step, Now).
	RecordStep Kind = "record_step"
	// RenewLease is idem.LeaseRenewer.RenewLease(Rec, Until, Now).
	RenewLease Kind = "renew_lease"
	// Release is idem.Releaser.Release(Rec).
	Release Kind = "release"
	// Get is idem.Store.Get(Key, Now).
	Get Kind = "get"
	// Effects reads the key's effect counter: the staged writes of
	// CompleteStaged applied so far.
	Effects Kind = "effects"
)

// Op is one call of a store: its kind and arguments. Only the fields its
// Kind uses are set. Ops are values; nothing changes them once made.
type Op struct {
	Kind Kind
	// Key is the record's key, for every kind.
	Key string
	// Rec is the record argument: the reservation (Reserve, Acquire), the
	// outcome (Complete, CompleteStaged), the caller's record (RenewLease)
	// or the record read (Release).
	Rec core.Record `json:",omitzero"`
	// Prev is Reserve's prev (nil for a first attempt).
	Prev *core.Record `json:",omitempty"`
	// Now is the caller's time (Reserve, Acquire, RecordStep, RenewLease, Get).
	Now time.Time `json:",omitzero"`
	// Until is the end of the renewed lease (RenewLease).
	Until time.Time `json:",omitzero"`
	// Policy is Acquire's policy.
	Policy core.Policy `json:",omitzero"`
	// Token and Step are RecordStep's lease token and step.
	Token string    `json:",omitempty"`
	Step  core.Step `json:",omitzero"`
}

// Verdict is the class of a store's answer.
type Verdict string

// The answers a store gives.
const (
	// OK: the call succeeded (nil error).
	OK Verdict = "ok"
	// Conflict: a *idem.ConflictError; Result.Rec is its Existing record.
	Conflict Verdict = "conflict"
	// LeaseLost: an error wrapping idem.ErrLeaseLost.
	LeaseLost Verdict = "lease_lost"
	// NotFound: an error wrapping idem.ErrNotFound.
	NotFound Verdict = "not_found"
	// StepConflict: an error wrapping idem.ErrStepConflict.
	StepConflict Verdict = "step_conflict"
	// RecordChanged: an error wrapping idem.ErrRecordChanged.
	RecordChanged Verdict = "record_changed"
	// Unknown: a transient failure of the store (a timeout, a lost answer,
	// throttling). The write may or may not have been applied; a history
	// gives the operation no end (it may take effect at any time after its
	// call, or never).
	Unknown Verdict = "unknown"
	// Failed: any other error. The contract has no such answer for the
	// calls the checks make, so the model never expects it.
	Failed Verdict = "failed"
)

// Result is a store's answer to an Op.
type Result struct {
	Verdict Verdict
	// Rec is the record answered: Acquire's acquired record, the stored
	// record of Complete, CompleteStaged and RenewLease, Get's record, or
	// the blocking record of a Conflict.
	Rec *core.Record `json:",omitempty"`
	// Prev is the live record Acquire replaced (nil if none).
	Prev *core.Record `json:",omitempty"`
	// Count is Effects' counter.
	Count int `json:",omitempty"`
	// Err is the error's text (empty for OK), for reports.
	Err string `json:",omitempty"`
}

// Matches reports whether got is the answer r describes: the same verdict
// and the same records (SameRecord) and count.
func (r Result) Matches(got Result) bool {
	return r.Verdict == got.Verdict && sameOptional(r.Rec, got.Rec) &&
		sameOptional(r.Prev, got.Prev) && r.Count == got.Count
}

func sameOptional(a, b *core.Record) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return SameRecord(*a, *b)
}

// SameRecord reports whether a and b are the same record: every field
// equal, times compared as instants and byte slices by content (nil and
// empty alike).
func SameRecord(a, b core.Record) bool {
	return a.Key == b.Key && a.Fingerprint == b.Fingerprint && a.Status == b.Status &&
		a.LeaseToken == b.LeaseToken && a.LeaseUntil.Equal(b.LeaseUntil) &&
		a.ExpiresAt.Equal(b.ExpiresAt) && a.Attempts == b.Attempts &&
		bytes.Equal(a.Result, b.Result) && a.ResultOmitted == b.ResultOmitted &&
		a.Retryable == b.Retryable && a.Error == b.Error && a.UpdatedAt.Equal(b.UpdatedAt) &&
		sameSteps(a.Steps, b.Steps)
}

func sameSteps(a, b []core.Step) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Result, b[i].Result) {
			return false
		}
	}
	return true
}

// describer writes ops, results and records for reports, with times
// relative to base.
type describer struct{ base time.Time }

func (d describer) at(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return "+" + t.Sub(d.base).String()
}

func (d describer) record(r *core.Record) string {
	if r == nil {
		return "none"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s tok=%s fp=%.6s att=%d", r.Status, r.LeaseToken, r.Fingerprint, r.Attempts)
	if r.Status == core.StatusInProgress {
		fmt.Fprintf(&b, " lease=%s", d.at(r.LeaseUntil))
	}
	fmt.Fprintf(&b, " exp=%s upd=%s", d.at(r.ExpiresAt), d.at(r.UpdatedAt))
	if r.Status == core.StatusFailed {
		fmt.Fprintf(&b, " retryable=%v", r.Retryable)
	}
	if r.Result != nil || r.ResultOmitted {
		fmt.Fprintf(&b, " result=%q omitted=%v", r.Result, r.ResultOmitted)
	}
	if len(r.Steps) > 0 {
		names := make([]string, len(r.Steps))
		for i, s := range r.Steps {
			names[i] = s.Name + "=" + string(s.Result)
		}
		fmt.Fprintf(&b, " steps=[%s]", strings.Join(names, " "))
	}
	return b.String()
}

func (d describer) op(op Op) string {
	switch op.Kind {
	case Reserve:
		return fmt.Sprintf("reserve(%s, prev=%s, now=%s)", d.record(&op.Rec), d.record(op.Prev), d.at(op.Now))
	case Acquire:
		return fmt.Sprintf("acquire(%s, now=%s, max=%d)", d.record(&op.Rec), d.at(op.Now), op.Policy.AttemptLimit())
	case Complete, CompleteStaged:
		return fmt.Sprintf("%s(%s)", op.Kind, d.record(&op.Rec))
	case RecordStep:
		return fmt.Sprintf("record_step(tok=%s, %s=%s, now=%s)", op.Token, op.Step.Name, op.Step.Result, d.at(op.Now))
	case RenewLease:
		return fmt.Sprintf("renew_lease(tok=%s, until=%s, now=%s)", op.Rec.LeaseToken, d.at(op.Until), d.at(op.Now))
	case Release:
		return fmt.Sprintf("release(%s)", d.record(&op.Rec))
	case Get:
		return fmt.Sprintf("get(now=%s)", d.at(op.Now))
	case Effects:
		return "effects()"
	}
	return fmt.Sprintf("%s?", op.Kind)
}

func (d describer) result(r Result) string {
	var b strings.Builder
	b.WriteString(string(r.Verdict))
	if r.Rec != nil {
		fmt.Fprintf(&b, " %s", d.record(r.Rec))
	}
	if r.Prev != nil {
		fmt.Fprintf(&b, " prev=%s", d.record(r.Prev))
	}
	if r.Count != 0 {
		fmt.Fprintf(&b, " count=%d", r.Count)
	}
	if r.Err != "" && r.Verdict != OK {
		fmt.Fprintf(&b, " (%s)", r.Err)
	}
	return b.String()
}
