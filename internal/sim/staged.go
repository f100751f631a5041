package sim

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/memstore"
)

// stagedTry is what a handler try staged (Service.Stage).
type stagedTry struct {
	id      string // the try's name for the Stager
	n       int    // writes staged
	refused bool   // the last one's condition fails at the commit
	// hot: every commit meets a conflicting transaction on a hot staged
	// item (never with refused), as DynamoDB answers it: refused as a
	// whole, nothing written (idem.ErrCommitRefused).
	hot bool
}

// stage stages, now and then, one or two writes of the try, to be
// committed with its success.
func (c *call) stage(ctx context.Context, tr *try) error {
	s, sv := c.t.s, c.d.sv
	c.staged = nil
	if !s.chance(sv.Stage) {
		return nil
	}
	st := &stagedTry{id: fmt.Sprintf("try-%d", tr.id), n: 1 + s.rng.IntN(2), refused: s.chance(sv.StageRefused)}
	st.hot = !st.refused && s.chance(sv.StageRefused)
	if err := s.cfg.Stager.Stage(ctx, st.id, st.n, st.refused); err != nil {
		return err
	}
	c.staged = st
	s.stats.Staged++
	return nil
}

// CheckStaged implements idem.StagedCompleter with the inner store's.
func (f *faultStore) CheckStaged(staged []any) error {
	sc, ok := f.inner.(idem.StagedCompleter)
	if !ok {
		return fmt.Errorf("sim: %T: %w", f.inner, idem.ErrNoStaging)
	}
	return sc.CheckStaged(staged)
}

// CompleteStaged implements idem.StagedCompleter over the inner store with
// the legs and faults of a write, and checks that the staged writes landed
// with the success, and only with it (invariant Staged).
func (f *faultStore) CompleteStaged(ctx context.Context, rec core.Record, staged []any) (core.Record, error) {
	sc, ok := f.inner.(idem.StagedCompleter)
	if !ok {
		return core.Record{}, fmt.Errorf("sim: %T: %w", f.inner, idem.ErrNoStaging)
	}
	r, c, err := f.begin(ctx)
	if err != nil {
		return core.Record{}, err
	}
	st := c.staged
	before := f.s.landed(c, st)
	got, err := faultWrite(f, r, "complete", func(ictx context.Context) (core.Record, error) {
		if st != nil && st.hot {
			return core.Record{}, injected("complete", faultThrottle)
		}
		return sc.CompleteStaged(ictx, rec, staged)
	}, func(got core.Record, err error, _ bool) {
		f.s.afterComplete(c, rec, got, err)
		f.s.checkStaged(c, st, before, err)
	})
	var ie *InjectedError
	if errors.As(err, &ie) && ie.Kind == "throttled" {
		// A throttled or conflicting transaction (a hot item), as ddbstore
		// answers it: the commit refused, nothing written.
		f.s.stats.StagedThrottled++
		err = fmt.Errorf("%w: %w", idem.ErrCommitRefused, err)
	}
	return got, err
}

// landed returns how many of st's writes landed.
func (s *simulation) landed(c *call, st *stagedTry) int {
	if st == nil {
		return 0
	}
	ctx, cancel := innerCtx()
	defer cancel()
	n, err := s.cfg.Stager.Landed(ctx, st.id)
	if err != nil {
		s.violate(Staged, c.ks, "the staged writes of %s could not be read: %v", st.id, err)
	}
	return n
}

// checkStaged checks a commit of st's writes with a success: accepted, all
// landed, once; refused, none landed by it.
func (s *simulation) checkStaged(c *call, st *stagedTry, before int, err error) {
	if st == nil {
		s.violate(Staged, c.ks, "delivery %d committed staged writes the simulation did not stage", c.d.id)
		return
	}
	n := s.landed(c, st)
	var sw *idem.StagedWriteError
	switch {
	case err == nil && n != st.n:
		s.violate(Staged, c.ks, "the store accepted the success of %s, and %d of its %d staged writes landed (%d before)", st.id, n, st.n, before)
	case err == nil && st.refused:
		s.violate(Staged, c.ks, "the store committed the writes of %s, the last of which its own condition refuses", st.id)
	case err != nil && n != before:
		s.violate(Staged, c.ks, "the store refused the commit of %s (%v), and %d of its writes landed (%d before)", st.id, err, n, before)
	case errors.As(err, &sw) && !st.refused:
		s.violate(Staged, c.ks, "the store refused the commit of %s for a staged write, but none is refused: %v", st.id, err)
	}
	switch {
	case err == nil && before == 0:
		s.stats.StagedLanded++
	case errors.As(err, &sw):
		s.stats.StagedRefused++
	}
}

// errStagedRefused is the error of a staged write's own condition.
var errStagedRefused = errors.New("sim: the staged write's condition failed")

// memStager stages memstore.Writes: each one's Apply counts it as landed.
// Safe for concurrent use (applies run under memstore's lock).
type memStager struct {
	s      *simulation
	mu     sync.Mutex
	landed map[string]int
}

func (m *memStager) Stage(ctx context.Context, id string, n int, refused bool) error {
	ws := make([]memstore.Write, n)
	for i := range ws {
		ws[i].Apply = func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.landed[id]++
		}
	}
	if refused {
		cause := errStagedRefused
		if m.s.chance(0.5) {
			cause = core.MarkTransient(cause)
		}
		ws[n-1].Cond = func() error { return cause }
	}
	return memstore.Stage(ctx, ws...)
}

func (m *memStager) Landed(_ context.Context, id string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.landed[id], nil
}
