package storetest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// PreviousEncoding is an optional capability of the store a test gives Run
// (the store itself, or a wrapper of it that forwards its capabilities):
// rewriting a stored record as the store's previous version encoded it.
// Run's cases about records left by an earlier version write them in the
// store's current encoding, and again in the previous one where the store
// under test implements this interface.
type PreviousEncoding interface {
	// Downgrade rewrites the stored record of key, unchanged in meaning,
	// in the store's previous encoding.
	Downgrade(ctx context.Context, key string) error
}

// expiredStepsDropped is the case ExpiredStepsNotCarried: a reservation
// over a retryable failure with steps, past its retention, is a fresh
// execution (core.Reserve, core.Acquire): it carries no step, and the
// same step name with another result is then recorded.
func expiredStepsDropped(e *env) {
	encodings := []string{"current"}
	if _, ok := e.s.(PreviousEncoding); ok {
		encodings = append(encodings, "previous")
	}
	ways := []string{"Reserve"}
	if _, ok := e.s.(idem.Acquirer); ok {
		ways = append(ways, "Acquire")
	}
	for _, enc := range encodings {
		for _, way := range ways {
			e.freshOverOldSteps(fmt.Sprintf("%s over the %s encoding", way, enc), enc == "previous", way == "Acquire")
		}
	}
}

// freshOverOldSteps writes a retryable failure with the step charge (in
// the previous encoding if previous), and reserves its key past retention
// for another payload (by Acquire if acquire, else by Reserve).
func (e *env) freshOverOldSteps(what string, previous, acquire bool) {
	e.t.Helper()
	k := e.key()
	rec := e.mustReserve(k, "tok-old", nil, 0, 30)
	old := core.Step{Name: "charge", Result: []byte(`"ch_OLD"`)}
	e.mustRecordStep(k, "tok-old", old, 1)
	rec.Steps = []core.Step{old}
	e.mustComplete(core.Fail(rec, errors.New("throttled"), true, e.at(2), retention))
	if previous {
		if err := e.s.(PreviousEncoding).Downgrade(context.Background(), k); err != nil {
			e.t.Fatalf("%s: Downgrade = %v", what, err)
		}
	}
	later := int(retention/time.Second) + 100
	now, otherFP := e.at(later), "other-"+fp
	fresh := core.Reserve(k, otherFP, "tok-new", nil, now, now.Add(30*time.Second), retention)
	var err error
	if acquire {
		fresh, _, err = e.s.(idem.Acquirer).Acquire(context.Background(), fresh, now, acquirePolicy)
	} else {
		err = e.s.Reserve(context.Background(), fresh, nil, now)
	}
	if err != nil || fresh.Attempts != 1 {
		e.t.Fatalf("%s: reservation past retention = attempt %d, %v; want attempt 1, nil", what, fresh.Attempts, err)
	}
	e.equalSteps(what+": the reservation", fresh)
	e.equalSteps(what+": Get after the reservation", e.mustGet(k, later))
	step := core.Step{Name: "charge", Result: []byte(`"ch_NEW"`)}
	if err := e.recordStep(k, "tok-new", step, later+1); err != nil {
		e.t.Fatalf("%s: RecordStep of charge for the new payload = %v, want nil", what, err)
	}
	e.equalSteps(what+": Get after the new step", e.mustGet(k, later+2), step)
}
