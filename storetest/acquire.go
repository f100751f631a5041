package storetest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// acquirePolicy is the attempt bound of the acquire cases.
var acquirePolicy = core.Policy{MaxAttempts: 3}

// acquire builds the reservation of token at second sec, with a lease of
// leaseSec seconds, and acquires the key with it under acquirePolicy (fp:
// the payload's fingerprint).
func (e *env) acquire(key, token, fp string, sec, leaseSec int) (core.Record, *core.Record, error) {
	now := e.at(sec)
	rec := core.Reserve(key, fp, token, nil, now, now.Add(time.Duration(leaseSec)*time.Second), retention)
	return e.s.(idem.Acquirer).Acquire(context.Background(), rec, now, acquirePolicy)
}

// mustAcquire acquires the key and checks the attempt written and the
// token of the live record replaced ("" for none).
func (e *env) mustAcquire(key, token string, sec, leaseSec, wantAttempt int, wantPrev string) core.Record {
	e.t.Helper()
	rec, prev, err := e.acquire(key, token, fp, sec, leaseSec)
	if err != nil {
		e.t.Fatalf("Acquire(%s, token %s) at t0+%ds = %v, want nil", key, token, sec, err)
	}
	if rec.Attempts != wantAttempt || rec.LeaseToken != token || rec.Status != core.StatusInProgress {
		e.t.Fatalf("Acquire(token %s) at t0+%ds wrote %v, want attempt %d in progress", token, sec, rec, wantAttempt)
	}
	if got := prevToken(prev); got != wantPrev {
		e.t.Fatalf("Acquire(token %s) at t0+%ds replaced %q, want %q", token, sec, got, wantPrev)
	}
	e.equalRecord("Get after Acquire", e.mustGet(key, sec), rec)
	return rec
}

func prevToken(prev *core.Record) string {
	if prev == nil {
		return ""
	}
	return prev.LeaseToken
}

// failRetryably completes rec as a retryable failure at second sec.
func (e *env) failRetryably(rec core.Record, sec int) core.Record {
	e.t.Helper()
	return e.mustComplete(core.Fail(rec, errors.New("throttled"), true, e.at(sec), retention))
}

// acquireCases run for stores that implement idem.Acquirer: one write
// replaces what core.Acquirable allows, counts the attempt, and refuses the
// rest with the blocking record.
var acquireCases = []testCase{
	{"AcquireAbsent", "Acquire of an absent key writes attempt 1 and replaces nothing; Get returns the record as written", func(e *env) {
		e.mustAcquire(e.key(), "tok-a", 0, 30, 1, "")
	}},
	{"AcquireRetriesRetryableFailure", "Acquire over a retryable failure writes the next attempt and returns the failure it replaced; the failure's holder cannot complete again", func(e *env) {
		k := e.key()
		a := e.mustAcquire(k, "tok-a", 0, 30, 1, "")
		e.failRetryably(a, 1)
		b := e.mustAcquire(k, "tok-b", 2, 30, 2, "tok-a")
		if _, err := e.s.Complete(context.Background(), core.Succeed(a, nil, e.at(3), retention)); !errors.Is(err, idem.ErrLeaseLost) {
			e.t.Fatalf("Complete by the failed holder = %v, want ErrLeaseLost", err)
		}
		e.equalRecord("Get", e.mustGet(k, 4), b)
	}},
	{"AcquireTakesOverExpiredLease", "a live lease refuses Acquire with a conflict holding it; once the lease ended, Acquire takes it over at the next attempt, and the stale holder's completion is refused", func(e *env) {
		k := e.key()
		old := e.mustAcquire(k, "tok-old", 0, 30, 1, "")
		_, _, err := e.acquire(k, "tok-early", fp, 10, 30)
		e.conflict(err, "tok-old", core.StatusInProgress)
		nrec := e.mustAcquire(k, "tok-new", 31, 30, 2, "tok-old")
		if _, err := e.s.Complete(context.Background(), core.Succeed(old, nil, e.at(32), retention)); !errors.Is(err, idem.ErrLeaseLost) {
			e.t.Fatalf("stale holder's Complete = %v, want ErrLeaseLost", err)
		}
		e.mustComplete(core.Succeed(nrec, []byte(`"new"`), e.at(33), retention))
	}},
	{"AcquireRestartsAfterRetention", "a record past retention counts as absent: Acquire writes attempt 1 over a succeeded record, a retryable failure or an in-progress record whose lease ended, and replaces nothing", func(e *env) {
		later := int(retention/time.Second) + 100
		done := e.key()
		rec := e.mustAcquire(done, "tok-a", 0, 30, 1, "")
		e.mustComplete(core.Succeed(rec, []byte(`1`), e.at(1), retention))
		e.mustAcquire(done, "tok-b", later, 30, 1, "")
		failed := e.key()
		rec = e.mustAcquire(failed, "tok-a", 0, 30, 1, "")
		e.failRetryably(rec, 1)
		e.mustAcquire(failed, "tok-b", later, 30, 1, "")
		crashed := e.key()
		e.mustAcquire(crashed, "tok-a", 0, 30, 1, "")
		e.mustAcquire(crashed, "tok-b", later, 30, 1, "")
	}},
	{"AcquireRefusesAtTheBound", "at the attempt bound, Acquire over a retryable failure or an expired lease is refused with a conflict holding the record", func(e *env) {
		k := e.key()
		rec := e.mustAcquire(k, "tok-1", 0, 30, 1, "")
		e.failRetryably(rec, 1)
		rec = e.mustAcquire(k, "tok-2", 2, 30, 2, "tok-1")
		e.failRetryably(rec, 3)
		e.mustAcquire(k, "tok-3", 4, 30, 3, "tok-2")
		_, _, err := e.acquire(k, "tok-4", fp, 40, 30)
		if seen := e.conflict(err, "tok-3", core.StatusInProgress); seen.Attempts != 3 {
			e.t.Fatalf("conflict record attempt %d, want 3", seen.Attempts)
		}
	}},
	{"AcquireWithoutBound", "under core.NoAttemptLimit (a call whose source limits its deliveries: idem.ContextWithSourceLimit), Acquire retries a retryable failure past any bound: the sixth attempt is written, where a bound of 3 refuses the fourth", func(e *env) {
		k := e.key()
		unbounded := core.Policy{MaxAttempts: core.NoAttemptLimit}
		for attempt := 1; attempt <= 6; attempt++ {
			if attempt == 4 {
				// Over the third failure, a bound of 3 refuses.
				if _, _, err := e.acquire(k, "tok-bounded", fp, 2*attempt, 30); !errors.As(err, new(*idem.ConflictError)) {
					e.t.Fatalf("Acquire over the third failure under a bound of 3 = %v, want a conflict", err)
				}
			}
			now := e.at(2 * attempt)
			rec := core.Reserve(k, fp, fmt.Sprintf("tok-%d", attempt), nil, now, now.Add(30*time.Second), retention)
			got, _, err := e.s.(idem.Acquirer).Acquire(context.Background(), rec, now, unbounded)
			if err != nil || got.Attempts != attempt {
				e.t.Fatalf("Acquire %d without a bound = %v, %v; want attempt %d", attempt, got, err, attempt)
			}
			e.failRetryably(got, 2*attempt+1)
		}
	}},
	{"AcquireRefusesAnotherPayload", "Acquire with another fingerprint is refused with a conflict holding the record, over a retryable failure and over an expired lease", func(e *env) {
		k := e.key()
		e.mustAcquire(k, "tok-a", 0, 30, 1, "")
		_, _, err := e.acquire(k, "tok-b", "other-"+fp, 31, 30)
		e.conflict(err, "tok-a", core.StatusInProgress)
		rec := e.mustAcquire(k, "tok-c", 32, 30, 2, "tok-a")
		e.failRetryably(rec, 33)
		_, _, err = e.acquire(k, "tok-d", "other-"+fp, 34, 30)
		if seen := e.conflict(err, "tok-c", core.StatusFailed); seen.Fingerprint != fp {
			e.t.Fatalf("conflict record fingerprint %s, want %s", seen.Fingerprint, fp)
		}
	}},
	{"AcquireRefusedByCompletedRecords", "a succeeded record and a permanent failure refuse Acquire with a conflict holding them as completed", func(e *env) {
		for _, ok := range []bool{true, false} {
			k := e.key()
			rec := e.mustAcquire(k, "tok-a", 0, 30, 1, "")
			var done core.Record
			if ok {
				done = e.mustComplete(core.Succeed(rec, []byte(`{"ok":true}`), e.at(1), retention))
			} else {
				done = e.mustComplete(core.Fail(rec, errors.New("card declined"), false, e.at(1), retention))
			}
			_, _, err := e.acquire(k, "tok-b", fp, 2, 30)
			e.equalRecord("conflict record", e.conflict(err, "tok-a", done.Status), done)
		}
	}},
	{"AcquireRetriedWrite", "an Acquire retried after its answer was lost (same token) returns the record it wrote, with no error and no further attempt", func(e *env) {
		k := e.key()
		rec := e.mustAcquire(k, "tok-a", 0, 30, 1, "")
		e.failRetryably(rec, 1)
		first := e.mustAcquire(k, "tok-b", 2, 30, 2, "tok-a")
		again, _, err := e.acquire(k, "tok-b", fp, 3, 30)
		if err != nil {
			e.t.Fatalf("retried Acquire = %v, want nil", err)
		}
		e.equalRecord("retried Acquire", again, first)
	}},
	{"AcquireAfterReserve", "Acquire and Reserve agree: Acquire continues the count of a record Reserve wrote, and Reserve takes over a record Acquire wrote with it as prev", func(e *env) {
		k := e.key()
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		e.failRetryably(rec, 1)
		acq := e.mustAcquire(k, "tok-b", 2, 10, 2, "tok-a")
		if again := e.mustReserve(k, "tok-c", &acq, 13, 30); again.Attempts != 3 {
			e.t.Fatalf("Reserve over the acquired record: attempt %d, want 3", again.Attempts)
		}
	}},
	{"AcquireRace", "Racers goroutines acquire one key at once, absent and then a retryable failure: exactly one wins each time, every other gets a conflict", func(e *env) {
		k := e.key()
		for round, want := range []int{1, 2} {
			winners := race(e, func(i int) error {
				_, _, err := e.acquire(k, fmt.Sprintf("tok-%d-%d", round, i), fp, round*10, 30)
				return err
			})
			got := e.mustGet(k, round*10+1)
			if len(winners) != 1 || got.LeaseToken != fmt.Sprintf("tok-%d-%d", round, winners[0]) || got.Attempts != want {
				e.t.Fatalf("round %d: winners = %v, stored %v; want one winner at attempt %d", round, winners, got, want)
			}
			e.failRetryably(got, round*10+2)
		}
	}},
	{"AcquireCarriesSteps", "for a store that also records steps (idem.StepRecorder): Acquire over an ended lease or a retryable failure carries the record's steps (Get shows them), and Acquire over a record past retention starts without them", func(e *env) {
		if _, ok := e.s.(idem.StepRecorder); !ok {
			e.t.Skip("the store does not record steps (idem.StepRecorder)")
		}
		k := e.key()
		e.mustReserve(k, "tok-a", nil, 0, 10)
		charge := core.Step{Name: "charge", Result: []byte(`"ch_1"`)}
		e.mustRecordStep(k, "tok-a", charge, 1)
		taken := e.mustAcquire(k, "tok-b", 11, 30, 2, "tok-a")
		e.equalSteps("the takeover's record", taken, charge)
		e.equalSteps("Get after the takeover", e.mustGet(k, 12), charge)
		failed := e.failRetryably(taken, 13)
		e.equalSteps("the stored failure", failed, charge)
		retried := e.mustAcquire(k, "tok-c", 14, 30, 3, "tok-b")
		e.equalSteps("the retry's record", retried, charge)
		e.equalSteps("Get after the retry", e.mustGet(k, 15), charge)
		e.failRetryably(retried, 16)
		late := 16 + int(retention/time.Second) + 1
		fresh, _, err := e.acquire(k, "tok-d", fp, late, 30)
		if err != nil || fresh.Attempts != 1 {
			e.t.Fatalf("Acquire past retention = %v attempt %d, want nil at attempt 1", err, fresh.Attempts)
		}
		e.equalSteps("the fresh record", fresh)
		e.equalSteps("Get of the fresh record", e.mustGet(k, late+1))
	}},
}

// acquireFaultCases run in RunFaults for stores that implement
// idem.Acquirer.
var acquireFaultCases = []faultCase{
	{"AcquireNotApplied", "for an idem.Acquirer: an acquisition refused at the transport, over an absent key, an expired lease or a retryable failure, returns a transient error and writes nothing; its identical retry acquires the key at the attempt core.Acquire counts",
		notApplied, acquireNotApplied},
	{"AcquireAnswerLost", "for an idem.Acquirer, with reads answered and with reads failing: an acquisition applied whose answer is lost returns the record written or a transient error, never a conflict; it is stored, its identical retry returns it, and another caller conflicts",
		nil, acquireAnswerLost},
}

// acquireAt acquires st's key with rec, made by newReservation, at second sec.
func (e *fenv) acquireAt(rec core.Record, sec int) (core.Record, error) {
	got, _, err := e.s.(idem.Acquirer).Acquire(context.Background(), rec, e.at(sec), acquirePolicy)
	return got, err
}

func acquireNotApplied(e *fenv, fault Fault) {
	for _, st := range e.startStates() {
		rec := e.newReservation("tok-new", st) // core.Reserve with st.prev: the attempt core.Acquire counts
		var err error
		e.under(fault, NoFault, func() { _, err = e.acquireAt(rec, st.sec) })
		e.wantTransient(st.name+": Acquire under "+fault.String(), err)
		e.state(st.name+": after the refused Acquire", st.key, st.sec, st.prev)
		got, err := e.acquireAt(rec, st.sec)
		if err != nil || got.Attempts != rec.Attempts {
			e.t.Fatalf("%s: identical retry of the Acquire = %v, %v; want attempt %d", st.name, got, err, rec.Attempts)
		}
		e.state(st.name+": after the retry", st.key, st.sec+1, &rec)
	}
}

func acquireAnswerLost(e *fenv, _ Fault) {
	for _, reads := range []Fault{NoFault, FailBefore} {
		for _, st := range e.startStates() {
			what := fmt.Sprintf("%s (reads %s)", st.name, reads)
			rec := e.newReservation("tok-new", st)
			var got core.Record
			var err error
			e.under(AnswerLost, reads, func() { got, err = e.acquireAt(rec, st.sec) })
			e.nilOrTransient(what+": Acquire whose answer was lost", err)
			if err == nil {
				e.equalRecord(what+": Acquire whose answer was lost", got, rec)
			}
			e.state(what+": after the lost answer", st.key, st.sec, &rec)
			if got, err = e.acquireAt(rec, st.sec+1); err != nil {
				e.t.Fatalf("%s: identical retry of the Acquire = %v, want the record (the store's own write)", what, err)
			}
			e.equalRecord(what+": identical retry", got, rec)
			_, err = e.acquireAt(e.newReservation("tok-other", st), st.sec+1)
			e.conflict(err, "tok-new", core.StatusInProgress)
		}
	}
}
