package sim

import (
	"context"
	"errors"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// resultInfo is where an accepted success's result came from.
type resultInfo struct {
	key     string
	variant int
	size    int
}

// checkOutcome checks the answer of a Do call that returned (invariants
// Outcome, ReplayExact and Release) and returns its class.
func (s *simulation) checkOutcome(c *call, out idem.Outcome, err error) outClass {
	ks := c.ks
	cl := classify(err)
	switch cl {
	case outSuccess:
		if out.Replayed {
			cl = outReplay
			s.checkReplay(c, out)
		} else if c.success == "" || c.success != resultKey(out.Result) {
			s.violate(Outcome, ks, "delivery %d reported new result %s, but the store accepted no such success from it",
				c.d.id, resultKey(out.Result))
		}
	case outKeyReused:
		if !ks.variantReserved[1-c.d.variant] {
			s.violate(Outcome, ks, "delivery %d (payload %d) was refused as key reuse, but no other payload ever held the key", c.d.id, c.d.variant)
		}
	case outPermanent:
		var fe *core.FailureError
		if errors.As(err, &fe) && fe.Replayed && !ks.permanent {
			s.violate(Outcome, ks, "delivery %d replayed a permanent failure that was never recorded: %v", c.d.id, err)
		}
	case outCommitRefused:
		if c.success != "" {
			s.violate(Outcome, ks, "delivery %d was told its commit was refused, but the store accepted its success %s", c.d.id, c.success)
		}
	case outUnclassified:
		if c.lastTry != tryOrdinary {
			s.violate(Classification, ks, "delivery %d ended failed_unclassified, but its last try's error was classified (%v): %v", c.d.id, c.lastTry, err)
		}
	case outOther:
		s.violate(Outcome, ks, "delivery %d ended with an undocumented error: %v", c.d.id, err)
	}
	return cl
}

// checkReplay checks a replayed success: its result is byte for byte one
// the store accepted for this key and payload, or omitted where the store
// may omit it; from a cache, a released success only within the cache's
// TTL of its release.
func (s *simulation) checkReplay(c *call, out idem.Outcome) {
	ks := c.ks
	if out.ResultOmitted {
		if !ks.omittable {
			s.violate(ReplayExact, ks, "delivery %d replayed a success with its result omitted, but every success of the key fits a store that keeps %s",
				c.d.id, s.keeps())
		}
		return
	}
	key := resultKey(out.Result)
	if ri, ok := s.results[key]; !ok || ri.key != ks.key || ri.variant != c.d.variant {
		s.violate(ReplayExact, ks, "delivery %d (payload %d) replayed result %s (%d bytes), which no accepted success of this key and payload holds",
			c.d.id, c.d.variant, key, len(out.Result))
	}
	if !out.Cached {
		return
	}
	s.stats.CacheHits++
	ttl := c.d.sv.cacheTTL()
	for _, r := range ks.released {
		if r.result == key && s.now > r.at+ttl+c.d.sv.leaseMargin() {
			s.violate(Release, ks, "delivery %d replayed from its cache at %s a success released at %s, longer ago than the cache's TTL (%s)",
				c.d.id, s.fmtRel(s.now), s.fmtRel(r.at), ttl)
		}
	}
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
	outUnclassified
	outNotRecorded
	outCommitRefused
	outStoreError
	outOther
)

// classify maps a Do error to its documented class (outOther if none).
func classify(err error) outClass {
	switch {
	case err == nil:
		return outSuccess
	case errors.Is(err, idem.ErrCommitRefused):
		return outCommitRefused
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
	case errors.Is(err, idem.ErrUnclassifiedFailure):
		return outUnclassified
	case errors.Is(err, core.ErrPermanentFailure):
		return outPermanent
	case errors.Is(err, ErrInjected) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return outStoreError
	}
	return outOther
}

func (st *Stats) count(c outClass, out idem.Outcome) {
	if out.TookOver {
		st.TakeOvers++
	}
	if out.Waited {
		st.Waited++
	}
	p := [...]*int{outSuccess: &st.Successes, outReplay: &st.Replays, outInProgress: &st.InProgress,
		outKeyReused: &st.KeyReused, outPermanent: &st.Permanent, outExhausted: &st.Exhausted,
		outTransient: &st.Transient, outUnclassified: &st.Unclassified, outNotRecorded: &st.NotRecorded, outCommitRefused: &st.CommitRefused, outStoreError: &st.StoreErrors,
		outOther: &st.Undocumented}
	if c != outCrash {
		*p[c]++
	}
}
