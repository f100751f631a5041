package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// RunFaults runs the fault-injection conformance suite against the stores
// newStore returns. newStore builds a store whose transport consults f once
// per request (f.Next(Read) or f.Next(Write), before sending) and does what
// the fault says: see Fault. Each subtest gets a Faults of its own and calls
// newStore once; the store may share a table (or server) with other
// subtests, since each subtest uses its own key prefix.
//
// Every subtest checks that the faults it scripts reach the store's
// transport, so a newStore that ignores f fails rather than passes. The
// suite holds whether or not the transport retries within a call (an SDK's
// retryer): a fault that must fail a call is kept for every request of the
// call, and cleared before the next.
func RunFaults(t *testing.T, newStore func(t *testing.T, f *Faults) idem.Store) {
	t.Helper()
	run := newRunID()
	all := faultCases
	if _, ok := newStore(t, &Faults{}).(idem.Acquirer); ok {
		all = append(all[:len(all):len(all)], acquireFaultCases...)
	}
	for _, tc := range all {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if len(tc.faults) == 0 {
				runFaultCase(t, newStore, run, tc, NoFault)
				return
			}
			for _, fault := range tc.faults {
				t.Run(fault.String(), func(t *testing.T) {
					t.Parallel()
					runFaultCase(t, newStore, run, tc, fault)
				})
			}
		})
	}
}

func runFaultCase(t *testing.T, newStore func(t *testing.T, f *Faults) idem.Store, run string, tc faultCase, fault Fault) {
	f := &Faults{}
	e := newFaultEnv(t, newStore(t, f), f, fmt.Sprintf("sf:%s:%s:%s:", run, tc.name, fault))
	tc.fn(e, fault)
}

// faultCase is one case of RunFaults: run once per fault of faults (a
// subtest each), or once with NoFault if faults is empty.
type faultCase struct {
	name   string
	doc    string // the checklist line of docs/writing-a-store.md
	faults []Fault
	fn     func(e *fenv, fault Fault)
}

// notApplied are the faults after which nothing is applied.
var notApplied = []Fault{FailBefore, Throttled, TimedOut}

// readFaults are the faults of a read.
var readFaults = []Fault{FailBefore, AnswerLost, Throttled, TimedOut}

// fenv is the environment of a fault case: env's helpers, the store's
// Faults, and checks of the errors faults cause.
type fenv struct {
	*env
	f *Faults
}

func newFaultEnv(t testing.TB, s idem.Store, f *Faults, prefix string) *fenv {
	return &fenv{env: &env{t: t, s: s, prefix: prefix, t0: time.Now().Truncate(time.Second)}, f: f}
}

// runnerLease is the lease of the runners of the runner cases (their
// contexts have no deadline).
const runnerLease = time.Minute

// under runs call with every write getting write and every read getting
// read, then clears the faults. It fails the test if a write fault was asked
// for and no write of call reached the store's transport.
func (e *fenv) under(write, read Fault, call func()) {
	e.t.Helper()
	before := e.f.Injected(Write)
	e.f.Always(Write, write)
	e.f.Always(Read, read)
	call()
	e.f.Clear()
	if write != NoFault && e.f.Injected(Write) == before {
		e.t.Fatalf("no write reached the store's transport under %s: newStore must build a store whose every request asks Faults.Next", write)
	}
}

// transient reports whether err is transient as the runner classifies a
// store's errors: explicit marks, then the store's ErrorClassifier if it has
// one, then core.DefaultClassifiers.
func (e *fenv) transient(err error) bool {
	chain := core.DefaultClassifiers
	if c, ok := e.s.(idem.ErrorClassifier); ok {
		chain = append([]core.Classifier{c.ClassifyError}, chain...)
	}
	return core.Classify(err, chain...) == core.Transient
}

// wantTransient fails the test unless err is a transient error that is
// none of the contract's answers (a conflict, a lost lease, not found).
func (e *fenv) wantTransient(what string, err error) {
	e.t.Helper()
	var ce *idem.ConflictError
	switch {
	case err == nil:
		e.t.Fatalf("%s = nil, want a transient error", what)
	case errors.As(err, &ce):
		e.t.Fatalf("%s = %v, want a transient error, not a conflict", what, err)
	case errors.Is(err, idem.ErrLeaseLost):
		e.t.Fatalf("%s = %v, want a transient error, not ErrLeaseLost", what, err)
	case errors.Is(err, idem.ErrNotFound):
		e.t.Fatalf("%s = %v, want a transient error, not ErrNotFound", what, err)
	case !e.transient(err):
		e.t.Fatalf("%s = %v, classified %s; want a transient error (core.MarkTransient, or transient for core.DefaultClassifiers or the store's ErrorClassifier)",
			what, err, core.Classify(err, core.DefaultClassifiers...))
	}
}

// nilOrTransient fails the test unless err is nil or transient.
func (e *fenv) nilOrTransient(what string, err error) {
	e.t.Helper()
	if err != nil {
		e.wantTransient(what, err)
	}
}

// state fails the test unless the live record of key at sec is want, or
// there is none if want is nil.
func (e *fenv) state(what, key string, sec int, want *core.Record) {
	e.t.Helper()
	got, err := e.get(key, sec)
	switch {
	case want == nil && !errors.Is(err, idem.ErrNotFound):
		e.t.Fatalf("%s: Get = %v, %v; want ErrNotFound (nothing applied)", what, got, err)
	case want == nil:
	case err != nil:
		e.t.Fatalf("%s: Get = %v, want %v", what, err, *want)
	default:
		e.equalRecord(what+": Get", got, *want)
	}
}

// startState is a state a reservation starts from, on a key of its own:
// prev is the record it decides on (nil: the key is absent), sec the time of
// the reservation.
type startState struct {
	name string
	key  string
	prev *core.Record
	sec  int
}

// startStates writes the three states a reservation may be made from:
// absent, an in-progress record whose lease ended, and a retryable failure.
func (e *fenv) startStates() []startState {
	e.t.Helper()
	absent, expired, retry := e.key(), e.key(), e.key()
	old := e.mustReserve(expired, "tok-old", nil, 0, 10)
	r := e.mustReserve(retry, "tok-old", nil, 0, 30)
	failed := e.mustComplete(core.Fail(r, errors.New("throttled"), true, e.at(1), retention))
	return []startState{
		{"absent key", absent, nil, 20},
		{"expired lease", expired, &old, 20},
		{"retryable failure", retry, &failed, 20},
	}
}

// newReservation is the reservation of st's key with token, from st, with
// a lease of 30 seconds.
func (e *fenv) newReservation(token string, st startState) core.Record {
	now := e.at(st.sec)
	return core.Reserve(st.key, fp, token, st.prev, now, now.Add(30*time.Second), retention)
}

// outcomes are the completions a case tries on a reservation, made at now:
// a success, a permanent failure and a retryable failure.
func outcomes(rec core.Record, now time.Time) []core.Record {
	return []core.Record{
		core.Succeed(rec, []byte(`{"paid":true}`), now, retention),
		core.Fail(rec, errors.New("card declined"), false, now, retention),
		core.Fail(rec, errors.New("gateway timeout"), true, now, retention),
	}
}
