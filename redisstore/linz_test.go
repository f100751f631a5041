package redisstore_test

import (
	"os"
	"testing"

	"github.com/idemgo/idem/internal/linz"
)

// linzTarget returns a target on a store of its own prefix on the server
// at IDEM_REDIS_ADDR (TestMain starts one when it is unset), whose client
// gets faults from f (none when nil) and does not retry on its own.
func linzTarget(t *testing.T, f *linz.Faults) *linz.Target {
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1: Redis integration test skipped")
	}
	target, closeClient, err := linz.RedisTarget(os.Getenv("IDEM_REDIS_ADDR"), "lz:"+linz.RunID()+":", f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeClient() })
	return target
}

// TestLinearizable checks histories of concurrent clients and runners on
// Redis, with the fault kit's faults injected into the store's scripts,
// for linearizability against the model of the store contract.
func TestLinearizable(t *testing.T) {
	linz.RunLinearizable(t, linz.Size{Histories: 2, Clients: 4, Runners: 2, Ops: 150, Keys: 3}, linz.DefaultRates, linzTarget)
}

// TestModel compares the store with the model of the store contract after
// every call of random sequences (rapid's stateful test).
func TestModel(t *testing.T) {
	linz.RunModel(t, linzTarget(t, nil), 50)
}
