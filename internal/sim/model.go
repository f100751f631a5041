package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// Invariant identifies a property the simulation checks.
type Invariant int

const (
	// OneSuccess: at most one success is recorded per key while an earlier
	// success is retained.
	OneSuccess Invariant = iota + 1
	// Fencing: the store accepts a reservation only as its contract allows
	// (never over a live lease, whatever the retention) and a completion
	// only from the holder of the current lease.
	Fencing
	// NoOverlap: no two handler tries of a key run at the same time.
	NoOverlap
	// Outcome: every delivery ends in a documented way, and what it
	// reports agrees with the store.
	Outcome
	// Attempts: the handler tries of a key, in one record lifetime, never
	// exceed its maximum attempts.
	Attempts
	// StoreContract: a write retried after its answer was lost is
	// recognised, a legal completion is accepted, and a completion of a
	// record past its retention is refused.
	StoreContract
	// Cancellation: a cancelled context is never stored as a permanent
	// failure.
	Cancellation
	// StepOnce: a step's function (idem.Step) never runs again in a record
	// lifetime once the store accepted the step.
	StepOnce
)

var invariantNames = map[Invariant]string{
	OneSuccess: "one success per key", Fencing: "fencing", NoOverlap: "no overlapping executions",
	Outcome: "documented outcome", Attempts: "attempt bound", StoreContract: "store contract",
	Cancellation: "cancellation is no verdict", StepOnce: "a completed step runs once",
}

// String returns the invariant's number and name.
func (i Invariant) String() string {
	return fmt.Sprintf("invariant %d (%s)", int(i), invariantNames[i])
}

// try is one execution of a handler.
type try struct {
	id      int64
	task    *task
	start   time.Duration
	overrun bool          // it ignores its context and may outlive any lease
	heedEnd time.Duration // when it would have ended had it heeded its context
}

// tryClass is what a handler try returned.
type tryClass uint8

const (
	tryNone tryClass = iota
	trySuccess
	tryTransient
	tryPermanent
	tryCtx // the context was done: the handler returned its error
)

// keyState is the shadow model of one key: the record the store must hold,
// and what happened to the key so far.
type keyState struct {
	key  string
	sv   *service
	cur  core.Record // the store's record, if has
	has  bool
	open []*try // tries running now

	lifeStart time.Duration // when the current record lifetime began
	lifeTries int           // handler tries in it

	lastSuccess     core.Record // the last success the store accepted
	hasSuccess      bool
	permanent       bool            // a permanent failure was ever recorded
	variantReserved [2]bool         // payload variants that ever held the key
	stepsDone       map[string]bool // steps the store accepted in the current lifetime

	hist histRing
}

func (s *simulation) keyState(key string, sv *service) *keyState {
	ks := s.keys[key]
	if ks == nil {
		ks = &keyState{key: key, sv: sv}
		s.keys[key] = ks
	}
	return ks
}

// afterReserve checks a reservation's answer from the inner store against
// the shadow model and updates the model.
func (s *simulation) afterReserve(t *task, rec core.Record, prev *core.Record, now time.Time, err error) {
	ks := t.d.ks
	if err != nil {
		s.hist(ks, t, hReserveRefused, rec, err)
		s.checkRefusedReserve(t, ks, rec, err)
		return
	}
	s.hist(ks, t, hReserveAccepted, rec, nil)
	if ks.has && ks.cur.Status == core.StatusInProgress && ks.cur.LeaseToken == rec.LeaseToken && ks.cur.Attempts == rec.Attempts {
		return // the identical retry of an applied reservation
	}
	fresh := !ks.has || ks.cur.Expired(now)
	allowed := fresh || prev != nil && ks.cur.LeaseToken == prev.LeaseToken && ks.cur.Status == prev.Status && len(ks.cur.Steps) == len(prev.Steps) &&
		(ks.cur.Status == core.StatusInProgress && ks.cur.LeaseExpired(now) || ks.cur.Status == core.StatusFailed && ks.cur.Retryable)
	switch {
	case !allowed:
		s.violate(Fencing, ks, "the store accepted reservation %s (prev %s) at %s over live record %s, which the contract forbids",
			rec, prevString(prev), s.fmtAbs(now), ks.cur)
	case ks.has && ks.cur.Status == core.StatusInProgress && !ks.cur.LeaseExpired(now):
		s.violate(Fencing, ks, "the store accepted reservation %s at %s over in-progress record %s whose lease is live until %s: "+
			"the record counted as absent because its retention ended before its lease", rec, s.fmtAbs(now), ks.cur, s.fmtAbs(ks.cur.LeaseUntil))
	}
	if fresh {
		ks.lifeStart, ks.lifeTries, ks.stepsDone = s.now, 0, nil
	}
	ks.cur, ks.has = rec, true
	ks.variantReserved[t.d.variant] = true
}

func prevString(prev *core.Record) string {
	if prev == nil {
		return "none"
	}
	return prev.String()
}

// checkRefusedReserve checks a refusal: a conflict must report the stored
// record, and an identical retry of an applied reservation must succeed.
func (s *simulation) checkRefusedReserve(_ *task, ks *keyState, rec core.Record, err error) {
	identical := ks.has && ks.cur.Status == core.StatusInProgress && ks.cur.LeaseToken == rec.LeaseToken && ks.cur.Attempts == rec.Attempts
	if identical {
		s.violate(StoreContract, ks, "the store refused the identical retry of applied reservation %s: %v", rec, err)
		return
	}
	var ce *idem.ConflictError
	if errors.As(err, &ce) && (!ks.has || ce.Existing.LeaseToken != ks.cur.LeaseToken || ce.Existing.Status != ks.cur.Status) {
		s.violate(Fencing, ks, "the store refused reservation %s with conflict record %s, but holds %s", rec, ce.Existing, s.curString(ks))
	}
}

func (s *simulation) curString(ks *keyState) string {
	if !ks.has {
		return "no record"
	}
	return ks.cur.String()
}

// afterComplete checks a completion's answer from the inner store against
// the shadow model and updates the model.
func (s *simulation) afterComplete(t *task, rec core.Record, err error) {
	ks := t.d.ks
	identical := ks.has && ks.cur.Status == rec.Status && ks.cur.LeaseToken == rec.LeaseToken && ks.cur.Attempts == rec.Attempts
	holder := ks.has && ks.cur.Status == core.StatusInProgress && ks.cur.LeaseToken == rec.LeaseToken
	retained := holder && !ks.cur.Expired(rec.UpdatedAt)
	// Past retention by more than the store's rounding (core's Expired
	// decides what counts, a live lease included).
	pastRetention := holder && ks.cur.Expired(rec.UpdatedAt.Add(-s.cfg.StoreResolution))
	if err != nil {
		s.hist(ks, t, hCompleteRefused, rec, err)
		if !holder && !identical && errors.Is(err, idem.ErrLeaseLost) {
			s.stats.StaleRefused++
		}
		switch {
		case identical:
			s.violate(StoreContract, ks, "the store refused the identical retry of applied completion %s: %v", rec, err)
		case retained && errors.Is(err, idem.ErrLeaseLost):
			s.violate(StoreContract, ks, "the store refused completion %s from the lease holder of %s: %v", rec, ks.cur, err)
		}
		return
	}
	s.hist(ks, t, hCompleteAccepted, rec, nil)
	if identical {
		return
	}
	switch {
	case !holder:
		s.violate(Fencing, ks, "the store accepted completion %s from a stale holder: it holds %s", rec, s.curString(ks))
	case pastRetention:
		s.violate(StoreContract, ks, "the store accepted completion %s written at %s of in-progress record %s, past its retention (%s)",
			rec, s.fmtAbs(rec.UpdatedAt), ks.cur, s.fmtAbs(ks.cur.ExpiresAt))
	}
	s.recordOutcome(t, ks, rec)
	ks.cur, ks.has = rec, true
}

// recordOutcome checks an accepted outcome against invariants 1 and 7.
func (s *simulation) recordOutcome(t *task, ks *keyState, rec core.Record) {
	switch {
	case rec.Status == core.StatusSucceeded:
		margin := ks.sv.leaseMargin() / 2
		if ks.hasSuccess && epoch.Add(ks.lifeStart+margin).Before(ks.lastSuccess.ExpiresAt) {
			s.violate(OneSuccess, ks, "success %s recorded in a lifetime that began at %s, while success %s was retained until %s",
				rec, s.fmtRel(ks.lifeStart), ks.lastSuccess, s.fmtAbs(ks.lastSuccess.ExpiresAt))
		}
		ks.lastSuccess, ks.hasSuccess = rec, true
		s.results[string(rec.Result)] = resultInfo{key: ks.key, variant: t.d.variant}
		t.success = rec.Result
	case rec.Status == core.StatusFailed && !rec.Retryable:
		ks.permanent = true
		if t.lastTry == tryCtx {
			s.violate(Cancellation, ks, "permanent failure %s (%q) recorded for a try that returned its context's error (%v)",
				rec, rec.Error, t.cancelErr)
		}
	}
}

// startTry registers a handler try and checks invariants 3 and 5.
// A try that overran past the end a heeding try would have had is no longer
// a lease holder: a try may start beside it.
func (s *simulation) startTry(t *task) *try {
	ks := t.d.ks
	s.stats.Tries++
	s.tryN++
	tr := &try{id: s.tryN, task: t, start: s.now}
	for _, o := range ks.open {
		if o.overrun && s.now > o.heedEnd {
			s.stats.OverrunOverlaps++
			continue
		}
		s.violate(NoOverlap, ks, "try %d of delivery %d started while try %d of delivery %d (started at %s, %s ago) is still running; store holds %s",
			tr.id, t.d.id, o.id, o.task.d.id, s.fmtRel(o.start), s.now-o.start, s.curString(ks))
	}
	ks.open = append(ks.open, tr)
	t.try = tr
	ks.lifeTries++
	if maxTries := ks.sv.maxAttempts(); ks.lifeTries > maxTries {
		s.violate(Attempts, ks, "try %d of delivery %d is execution %d of the key in this record lifetime (begun at %s); max attempts is %d; store holds %s",
			tr.id, t.d.id, ks.lifeTries, s.fmtRel(ks.lifeStart), maxTries, s.curString(ks))
	}
	s.hist(ks, t, hTryStart, core.Record{}, nil)
	return tr
}

// endTry closes the task's running try.
func (s *simulation) endTry(t *task) {
	tr := t.try
	if tr == nil {
		return
	}
	ks := t.d.ks
	for i, o := range ks.open {
		if o == tr {
			ks.open = append(ks.open[:i], ks.open[i+1:]...)
			break
		}
	}
	t.try = nil
	s.hist(ks, t, hTryEnd, core.Record{}, nil)
}

// resultInfo is where an accepted success's result came from.
type resultInfo struct {
	key     string
	variant int
}

// checkOutcome checks the answer of a delivery that was not unwound
// (invariant 4) and returns its class.
func (s *simulation) checkOutcome(t *task, out idem.Outcome, err error) outClass {
	ks := t.d.ks
	c := classify(err)
	switch c {
	case outSuccess:
		if out.Replayed {
			c = outReplay
			if ri, ok := s.results[string(out.Result)]; !ok || ri.key != ks.key || ri.variant != t.d.variant {
				s.violate(Outcome, ks, "delivery %d (payload %d) replayed result %q, which no accepted success of this key and payload holds", t.d.id, t.d.variant, out.Result)
			}
		} else if t.success == nil || string(t.success) != string(out.Result) {
			s.violate(Outcome, ks, "delivery %d reported new result %q, but the store accepted no such success from it", t.d.id, out.Result)
		}
	case outKeyReused:
		if !ks.variantReserved[1-t.d.variant] {
			s.violate(Outcome, ks, "delivery %d (payload %d) was refused as key reuse, but no other payload ever held the key", t.d.id, t.d.variant)
		}
	case outPermanent:
		var fe *core.FailureError
		if errors.As(err, &fe) && fe.Replayed && !ks.permanent {
			s.violate(Outcome, ks, "delivery %d replayed a permanent failure that was never recorded: %v", t.d.id, err)
		}
	case outOther:
		s.violate(Outcome, ks, "delivery %d ended with an undocumented error: %v", t.d.id, err)
	}
	return c
}

// outClass is how a delivery ended.
type outClass uint8

const (
	outCrash outClass = iota
	outSuccess
	outReplay
	outInProgress
	outKeyReused
	outPermanent
	outExhausted
	outTransient
	outNotRecorded
	outStoreError
	outOther
)

// classify maps a Do error to its documented class (outOther if none).
func classify(err error) outClass {
	switch {
	case err == nil:
		return outSuccess
	case errors.Is(err, idem.ErrOutcomeNotRecorded) || errors.Is(err, idem.ErrLeaseLost):
		return outNotRecorded
	case errors.Is(err, core.ErrInProgress):
		return outInProgress
	case errors.Is(err, core.ErrKeyReused):
		return outKeyReused
	case errors.Is(err, core.ErrRetriesExhausted):
		return outExhausted
	case errors.Is(err, idem.ErrTransientFailure):
		return outTransient
	case errors.Is(err, core.ErrPermanentFailure):
		return outPermanent
	case errors.Is(err, ErrInjected) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return outStoreError
	}
	return outOther
}
