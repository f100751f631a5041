package sim

import (
	"context"
	"errors"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// acquiringStore is the faultStore of an inner store that is an
// idem.Acquirer: the runners then reserve through Acquire, with the same
// faults, checked against the shadow model.
type acquiringStore struct {
	*faultStore
	acq idem.Acquirer
}

// runnerStore returns the store the runners see: the faultStore, with the
// Acquirer capability when the inner store has it.
func (f *faultStore) runnerStore() idem.Store {
	if a, ok := f.inner.(idem.Acquirer); ok {
		return acquiringStore{faultStore: f, acq: a}
	}
	return f
}

// acquired is the answer of an Acquire.
type acquired struct {
	rec  core.Record
	prev *core.Record
}

func (a acquiringStore) Acquire(ctx context.Context, rec core.Record, now time.Time, p core.Policy) (core.Record, *core.Record, error) {
	got, err := faultWrite(ctx, a.faultStore, "acquire", func(ictx context.Context) (acquired, error) {
		r, prev, err := a.acq.Acquire(ictx, rec, now, p)
		return acquired{r, prev}, err
	}, func(t *task, got acquired, err error) { a.s.afterAcquire(t, rec, got.rec, now, p, err) })
	return got.rec, got.prev, err
}

// afterAcquire checks an acquisition's answer from the inner store against
// the shadow model (core.Acquirable, core.Acquire, core.Acquired) and
// updates the model.
func (s *simulation) afterAcquire(t *task, rec, got core.Record, now time.Time, p core.Policy, err error) {
	ks := t.d.ks
	live := ks.has && !ks.cur.Expired(now)
	own := live && core.Acquired(ks.cur, rec)
	if err != nil {
		s.hist(ks, t, hReserveRefused, rec, err)
		var ce *idem.ConflictError
		switch {
		case own:
			s.violate(StoreContract, ks, "the store refused the identical retry of applied acquisition %s: %v", rec, err)
		case errors.As(err, &ce) && (!ks.has || ce.Existing.LeaseToken != ks.cur.LeaseToken || ce.Existing.Status != ks.cur.Status):
			s.violate(Fencing, ks, "the store refused acquisition %s with conflict record %s, but holds %s", rec, ce.Existing, s.curString(ks))
		case errors.As(err, &ce) && core.Acquirable(&ks.cur, rec.Fingerprint, now, p):
			s.violate(StoreContract, ks, "the store refused acquisition %s at %s over %s, which core.Acquirable allows", rec, s.fmtAbs(now), ks.cur)
		}
		return
	}
	s.hist(ks, t, hReserveAccepted, got, nil)
	if own {
		return // the identical retry of an applied acquisition
	}
	var cur *core.Record
	if ks.has {
		cur = &ks.cur
	}
	switch {
	case !core.Acquirable(cur, rec.Fingerprint, now, p):
		s.violate(Fencing, ks, "the store accepted acquisition %s at %s over live record %s, which the contract forbids", got, s.fmtAbs(now), ks.cur)
	case got.Attempts != core.Acquire(rec, cur, now).Attempts || got.LeaseToken != rec.LeaseToken:
		s.violate(StoreContract, ks, "the store wrote acquisition %s at %s over %s; core.Acquire counts attempt %d",
			got, s.fmtAbs(now), s.curString(ks), core.Acquire(rec, cur, now).Attempts)
	}
	if !live {
		ks.lifeStart, ks.lifeTries = s.now, 0
	}
	ks.cur, ks.has = got, true
	ks.variantReserved[t.d.variant] = true
}
