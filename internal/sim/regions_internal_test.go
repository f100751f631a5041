package sim

import (
	"container/heap"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// newTwoRegions returns a simulation of two Regions in mode, with a lag of
// exactly lag, whose store the test calls itself, as the sandboxes of the
// Region it sets in m.home would (MRECHomeRegion routes every call there).
func newTwoRegions(t *testing.T, mode RegionMode, lag time.Duration) (*simulation, *regionsStore) {
	t.Helper()
	s, err := newSim(Config{Seed: 1, Deliveries: 1, Services: []Service{Regional(time.Second)},
		Regions: &Regions{Mode: mode, LagMin: lag, LagMax: lag, ConflictWindow: lag}})
	if err != nil {
		t.Fatal(err)
	}
	return s, s.regions
}

// advance runs the simulation's events up to d from now, and moves now there.
func advance(s *simulation, d time.Duration) {
	end := s.now + d
	s.after(d, func() {})
	for len(s.q) > 0 && s.q[0].at <= end {
		ev := heap.Pop(&s.q).(event) // a function: the test makes no actors
		s.now = ev.at
		ev.fn()
	}
	s.now = end
}

// TestRegionsLastWriterWins: Regions A and B each reserve and complete one
// key before the other's writes arrive. Each replica first applies its own
// writes against its own state; once every write arrived, both hold Region
// B's success (the later write), Region A's success is discarded in B and
// overwritten in A: one outcome lost, silently, and counted as such.
func TestRegionsLastWriterWins(t *testing.T) {
	s, m := newTwoRegions(t, MRECHomeRegion, time.Second)
	ctx := context.Background()
	write := func(region int, token string) core.Record {
		t.Helper()
		m.home = region
		now := epoch.Add(s.now)
		rec := core.Reserve("k", "fp", token, nil, now, now.Add(time.Minute), time.Hour)
		if err := m.Reserve(ctx, rec, nil, now); err != nil {
			t.Fatalf("Region %s: reserve = %v, want accepted against its own replica", regionName(region), err)
		}
		advance(s, 10*time.Millisecond)
		done, err := m.Complete(ctx, core.Succeed(rec, []byte(token), epoch.Add(s.now), time.Hour))
		if err != nil {
			t.Fatalf("Region %s: complete = %v", regionName(region), err)
		}
		return done
	}
	write(0, "a")
	advance(s, 100*time.Millisecond)
	won := write(1, "b")
	advance(s, 5*time.Second)
	for r := range m.reps {
		got, ok := m.reps[r].raw("k")
		if !ok || !core.SameWrite(got, won) || string(got.Result) != "b" {
			t.Errorf("Region %s holds %v (%s), want Region B's success, the last write", regionName(r), got, got.Result)
		}
	}
	s.finishRegions()
	st := m.stats
	if st.Completions != 2 || st.LostCompletions != 1 || st.Replicated != 2 || st.Discarded != 2 {
		t.Errorf("stats %+v, want 2 completions, 1 lost; 2 replicated writes applied (B's in A), 2 discarded (A's in B)", st)
	}
}

// TestRegionsReplicatedWriteSeen: a write made over a replicated one
// descends from it: Region B completes, after the lag, the reservation
// Region A made; nothing is lost, and a later Region A's read sees B's
// success.
func TestRegionsReplicatedWriteSeen(t *testing.T) {
	s, m := newTwoRegions(t, MRECHomeRegion, time.Second)
	ctx := context.Background()
	now := epoch.Add(s.now)
	rec := core.Reserve("k", "fp", "a", nil, now, now.Add(time.Minute), time.Hour)
	if err := m.Reserve(ctx, rec, nil, now); err != nil {
		t.Fatal(err)
	}
	advance(s, 500*time.Millisecond)
	m.home = 1
	if _, err := m.Complete(ctx, core.Succeed(rec, []byte("x"), epoch.Add(s.now), time.Hour)); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("Region B completes before the reservation arrived: %v, want ErrLeaseLost (B holds no record)", err)
	}
	advance(s, time.Second)
	if _, err := m.Complete(ctx, core.Succeed(rec, []byte("x"), epoch.Add(s.now), time.Hour)); err != nil {
		t.Fatalf("Region B completes after the reservation arrived: %v", err)
	}
	advance(s, 2*time.Second)
	m.home = 0
	if got, err := m.Get(ctx, "k", epoch.Add(s.now)); err != nil || got.Status != core.StatusSucceeded {
		t.Errorf("Region A reads %v, %v; want B's success", got, err)
	}
	s.finishRegions()
	if st := m.stats; st.LostCompletions != 0 || st.Completions != 1 {
		t.Errorf("stats %+v, want 1 completion, none lost", st)
	}
}

// TestRegionsConflict: under MRSC, a write of an item the other Region
// wrote less than the window before is refused, transiently, and applies
// nothing; the same Region's write, or one after the window, is accepted.
func TestRegionsConflict(t *testing.T) {
	s, m := newTwoRegions(t, MRSC, 50*time.Millisecond)
	ctx := context.Background()
	region := func(r int) { s.cur = &actor{t: &task{sb: &sandbox{region: r}}} }
	now := epoch.Add(s.now)
	a := core.Reserve("k", "fp", "a", nil, now, now.Add(time.Minute), time.Hour)
	region(0)
	if err := m.Reserve(ctx, a, nil, now); err != nil {
		t.Fatal(err)
	}
	advance(s, 10*time.Millisecond)
	region(1)
	_, err := m.Complete(ctx, core.Succeed(a, nil, epoch.Add(s.now), time.Hour))
	var ie *InjectedError
	if !errors.As(err, &ie) || ie.Kind != "replicated write conflict" || core.Classify(err) != core.Transient {
		t.Fatalf("Region B writes 10 ms after Region A: %v, want a transient replicated write conflict", err)
	}
	if got, _ := m.reps[0].raw("k"); got.Status != core.StatusInProgress {
		t.Errorf("the refused write applied: the item holds %v", got)
	}
	region(0)
	if _, err := m.Complete(ctx, core.Succeed(a, nil, epoch.Add(s.now), time.Hour)); err != nil {
		t.Errorf("Region A writes its own item again: %v, want accepted", err)
	}
	advance(s, 50*time.Millisecond)
	region(1)
	now = epoch.Add(s.now)
	b := core.Reserve("k", "fp", "b", nil, now, now.Add(time.Minute), time.Hour)
	var ce *idem.ConflictError
	if err := m.Reserve(ctx, b, nil, now); !errors.As(err, &ce) || ce.Existing.Status != core.StatusSucceeded {
		t.Errorf("Region B reserves the item after the window: %v, want refused by its condition over Region A's success", err)
	}
	if m.stats.Conflicts != 1 || m.stats.ReserveConflicts != 0 {
		t.Errorf("stats %+v, want 1 conflict, on a completion", m.stats)
	}
}
