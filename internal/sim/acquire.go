package sim

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// acquired is the answer of an Acquire.
type acquired struct {
	rec  core.Record
	prev *core.Record
}

func (a acquiringStore) Acquire(ctx context.Context, rec core.Record, now time.Time, p core.Policy) (core.Record, *core.Record, error) {
	r, c, err := a.begin(ctx)
	if err != nil {
		return core.Record{}, nil, err
	}
	got, err := faultWrite(a.faultStore, r, "acquire", func(ictx context.Context) (acquired, error) {
		r, prev, err := a.acq.Acquire(ictx, rec, now, p)
		return acquired{r, prev}, err
	}, func(got acquired, err error, _ bool) { a.s.afterAcquire(c, rec, got.rec, now, p, err) })
	if err == nil {
		a.s.reserved(c, got.rec.LeaseUntil)
	}
	return got.rec, got.prev, err
}

// afterAcquire checks an acquisition's answer from the inner store against
// the shadow model (core.Acquirable, core.Acquire, core.Acquired) and
// updates the model.
func (s *simulation) afterAcquire(c *call, rec, got core.Record, now time.Time, p core.Policy, err error) {
	ks := c.ks
	live := ks.has && !ks.cur.Expired(now)
	own := live && core.Acquired(ks.cur, rec)
	if err != nil {
		s.hist(c, hReserveRefused, rec, err)
		s.checkRefusedAcquire(c, rec, now, p, own, err)
		return
	}
	s.hist(c, hReserveAccepted, got, nil)
	if own {
		return // the identical retry of an applied acquisition
	}
	var cur *core.Record
	if ks.has {
		cur = &ks.cur
	}
	want := core.Acquire(rec, cur, now)
	if r := s.cfg.StoreResolution; cur != nil && cur.Expired(now) && !cur.Expired(now.Add(-r)) {
		// Within the store's resolution of the record's end, which the
		// store may round up: it may still hold the record live.
		if alt := core.Acquire(rec, cur, now.Add(-r)); alt.Attempts == got.Attempts {
			want, live = alt, true
		}
	}
	switch {
	case !core.Acquirable(cur, rec.Fingerprint, now, p):
		s.violate(Fencing, ks, "the store accepted acquisition %s at %s over live record %s, which the contract forbids", got, s.fmtAbs(now), ks.cur)
	case got.Attempts != want.Attempts || got.LeaseToken != rec.LeaseToken:
		s.violate(StoreContract, ks, "the store wrote acquisition %s at %s over %s; core.Acquire counts attempt %d",
			got, s.fmtAbs(now), s.curString(ks), want.Attempts)
	case !sameSteps(got.Steps, want.Steps):
		s.violate(StoreContract, ks, "the store wrote acquisition %s at %s over %s with steps %s; core.Acquire carries %s",
			got, s.fmtAbs(now), s.curString(ks), stepNames(got.Steps), stepNames(want.Steps))
	}
	if !live {
		s.newLifetime(ks)
	}
	ks.cur, ks.has = got, true
	ks.variantReserved[c.d.variant] = true
}

// checkRefusedAcquire checks a refused acquisition: the identical retry of
// an applied one must succeed, a conflict must report the stored record,
// and only a record core.Acquirable forbids may refuse it.
func (s *simulation) checkRefusedAcquire(c *call, rec core.Record, now time.Time, p core.Policy, own bool, err error) {
	ks := c.ks
	var ce *idem.ConflictError
	switch {
	case own:
		s.violate(StoreContract, ks, "the store refused the identical retry of applied acquisition %s: %v", rec, err)
	case errors.As(err, &ce) && (!ks.has || ce.Existing.LeaseToken != ks.cur.LeaseToken || ce.Existing.Status != ks.cur.Status):
		s.violate(Fencing, ks, "the store refused acquisition %s with conflict record %s, but holds %s", rec, ce.Existing, s.curString(ks))
	case errors.As(err, &ce) && core.Acquirable(&ks.cur, rec.Fingerprint, now.Add(-s.cfg.StoreResolution), p):
		// (A store that rounds retention ends up may refuse within its
		// resolution of the end.)
		s.violate(StoreContract, ks, "the store refused acquisition %s at %s over %s, which core.Acquirable allows", rec, s.fmtAbs(now), ks.cur)
	}
}

func sameSteps(a, b []core.Step) bool {
	return slices.EqualFunc(a, b, func(x, y core.Step) bool { return x.Name == y.Name && string(x.Result) == string(y.Result) })
}

func stepNames(steps []core.Step) string {
	if len(steps) == 0 {
		return "none"
	}
	out := ""
	for i, st := range steps {
		if i > 0 {
			out += ","
		}
		out += st.Name + "=" + string(st.Result)
	}
	return out
}
