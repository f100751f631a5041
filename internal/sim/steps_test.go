package sim_test

import (
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/sim"
)

// TestSimSteps: handlers of two steps (idem.Step) with crashes, kills, lost
// answers, overruns and cancellations: a step the store accepted never runs
// again in its record lifetime (invariant 8), and takeovers and retries
// resume after it.
func TestSimSteps(t *testing.T) {
	f := sim.DefaultFaults()
	f.LostAnswer = 0.05
	conservative := sim.Conservative()
	conservative.Name, conservative.Steps = "conservative-steps", true
	res := run(t, memConfig(t, 11, 20000, f, sim.Steps(), conservative))
	st := res.Stats
	if st.StepRuns == 0 || st.StepsRecorded == 0 || st.TakeOvers == 0 || st.Crashes+st.Kills == 0 {
		t.Fatalf("stats %+v: the run does not exercise steps, takeovers and crashes", st)
	}
	// Every try would run both steps without recovery points: fewer runs
	// means some tries resumed after a recorded step.
	if st.StepRuns >= 2*st.Tries {
		t.Errorf("%d step runs in %d tries: no try resumed after a recorded step", st.StepRuns, st.Tries)
	}
}

// TestSimStepsDynalite runs the steps service over the DynamoDB store
// (dynalite under internal/cmd/testenv).
func TestSimStepsDynalite(t *testing.T) {
	dynamoEndpoint(t)
	store := newDynamoStore(t)
	cfg := memConfig(t, 12, 2000, sim.DefaultFaults(), sim.Steps())
	cfg.NewStore = func() idem.Store { return store }
	cfg.StoreResolution = time.Second
	if res := runWith(t, cfg, "go run ./internal/cmd/testenv -server dynalite -- "); res.Stats.StepsRecorded == 0 {
		t.Errorf("no step recorded: %+v", res.Stats)
	}
}
