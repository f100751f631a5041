package linz

import (
	"time"

	"github.com/idemgo/idem/core"
)

// Resolution is how finely a store keeps a record's times. Zero fields are
// exact. A store rounds an end up (never earlier than the record's) and the
// time of a write down: ddbstore keeps retention in epoch seconds and leases
// and updates in milliseconds, redisstore all three in milliseconds.
type Resolution struct {
	// Expiry is the step of ExpiresAt, rounded up.
	Expiry time.Duration
	// Lease is the step of LeaseUntil, rounded up.
	Lease time.Duration
	// Update is the step of UpdatedAt, rounded down.
	Update time.Duration
}

// Normalize returns rec with its times at the resolution r, as the store
// keeps and returns them. Zero times stay zero.
func (r Resolution) Normalize(rec core.Record) core.Record {
	rec.ExpiresAt = ceil(rec.ExpiresAt, r.Expiry)
	rec.LeaseUntil = ceil(rec.LeaseUntil, r.Lease)
	if !rec.UpdatedAt.IsZero() && r.Update > 0 {
		rec.UpdatedAt = time.Unix(0, rec.UpdatedAt.UnixNano()/int64(r.Update)*int64(r.Update))
	}
	return rec
}

func ceil(t time.Time, step time.Duration) time.Time {
	if t.IsZero() || step <= 0 {
		return t
	}
	n := t.UnixNano()
	q := n / int64(step) * int64(step)
	if q < n {
		q += int64(step)
	}
	return time.Unix(0, q)
}

// State is the model's state of one key: the stored record (nil when
// there is none: never written, or released) and the number of staged
// writes applied. A stored record past its retention is kept: it counts as
// absent (core.Record.Expired) but Release still deletes it, as the
// contract says. States are values; Step never changes its argument.
type State struct {
	Rec     *core.Record
	Effects int
}

// Equal reports whether s and o are the same state.
func (s State) Equal(o State) bool {
	return s.Effects == o.Effects && sameOptional(s.Rec, o.Rec)
}

// Model is the sequential specification of the store contract (idem.Store
// and its optional capabilities), written with core's rules: each Op's
// answer and the record it leaves are what core.Record.Expired,
// core.SameWrite, core.Reservable, core.Acquirable, core.Acquire,
// core.Acquired, core.AddStep, core.Renewable, core.Renewed and core.Renew
// say, as the method docs of idem.Store, idem.Acquirer, idem.StepRecorder,
// idem.LeaseRenewer, idem.Releaser and idem.StagedCompleter state. Records
// are stored at the store's Resolution. The zero value is the model of a
// store that keeps times exactly (memstore).
type Model struct {
	Res Resolution
	// LostAnswers allows the answers of a store that recovers its own
	// write after losing its answer (a read finds the write applied), as
	// the contract allows: such an Acquire returns the acquired record
	// with a nil prev, since the store no longer knows what it replaced
	// (idem.Acquirer). Set it when faults are injected.
	LostAnswers bool
	// StepsApart allows the answers of a store that keeps steps apart from
	// the record (ddbstore's step items) and reads them for a record that
	// blocks a reservation only where the caller may resume it, as the
	// contract allows: the record of a Conflict may come without its steps
	// (Steps nil) unless op is a Reserve that may resume it
	// (core.Resumable). An Acquire that may resume a record is not refused
	// by it.
	StepsApart bool
}

// Accepts reports whether got is an answer the store may give to op when
// the model answers want.
func (m Model) Accepts(op Op, want, got Result) bool {
	if m.LostAnswers && op.Kind == Acquire && got.Prev == nil {
		want.Prev = nil
	}
	if m.StepsApart && want.Verdict == Conflict && want.Rec != nil && got.Rec != nil && got.Rec.Steps == nil &&
		(op.Kind != Reserve || !core.Resumable(want.Rec, op.Rec.Fingerprint, op.Now)) {
		rec := *want.Rec
		rec.Steps = nil
		want.Rec = &rec
	}
	return want.Matches(got)
}

// Step returns the answer a store in state s gives to op, and the state it
// leaves.
func (m Model) Step(s State, op Op) (Result, State) {
	switch op.Kind {
	case Reserve:
		return m.reserve(s, op)
	case Acquire:
		return m.acquire(s, op)
	case Complete, CompleteStaged:
		return m.complete(s, op)
	case RecordStep:
		return m.recordStep(s, op)
	case RenewLease:
		return m.renew(s, op)
	case Release:
		return release(s, op)
	case Get:
		if s.Rec == nil || s.Rec.Expired(op.Now) {
			return Result{Verdict: NotFound}, s
		}
		return ok(s.Rec), s
	case Effects:
		return Result{Verdict: OK, Count: s.Effects}, s
	}
	return Result{Verdict: Failed, Err: "unknown operation " + string(op.Kind)}, s
}

// live returns the stored record if it is live at now (not Expired).
func (s State) live(now time.Time) *core.Record {
	if s.Rec == nil || s.Rec.Expired(now) {
		return nil
	}
	return s.Rec
}

func ok(rec *core.Record) Result { return Result{Verdict: OK, Rec: rec} }

func (s State) with(rec core.Record) State {
	s.Rec = &rec
	return s
}

// reserve: Reserve writes op.Rec where core.Reservable allows it: without
// Prev, if no live record exists; with Prev, if the live record is still
// Prev and replaceable. The live record that is op.Rec itself is a retried
// write (nil); any other blocks it; with Prev and no live record, the
// record changed (Prev went).
func (m Model) reserve(s State, op Op) (Result, State) {
	rec := m.Res.Normalize(op.Rec)
	cur := s.live(op.Now)
	switch {
	case cur != nil && core.SameWrite(*cur, rec):
		return Result{Verdict: OK}, s
	case core.Reservable(cur, op.Prev, op.Now):
		return Result{Verdict: OK}, s.with(rec)
	case cur != nil:
		return Result{Verdict: Conflict, Rec: cur}, s
	}
	return Result{Verdict: RecordChanged}, s
}

// acquire: Acquire writes core.Acquire of op.Rec over the live record if
// core.Acquirable allows it, and answers it with the record it replaced; a
// live record that is op.Rec itself (core.Acquired) is a retried write.
func (m Model) acquire(s State, op Op) (Result, State) {
	cur := s.live(op.Now)
	if cur != nil {
		if core.Acquired(*cur, op.Rec) {
			return ok(cur), s
		}
		if !core.Acquirable(cur, op.Rec.Fingerprint, op.Now, op.Policy) {
			return Result{Verdict: Conflict, Rec: cur}, s
		}
	}
	rec := m.Res.Normalize(core.Acquire(op.Rec, cur, op.Now))
	return Result{Verdict: OK, Rec: &rec, Prev: cur}, s.with(rec)
}

// complete: Complete (and CompleteStaged, which also applies its staged
// write) replaces the caller's in-progress record that is not Expired at
// the completion's time; the stored record that is this outcome is a
// retried write, answered with the stored record.
func (m Model) complete(s State, op Op) (Result, State) {
	rec := m.Res.Normalize(op.Rec)
	cur := s.Rec
	if cur != nil && core.SameWrite(*cur, rec) {
		return ok(cur), s
	}
	if cur == nil || cur.Expired(rec.UpdatedAt) || cur.Status != core.StatusInProgress || cur.LeaseToken != rec.LeaseToken {
		return Result{Verdict: LeaseLost}, s
	}
	next := s.with(rec)
	if op.Kind == CompleteStaged {
		next.Effects++
	}
	return ok(next.Rec), next
}

// recordStep is core.AddStep.
func (m Model) recordStep(s State, op Op) (Result, State) {
	rec, w := core.AddStep(s.Rec, op.Token, op.Step, op.Now)
	switch w {
	case core.StepAppend:
		return Result{Verdict: OK}, s.with(m.Res.Normalize(rec))
	case core.StepRecorded:
		return Result{Verdict: OK}, s
	case core.StepConflict:
		return Result{Verdict: StepConflict}, s
	}
	return Result{Verdict: LeaseLost}, s
}

// renew: a renewal already made (core.Renewed) answers the stored record;
// otherwise the holder's live lease (core.Renewable) gets the times of
// core.Renew of the caller's record, every other field as stored.
func (m Model) renew(s State, op Op) (Result, State) {
	cur := s.Rec
	if cur != nil && core.Renewed(*cur, op.Rec.LeaseToken, op.Until) {
		return ok(cur), s
	}
	if cur == nil || !core.Renewable(*cur, op.Rec.LeaseToken, op.Now) {
		return Result{Verdict: LeaseLost}, s
	}
	r := core.Renew(op.Rec, op.Until, op.Now)
	next := *cur
	next.LeaseUntil, next.ExpiresAt, next.UpdatedAt = r.LeaseUntil, r.ExpiresAt, r.UpdatedAt
	next = m.Res.Normalize(next)
	return ok(&next), s.with(next)
}

// release deletes the stored record if it is still op.Rec
// (core.SameWrite), whatever its retention.
func release(s State, op Op) (Result, State) {
	switch {
	case s.Rec == nil:
		return Result{Verdict: NotFound}, s
	case !core.SameWrite(*s.Rec, op.Rec):
		return Result{Verdict: RecordChanged}, s
	}
	s.Rec = nil
	return Result{Verdict: OK}, s
}
