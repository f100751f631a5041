package sim_test

import (
	"testing"
	"time"

	"github.com/idemgo/idem/internal/sim"
)

// TestSimRetriesUnderRenewal: the tries of a call share its reservation,
// and each next try starts a renewal goroutine that renews the lease the
// last one held. Handlers shorter than the renewal's term and mostly
// transient failures make such tries common; the scheduler must run each
// goroutine (a goroutine it did not expect ran beside the scheduler and
// left it waking a thread that had ended). Step writes tried once make
// steps whose write may have been applied, which a next try of the call
// must not skip before the store holds them (StepResult).
func TestSimRetriesUnderRenewal(t *testing.T) {
	sv := sim.Renewing()
	sv.Name, sv.HandlerMax, sv.Steps, sv.CompletionAttempts = "renewed-retries", 5*time.Second, true, 1
	sv.Success, sv.Transient, sv.Permanent, sv.Ordinary = 0.3, 0.6, 0.05, 0.05
	res := run(t, memConfig(t, 9, 5000, sim.DefaultFaults(), sv))
	if st := res.Stats; st.RenewedNextTries == 0 {
		t.Errorf("stats %+v: no next try renewed the lease held", st)
	}
}
