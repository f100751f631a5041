package sim_test

import (
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/sim"
	"github.com/idemgo/idem/memstore"
)

// stormLease is the lease of sim.Storm's holder: its 60-second deadline
// plus the default margin.
const stormLease = time.Minute + idem.DefaultLeaseMargin

// TestStorm delivers one key 10,000 times while its first execution runs
// (sim.Storm), over the in-memory store and without faults, with the
// runners' default memory of keys in progress and without it. Both runs
// keep every invariant, run the handler once and answer every other
// delivery "in progress". With the memory (the default), the storm costs at
// most one store write per sandbox per recheck interval, and at most 5 per
// second of the lease; without it, one per delivery. It reports what each
// storm cost the store: the figures the benchmark turns into capacity units
// (cmd/bench, storm).
func TestStorm(t *testing.T) {
	t.Parallel()
	const sandboxes = 4
	n := deliveries(10000)
	for _, tc := range []struct {
		name   string
		memory int
	}{{"memory", 0}, {"no memory", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			sv := sim.Storm(sandboxes)
			sv.InProgressMemory = tc.memory
			res, err := sim.Run(sim.Config{Seed: seed(t, 21), Deliveries: n, Services: []sim.Service{sv},
				NewStore: func() idem.Store { return memstore.New() }})
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range res.Violations {
				t.Error(v.Error())
			}
			st := res.Stats
			if st.Tries != 1 || st.Successes != 1 || st.InProgress != n-1 || st.Redeliveries != 0 {
				t.Fatalf("%d deliveries: %d tries, %d successes, %d in progress, %d redeliveries; want 1, 1, %d, 0 (not a storm within one lease)",
					n, st.Tries, st.Successes, st.InProgress, st.Redeliveries, n-1)
			}
			if st.StoreWrites < st.StoreRefusals || st.StoreWrites < 2 {
				t.Fatalf("store writes %d, refusals %d: the counts are inconsistent", st.StoreWrites, st.StoreRefusals)
			}
			perSecond := float64(st.StoreWrites) / stormLease.Seconds()
			t.Logf("storm of %d deliveries over %v of simulated time, %d sandboxes, %s: %d store writes (%.4f per delivery, %.2f per second of the %v lease), %d refused (%.4f per delivery), %d reads",
				n, res.SimTime, sandboxes, tc.name, st.StoreWrites, float64(st.StoreWrites)/float64(n), perSecond, stormLease,
				st.StoreRefusals, float64(st.StoreRefusals)/float64(n), st.StoreReads)
			// The holder's reservation and completion, then at most one
			// recheck per sandbox per interval (the first sight included).
			bound := 2 + sandboxes*(int(res.SimTime/idem.DefaultInProgressRecheck)+1)
			if tc.memory >= 0 && (st.StoreWrites > bound || perSecond > 5) {
				t.Fatalf("with the memory, the storm cost %d store writes (%.1f per second of lease); want at most %d (one per sandbox per %v recheck) and 5 per second of lease",
					st.StoreWrites, perSecond, bound, idem.DefaultInProgressRecheck)
			}
			if tc.memory < 0 && st.StoreRefusals != n-1 {
				t.Fatalf("without the memory, %d refused writes; want one per duplicate (%d)", st.StoreRefusals, n-1)
			}
		})
	}
}
