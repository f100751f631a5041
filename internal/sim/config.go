package sim

import (
	"context"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/blob"
)

// Config is one simulation run. The zero value is not usable: Seed,
// Deliveries, Services (or Draw) and NewStore must be set.
type Config struct {
	// Seed determines the whole run: the same Config with the same Seed
	// makes the same run, step by step (see Result.Hash).
	Seed uint64
	// Deliveries is the number of deliveries to make (Runner.Do calls,
	// and records of batches), redeliveries included.
	Deliveries int
	// Services are the functions sharing the store, each with its own keys,
	// runner configuration and sandboxes.
	Services []Service
	// Draw adds this many services whose capabilities and runner options
	// are drawn from the seed (see Drawn), among those the store has.
	Draw int
	// Faults are the store's and the processes' faults.
	Faults Faults
	// NewStore returns the store under test, empty. It is called once.
	NewStore func() idem.Store
	// NewStoreBlob, if set, is used instead of NewStore: it returns a store
	// that keeps large results in b, a blob store the simulation
	// schedules and faults (ddbstore.WithLargeResults).
	NewStoreBlob func(b blob.Store) idem.Store
	// StoreResolution is how far the store rounds retention ends up (1s for
	// the DynamoDB store, 0 for the in-memory store): a completion within it
	// of its record's end of retention is not judged.
	StoreResolution time.Duration
	// OmitAbove is the size above which the store may omit a result
	// (ResultOmitted): 0 for a store that keeps every result (memstore, or
	// ddbstore with large results).
	OmitAbove int
	// Stager stages writes for services with Stage: memstore's by
	// default. A store that cannot commit them answers idem.ErrNoStaging,
	// and services that stage are not drawn over it.
	Stager Stager
	// MaxViolations stops the run after this many violations (0 means 1).
	// The first violation of each invariant is kept.
	MaxViolations int
	// Regions, if set, makes the store a global table of two Regions,
	// whose replicas are in-memory stores (NewStore stays unset), and
	// checks NoDuplicate and NoLostOutcome (see Regions).
	Regions *Regions
}

// Stager stages the writes of a handler try, to be committed with its
// success (idem.Stage), and says which landed.
type Stager interface {
	// Stage stages, in the handler's context ctx, the n writes of try id;
	// the last one's condition fails at the commit if refused.
	Stage(ctx context.Context, id string, n int, refused bool) error
	// Landed returns how many writes of try id the store applied.
	Landed(ctx context.Context, id string) (int, error)
}

// Faults are the probabilities and latencies of injected faults. The zero
// value injects none and makes every store call instantaneous.
type Faults struct {
	// Crash is the probability that the process dies at a yield point: a
	// store call's request or answer, a handler's start or run, a sleep.
	Crash float64
	// LostAnswer is the probability that a store write is applied but its
	// answer is lost (a transient error is returned instead).
	LostAnswer float64
	// Throttle is the probability that a store call is throttled (a
	// transient error, not applied).
	Throttle float64
	// Timeout is the probability that a store call times out before it is
	// applied (an error wrapping context.DeadlineExceeded).
	Timeout float64
	// LatencyMin and LatencyMax bound each leg (request, answer) of a store
	// call.
	LatencyMin, LatencyMax time.Duration
	// Slow is the probability that a leg takes up to SlowMax instead.
	Slow    float64
	SlowMax time.Duration
	// Release is the mean time between an operator's releases of a record
	// (idem.Releaser, as the idem command's release does: never a record
	// whose lease is live); 0: none.
	Release time.Duration
	// Downgrade is the probability that a recorded outcome (a failure, a
	// success) or step is rewritten in the store's previous encoding, as an
	// earlier version of the store wrote it (where the store can: see
	// PreviousEncoding).
	Downgrade float64
	// Sweep is the mean time between two pages of a sweep that deletes the
	// records past retention (where the store can: see ExpiredSweeper), as
	// the idem command's sweep does where Time to Live deletes nothing; 0:
	// none.
	Sweep time.Duration
}

// ExpiredSweeper is implemented by a store that can delete its records
// past retention as a sweep does (ddbstore's ScanExpired and
// DeleteExpired).
type ExpiredSweeper interface {
	// SweepPage reads the next page of the store's items past retention at
	// now (from the table's start again after its end) and deletes each
	// that is still past retention when it is deleted. It returns the keys
	// of the records it deleted.
	SweepPage(ctx context.Context, now time.Time) ([]string, error)
}

// PreviousEncoding is implemented by a store that can rewrite a record as
// its previous version encoded it (storetest.PreviousEncoding).
type PreviousEncoding interface {
	// Downgrade rewrites the stored record of key, unchanged in meaning,
	// in the store's previous encoding.
	Downgrade(ctx context.Context, key string) error
}

// DeadlineKind is how a delivery's context ends.
type DeadlineKind int

const (
	// NoDeadline: the context has no deadline (a consumer loop, a job).
	NoDeadline DeadlineKind = iota + 1
	// Kill: the context has a deadline and the process is killed when it
	// passes, as Lambda does.
	Kill
	// Cancel: the context has a deadline and is cancelled when it passes;
	// the process goes on (a service's request timeout).
	Cancel
)

// DeadlineMode is one way deliveries are made: a kind and the bounds of the
// timeout (ignored for NoDeadline).
type DeadlineMode struct {
	// Kind is how the context ends.
	Kind DeadlineKind
	// Min and Max bound the timeout, drawn uniformly.
	Min, Max time.Duration
}

// DefaultFaults are the faults of the mixed runs: every kind, at rates that
// leave most deliveries whole.
func DefaultFaults() Faults {
	return Faults{
		Crash: 0.01, LostAnswer: 0.02, Throttle: 0.02, Timeout: 0.01,
		LatencyMin: 200 * time.Microsecond, LatencyMax: 15 * time.Millisecond,
		Slow: 0.01, SlowMax: 800 * time.Millisecond,
	}
}

// AllFaults are DefaultFaults with an operator's releases, records in the
// previous encoding and a sweep of the records past retention.
func AllFaults() Faults {
	f := DefaultFaults()
	f.Release, f.Downgrade, f.Sweep = 5*time.Second, 0.2, 2*time.Second
	return f
}
