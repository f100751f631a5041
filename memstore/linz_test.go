package memstore_test

import (
	"testing"

	"github.com/idemgo/idem/internal/linz"
)

// TestLinearizable checks histories of concurrent clients and runners on
// one memstore.Store, with faults injected around its calls, for
// linearizability against the model of the store contract.
func TestLinearizable(t *testing.T) {
	linz.RunLinearizable(t, linz.Size{Histories: 3, Clients: 4, Runners: 2, Ops: 200, Keys: 3}, linz.DefaultRates,
		func(t *testing.T, f *linz.Faults) *linz.Target { return linz.MemTarget(f) })
}

// TestModel compares memstore with the model of the store contract after
// every call of random sequences (rapid's stateful test).
func TestModel(t *testing.T) {
	linz.RunModel(t, linz.MemTarget(nil), 100)
}
