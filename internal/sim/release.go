package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// The operator: now and then it releases a record (idem.Releaser), as the
// idem command's release does: it reads the record and releases it unless
// its lease is live. It runs on the scheduler, between two legs of the
// runners' calls, with no faults. Records in the previous encoding are
// made when a failure is recorded (Faults.Downgrade).

// startOperator schedules the operator's first release, if the run has
// releases and the store can release.
func (s *simulation) startOperator() {
	if _, ok := s.store.inner.(idem.Releaser); !ok || s.cfg.Faults.Release <= 0 {
		return
	}
	s.after(s.expGap(s.cfg.Faults.Release), s.operate)
}

// operate releases the record of one active key, if it may, and schedules
// the next release while deliveries remain.
func (s *simulation) operate() {
	if s.spawned >= s.cfg.Deliveries {
		return
	}
	defer s.after(s.expGap(s.cfg.Faults.Release), s.operate)
	sv := s.services[s.rng.IntN(len(s.services))]
	if len(sv.active) == 0 {
		return
	}
	ks := s.keys[sv.storedKey(sv.active[s.rng.IntN(len(sv.active))])]
	if ks == nil {
		return
	}
	s.operating = true
	defer func() { s.operating = false }()
	now := epoch.Add(s.now)
	ctx, cancel := innerCtx()
	defer cancel()
	rec, err := s.store.inner.Get(ctx, ks.key, now)
	if err != nil || rec.Status == core.StatusInProgress && !rec.LeaseExpired(now) {
		return
	}
	if err := s.store.inner.(idem.Releaser).Release(ctx, rec); err == nil {
		s.released(ks, rec)
	}
}

// released updates the shadow model with a release of rec: the key has no
// record; a released success no longer counts as retained, and may be
// replayed from a cache only within the cache's TTL.
func (s *simulation) released(ks *keyState, rec core.Record) {
	s.stats.Releases++
	if !ks.has || !core.SameWrite(ks.cur, rec) {
		s.violate(StoreContract, ks, "an operator released %s, but the store held %s", rec, s.curString(ks))
	}
	if rec.Status == core.StatusSucceeded {
		ks.released = append(ks.released, released{at: s.now, result: resultKey(rec.Result)})
		ks.hasSuccess = false
	}
	ks.has, ks.releasedToken = false, rec.LeaseToken
	s.histKey(ks, nil, hReleased, rec, nil)
}

// startSweeper schedules a sweep's first page, if the run sweeps and the
// store can.
func (s *simulation) startSweeper() {
	if _, ok := s.store.inner.(ExpiredSweeper); !ok || s.cfg.Faults.Sweep <= 0 {
		return
	}
	s.after(s.expGap(s.cfg.Faults.Sweep), s.sweep)
}

// sweep runs one page of the sweep, between two legs of the runners'
// calls, with no faults, and checks each record it deleted against the
// shadow model: it was past retention (core.Record.Expired) when deleted,
// and the key has no record after it.
func (s *simulation) sweep() {
	if s.spawned >= s.cfg.Deliveries {
		return
	}
	defer s.after(s.expGap(s.cfg.Faults.Sweep), s.sweep)
	s.operating = true
	defer func() { s.operating = false }()
	now := epoch.Add(s.now)
	ctx, cancel := innerCtx()
	defer cancel()
	keys, err := s.store.inner.(ExpiredSweeper).SweepPage(ctx, now)
	for _, key := range keys {
		ks := s.keys[key]
		if ks == nil {
			continue
		}
		s.stats.Swept++
		if !ks.has || !ks.cur.Expired(now) {
			s.violate(StoreContract, ks, "a sweep at %s deleted the record of the key, which held %s", now.Format(time.RFC3339Nano), s.curString(ks))
		}
		ks.has = false
		s.histKey(ks, nil, hSwept, ks.cur, nil)
	}
	if err != nil {
		s.stats.SweepErrors++
	}
}

// fencing is the invariant a write accepted from a stale holder breaks:
// Release when the holder's record was released, else Fencing.
func (ks *keyState) fencing(token string) Invariant {
	if !ks.has && token != "" && token == ks.releasedToken {
		return Release
	}
	return Fencing
}

// maybeDowngrade rewrites, now and then, the outcome or the step just
// recorded for ks in the store's previous encoding, if the store can: as
// a process of the previous version would have written it.
func (s *simulation) maybeDowngrade(c *call) {
	pe, ok := s.store.inner.(PreviousEncoding)
	if !ok || !s.chance(s.cfg.Faults.Downgrade) {
		return
	}
	ctx, cancel := innerCtx()
	defer cancel()
	if err := pe.Downgrade(ctx, c.ks.key); err != nil {
		s.violate(StoreContract, c.ks, "the store could not rewrite %s in its previous encoding: %v", c.ks.cur, err)
		return
	}
	s.stats.Downgrades++
	s.hist(c, hDowngraded, c.ks.cur, nil)
}

// Release implements idem.Releaser for the runners, with the faults of a
// store write, when the store under test can release: a runner releases
// its own reservation for a try marked core.MarkNoRecord. Over a store
// that cannot, it reports errors.ErrUnsupported, and the runner records a
// retryable failure instead.
func (f *faultStore) Release(ctx context.Context, rec core.Record) error {
	rl, ok := f.inner.(idem.Releaser)
	if !ok {
		return fmt.Errorf("sim: release: %w", errors.ErrUnsupported)
	}
	r, c, err := f.begin(ctx)
	if err != nil {
		return err
	}
	_, err = faultWrite(f, r, "release", func(ictx context.Context) (struct{}, error) {
		return struct{}{}, rl.Release(ictx, rec)
	}, func(_ struct{}, err error, _ bool) { f.s.afterRelease(c, rec, err) })
	return err
}

// afterRelease checks a holder's release against the shadow model: only
// the record it holds, in progress, is deleted; a refusal says what the
// store holds. The model then holds no record, and no late write of the
// released lease may land (invariant Release).
func (s *simulation) afterRelease(c *call, rec core.Record, err error) {
	ks := c.ks
	held := ks.has && core.SameWrite(ks.cur, rec)
	switch {
	case err == nil && (!held || rec.Status != core.StatusInProgress):
		s.violate(StoreContract, ks, "the store released %s for its holder, but held %s", rec, s.curString(ks))
	case err == nil:
		s.stats.NoRecords++
		ks.has, ks.releasedToken = false, rec.LeaseToken
		s.hist(c, hReleasedByHolder, rec, nil)
	case held:
		s.hist(c, hReleaseRefused, rec, err)
		s.violate(StoreContract, ks, "the store refused to release %s, the record it holds: %v", rec, err)
	default:
		s.hist(c, hReleaseRefused, rec, err)
		if !errors.Is(err, idem.ErrNotFound) && !errors.Is(err, idem.ErrRecordChanged) {
			s.violate(StoreContract, ks, "the store refused to release %s with %v, neither ErrNotFound nor ErrRecordChanged; it holds %s", rec, err, s.curString(ks))
		}
	}
}
