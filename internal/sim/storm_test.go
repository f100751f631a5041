package sim_test

import (
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/sim"
	"github.com/idemgo/idem/memstore"
)

// TestStorm delivers one key 10,000 times while its first execution runs
// (sim.Storm), over the in-memory store and without faults, and checks that
// every invariant holds, that the handler ran once, and that every other
// delivery got "in progress". It reports what the storm cost the store: the
// figures the benchmark turns into capacity units (cmd/bench, storm).
func TestStorm(t *testing.T) {
	t.Parallel()
	n := deliveries(10000)
	res, err := sim.Run(sim.Config{Seed: seed(t, 21), Deliveries: n, Services: []sim.Service{sim.Storm(4)},
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
	t.Logf("storm of %d deliveries over %v of simulated time, 4 sandboxes: %d store writes (%.3f per delivery), %d refused (%.3f per delivery), %d reads",
		n, res.SimTime, st.StoreWrites, float64(st.StoreWrites)/float64(n), st.StoreRefusals, float64(st.StoreRefusals)/float64(n), st.StoreReads)
}
