package sim_test

import (
	"testing"

	"github.com/idemgo/idem/internal/sim"
)

// TestSimGroupTenant: SQS services whose wrapper takes each message's group
// as its tenant (idemlambda.WithMessageGroupTenant), over a standard and a
// FIFO queue, beside a service without it over the same store: the scoped
// keys keep every invariant, and the services' records apart.
func TestSimGroupTenant(t *testing.T) {
	standard, fifo, plain := sim.Lambda(), sim.Lambda(), sim.Lambda()
	standard.Name, standard.Batch, standard.BatchMax, standard.GroupTenant = "fair-queue", sim.SQSStandard, 6, true
	fifo.Name, fifo.Batch, fifo.BatchMax, fifo.GroupTenant = "fifo-tenant", sim.SQSFIFO, 6, true
	plain.Name, plain.Batch, plain.BatchMax = "standard", sim.SQSStandard, 6
	run(t, memConfig(t, 25, 5000, sim.DefaultFaults(), standard, fifo, plain))
}
