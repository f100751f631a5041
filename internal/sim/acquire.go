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

func (a acquiringStore) Acquire(ctx context.Context, rec core.Record, now time.Time, p core.Policy) (core.Record, *core.Record, error) {
	f := a.faultStore
	t := taskOf(ctx)
	t.yield(f.s.latency())
	if err := t.simDone(ctx); err != nil {
		return core.Record{}, nil, err
	}
	fa := f.draw(true)
	if fa == faultThrottle || fa == faultTimeout {
		t.yield(f.s.latency())
		return core.Record{}, nil, injected("acquire", fa)
	}
	ictx, cancel := innerCtx()
	got, prev, err := a.acq.Acquire(ictx, rec, now, p)
	cancel()
	f.s.afterAcquire(t, rec, got, now, p, err)
	if fa == faultLost {
		t.d.ks.note("(answer lost)")
		got, prev, err = core.Record{}, nil, injected("acquire", fa)
	}
	t.yield(f.s.latency())
	return got, prev, err
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
