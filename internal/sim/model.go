package sim

import (
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
	// success is retained (and not released).
	OneSuccess Invariant = iota + 1
	// Fencing: the store accepts a reservation only as its contract allows
	// (never over a live lease, whatever the retention), and a completion,
	// a renewal or a step only from the holder of the current lease.
	Fencing
	// NoOverlap: no two handler tries of a key run at the same time.
	NoOverlap
	// Outcome: every delivery ends in a documented way, and what it
	// reports agrees with the store.
	Outcome
	// Attempts: the executions of a key in one record lifetime (the calls
	// that ran its handler, however many tries each) never exceed its
	// maximum attempts, and a call's tries never exceed WithRetry's.
	Attempts
	// StoreContract: a write retried after its answer was lost is
	// recognised, a legal write is accepted, a completion of a record past
	// its retention is refused, and every answer is the one the contract's
	// rule (core) gives.
	StoreContract
	// Cancellation: a cancelled context is never stored as a permanent
	// failure.
	Cancellation
	// StepOnce: a step's function (idem.Step) never runs again in a record
	// lifetime once the store accepted the step.
	StepOnce
	// StepResult: a step that idem.Step skips returns the result recorded
	// in its record lifetime; a fresh lifetime carries no step.
	StepResult
	// StepLiveness: a step is refused for lack of time only when the lease
	// the runner holds (the last renewal it received) leaves none.
	StepLiveness
	// HandlerContext: no handler's context is live once another execution
	// of its key has started.
	HandlerContext
	// Staged: a try's staged writes land if and only if its success does,
	// and once.
	Staged
	// ReplayExact: a result returned (new or replayed) is byte for byte
	// the one recorded, or the call fails with a typed error; a result is
	// omitted only where the store cannot keep it.
	ReplayExact
	// Release: a record released by an operator, or by its holder, is never
	// brought back by a late write, and a cache replays a released success
	// for at most its TTL.
	Release
	// Batch: a batch wrapper reports exactly the records that did not
	// succeed, and an ordered lane runs no record after its first that did
	// not.
	Batch
	// Classification: an ordinary error (no mark, no classifier) is
	// recorded as a retryable failure, never a permanent one, unless the
	// service runs WithUnclassifiedPermanent.
	Classification
	// NoDuplicate (runs of two Regions): no execution of a key begins
	// while another runs, or while a success of the key is retained.
	NoDuplicate
	// NoLostOutcome (runs of two Regions): no outcome a replica accepted is
	// overwritten by a write that never saw it.
	NoLostOutcome
)

var invariantNames = map[Invariant]string{
	OneSuccess: "one success per key", Fencing: "fencing", NoOverlap: "no overlapping executions",
	Outcome: "documented outcome", Attempts: "attempt bound", StoreContract: "store contract",
	Cancellation: "cancellation is no verdict", StepOnce: "a completed step runs once",
	StepResult: "a skipped step returns its lifetime's result", StepLiveness: "a step is refused only without time",
	HandlerContext: "no live context beside another execution", Staged: "staged writes land with their success",
	ReplayExact: "replays are exact", Release: "a release is final", Batch: "batch reports and lanes",
	Classification: "an error is retried unless known to be permanent", NoDuplicate: "no duplicate execution",
	NoLostOutcome: "no outcome lost",
}

// String returns the invariant's number and name.
func (i Invariant) String() string {
	return fmt.Sprintf("invariant %d (%s)", int(i), invariantNames[i])
}

// keyState is the shadow model of one key: the record the store must hold,
// and what happened to the key so far.
type keyState struct {
	key  string // the key as stored
	name string // the event's identity in payloads and the history
	hash string // idem.HashKey(key)
	sv   *service
	cur  core.Record // the store's record, if has
	has  bool
	open []*try // tries running now

	lifeStart time.Duration     // when the current record lifetime began
	life      int               // the number of the current record lifetime, from 1
	lifeExecs int               // executions in it: calls that ran the handler
	steps     map[string]string // steps the store accepted in it, with their results

	lastSuccess     core.Record // the last success the store accepted
	hasSuccess      bool
	permanent       bool    // a permanent failure was ever recorded
	omittable       bool    // a success too large for the store to keep was recorded
	variantReserved [2]bool // payload variants that ever held the key
	released        []released
	releasedToken   string // the lease token of the record last released

	hist histRing
}

// released is a success an operator released at (simulated time).
type released struct {
	at     time.Duration
	result string // resultKey
}

func (s *simulation) keyState(name string, sv *service) *keyState {
	key := sv.storedKey(name)
	ks := s.keys[key]
	if ks == nil {
		ks = &keyState{key: key, name: name, hash: idem.HashKey(key), sv: sv}
		s.keys[key] = ks
	}
	return ks
}

// newLifetime starts a record lifetime of ks: no step, no try yet.
func (s *simulation) newLifetime(ks *keyState) {
	ks.lifeStart, ks.lifeExecs, ks.steps = s.now, 0, map[string]string{}
	ks.life++
}

// afterReserve checks a reservation's answer from the inner store against
// the shadow model and updates the model.
func (s *simulation) afterReserve(c *call, rec core.Record, prev *core.Record, now time.Time, err error) {
	ks := c.ks
	if err != nil {
		s.hist(c, hReserveRefused, rec, err)
		s.checkRefusedReserve(c, rec, prev, now, err)
		return
	}
	s.hist(c, hReserveAccepted, rec, nil)
	if ks.has && core.SameWrite(ks.cur, rec) && ks.cur.Status == core.StatusInProgress {
		return // the identical retry of an applied reservation
	}
	r := s.cfg.StoreResolution
	fresh := !ks.has || ks.cur.Expired(now)
	replaced := prev != nil && ks.has && (core.Replaceable(ks.cur, prev, now) || core.Replaceable(ks.cur, prev, now.Add(-r)))
	if fresh && replaced && !ks.cur.Expired(now.Add(-r)) {
		// Within the store's resolution of the record's end, which the
		// store may round up: it may have replaced prev, not an expired
		// record.
		fresh = false
	}
	// core.Reservable: without prev, over no live record; with prev, over
	// prev alone.
	allowed := replaced || fresh && prev == nil
	switch {
	case !allowed && fresh:
		s.violate(Fencing, ks, "the store accepted reservation %s decided on %s at %s, which has gone (the store holds %s): "+
			"the reservation carries its count and steps into a new record lifetime", rec, prev, s.fmtAbs(now), s.curString(ks))
	case !allowed:
		s.violate(Fencing, ks, "the store accepted reservation %s (prev %s) at %s over live record %s, which the contract forbids",
			rec, prevString(prev), s.fmtAbs(now), ks.cur)
	case ks.has && ks.cur.Status == core.StatusInProgress && !ks.cur.LeaseExpired(now):
		s.violate(Fencing, ks, "the store accepted reservation %s at %s over in-progress record %s whose lease is live until %s: "+
			"the record counted as absent because its retention ended before its lease", rec, s.fmtAbs(now), ks.cur, s.fmtAbs(ks.cur.LeaseUntil))
	case fresh && len(rec.Steps) > 0:
		s.violate(StepResult, ks, "the runner reserved %s, a fresh record lifetime, with steps %s", rec, stepNames(rec.Steps))
	}
	if fresh {
		s.newLifetime(ks)
	}
	ks.cur, ks.has = rec, true
	ks.variantReserved[c.d.variant] = true
}

func prevString(prev *core.Record) string {
	if prev == nil {
		return "none"
	}
	return prev.String()
}

// checkRefusedReserve checks a refusal: a conflict must report the stored
// record, a reservation refused because its prev went must have had one
// (and the store no live record), and an identical retry of an applied
// reservation must succeed.
func (s *simulation) checkRefusedReserve(c *call, rec core.Record, prev *core.Record, now time.Time, err error) {
	ks := c.ks
	if ks.has && ks.cur.Status == core.StatusInProgress && core.SameWrite(ks.cur, rec) {
		s.violate(StoreContract, ks, "the store refused the identical retry of applied reservation %s: %v", rec, err)
		return
	}
	var ce *idem.ConflictError
	switch {
	case errors.As(err, &ce) && (!ks.has || ce.Existing.LeaseToken != ks.cur.LeaseToken || ce.Existing.Status != ks.cur.Status):
		s.violate(Fencing, ks, "the store refused reservation %s with conflict record %s, but holds %s", rec, ce.Existing, s.curString(ks))
	case errors.Is(err, idem.ErrRecordChanged) && (prev == nil || ks.has && !ks.cur.Expired(now)):
		s.violate(StoreContract, ks, "the store refused reservation %s (prev %s) at %s as over a record gone, but holds %s: %v",
			rec, prevString(prev), s.fmtAbs(now), s.curString(ks), err)
	}
}

func (s *simulation) curString(ks *keyState) string {
	if !ks.has {
		return "no record"
	}
	return ks.cur.String()
}

// afterComplete checks a completion's answer from the inner store (got,
// the record as stored) against the shadow model and updates the model.
func (s *simulation) afterComplete(c *call, rec, got core.Record, err error) {
	ks := c.ks
	identical := ks.has && core.SameWrite(ks.cur, rec)
	holder := ks.has && ks.cur.Status == core.StatusInProgress && ks.cur.LeaseToken == rec.LeaseToken
	retained := holder && !ks.cur.Expired(rec.UpdatedAt)
	// Past retention by more than the store's rounding (core's Expired
	// decides what counts, a live lease included).
	pastRetention := holder && ks.cur.Expired(rec.UpdatedAt.Add(-s.cfg.StoreResolution))
	if err != nil {
		s.hist(c, hCompleteRefused, rec, err)
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
	s.hist(c, hCompleteAccepted, rec, nil)
	if identical {
		return
	}
	switch {
	case !holder:
		s.violate(ks.fencing(rec.LeaseToken), ks, "the store accepted completion %s from a stale holder: it holds %s", rec, s.curString(ks))
	case pastRetention:
		s.violate(StoreContract, ks, "the store accepted completion %s written at %s of in-progress record %s, past its retention (%s)",
			rec, s.fmtAbs(rec.UpdatedAt), ks.cur, s.fmtAbs(ks.cur.ExpiresAt))
	}
	s.recordOutcome(c, ks, rec, got)
	ks.cur, ks.has = rec, true
	s.maybeDowngrade(c)
}

// recordOutcome checks an accepted outcome against OneSuccess, ReplayExact
// and Cancellation, and records it.
func (s *simulation) recordOutcome(c *call, ks *keyState, rec, got core.Record) {
	switch {
	case rec.Status == core.StatusSucceeded:
		margin := ks.sv.leaseMargin() / 2
		if ks.hasSuccess && epoch.Add(ks.lifeStart+margin).Before(ks.lastSuccess.ExpiresAt) {
			s.violate(OneSuccess, ks, "success %s recorded in a lifetime that began at %s, while success %s was retained until %s",
				rec, s.fmtRel(ks.lifeStart), ks.lastSuccess, s.fmtAbs(ks.lastSuccess.ExpiresAt))
		}
		s.checkStored(c, rec, got)
		s.countLarge(rec)
		ks.lastSuccess, ks.hasSuccess = rec, true
		ks.omittable = ks.omittable || s.mayOmit(len(rec.Result))
		key := resultKey(rec.Result)
		s.results[key] = resultInfo{key: ks.key, variant: c.d.variant, size: len(rec.Result)}
		c.success = key
	case rec.Status == core.StatusFailed && !rec.Retryable:
		ks.permanent = true
		if c.lastTry == tryCtx {
			s.violate(Cancellation, ks, "permanent failure %s (%q) recorded for a try that returned its context's error (%v)",
				rec, rec.Error, c.t.cancelErr)
		}
		if c.lastTry == tryOrdinary && !ks.sv.UnclassifiedPermanent {
			s.violate(Classification, ks, "permanent failure %s (%q) recorded for an ordinary error, without WithUnclassifiedPermanent",
				rec, rec.Error)
		}
	default: // a retryable failure keeps the steps the runner knows of
		for _, st := range rec.Steps {
			ks.stepDone(st)
		}
	}
}

// checkStored checks the success as the store says it stored it: its
// result whole, or omitted only where the store cannot keep it.
func (s *simulation) checkStored(c *call, rec, got core.Record) {
	switch {
	case got.ResultOmitted && !s.mayOmit(len(rec.Result)):
		s.violate(ReplayExact, c.ks, "the store recorded success %s with its result of %d bytes omitted (a store that keeps %s)",
			rec, len(rec.Result), s.keeps())
	case !got.ResultOmitted && resultKey(got.Result) != resultKey(rec.Result):
		s.violate(ReplayExact, c.ks, "the store answered success %s with a result of %d bytes (%s), not the %d bytes written (%s)",
			rec, len(got.Result), resultKey(got.Result), len(rec.Result), resultKey(rec.Result))
	}
}

// afterGet checks a read against the shadow model: a live record is the
// one the store holds, and none is found only when the store holds no live
// record (within the store's rounding of retention ends).
func (s *simulation) afterGet(c *call, rec core.Record, now time.Time, err error) {
	ks := c.ks
	switch {
	case err == nil && (!ks.has || !core.SameWrite(ks.cur, rec)):
		s.violate(StoreContract, ks, "a read returned %s, but the store holds %s", rec, s.curString(ks))
	case errors.Is(err, idem.ErrNotFound) && ks.has && !ks.cur.Expired(now.Add(-s.cfg.StoreResolution)):
		s.violate(StoreContract, ks, "a read at %s found no record, but the store holds %s", s.fmtAbs(now), ks.cur)
	}
}
