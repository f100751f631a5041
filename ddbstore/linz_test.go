package ddbstore_test

import (
	"context"
	"os"
	"testing"

	"github.com/idemgo/idem/internal/linz"
)

// linzTargets returns the maker of linz targets on one table of t's: each
// target has a client of its own whose requests get the given faults. On
// a server with transactions (moto), staged writes count in a second
// table. On a server that is not atomic under concurrency (moto), each
// target makes one call at a time: its histories check the store's logic
// and the server's API under faults, not the server's atomicity, which the
// dynalite runs check.
func linzTargets(t *testing.T) func(t *testing.T, f *linz.Faults) *linz.Target {
	integration(t)
	ctx := context.Background()
	client, err := linz.DynamoClient(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	table, _ := newTable(t, client)
	effects := ""
	if os.Getenv("IDEM_DDB_NO_TRANSACTIONS") != "1" {
		effects, _ = newTable(t, client)
	}
	return func(t *testing.T, f *linz.Faults) *linz.Target {
		c, err := linz.DynamoClient(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		target, err := linz.DynamoTarget(c, "ddbstore on "+server(), table, effects, !atomicServer())
		if err != nil {
			t.Fatal(err)
		}
		return target
	}
}

// TestLinearizable checks histories of concurrent clients and runners on
// the DynamoDB-API server, with the fault kit's faults injected into the
// store's requests, for linearizability against the model of the store
// contract.
func TestLinearizable(t *testing.T) {
	sz := linz.Size{Histories: 1, Clients: 4, Runners: 2, Ops: 100, Keys: 3}
	if !atomicServer() {
		sz = linz.Size{Histories: 1, Clients: 3, Runners: 1, Ops: 50, Keys: 2} // one call at a time
	}
	linz.RunLinearizable(t, sz, linz.DefaultRates, linzTargets(t))
}

// TestModel compares the store with the model of the store contract after
// every call of random sequences (rapid's stateful test).
func TestModel(t *testing.T) {
	checks := 25
	if !atomicServer() {
		checks = 8 // moto: some 8 ms a call
	}
	linz.RunModel(t, linzTargets(t)(t, nil), checks)
}
