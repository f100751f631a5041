package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// faultCases are the cases of RunFaults, in the order of the checklist of
// docs/writing-a-store.md.
var faultCases = []faultCase{
	{"ReserveNotApplied", "a reservation refused at the transport, over an absent key, an expired lease or a retryable failure, returns a transient error and writes nothing (Get shows the previous state); its identical retry succeeds",
		notApplied, reserveNotApplied},
	{"ReserveAnswerLost", "a reservation applied whose answer is lost returns nil (the store recognised its own write) or a transient error, never a conflict; it is stored, its identical retry returns nil, and a second reserver with another token conflicts",
		nil, reserveAnswerLost(NoFault)},
	{"ReserveAnswerLostCheckFails", "the same when every read fails too, so the store cannot check its own write: nil or a transient error, never a conflict; once the faults clear, the reservation is stored, its retry returns nil and another reserver conflicts",
		nil, reserveAnswerLost(FailBefore)},
	{"RetriedReserveAfterTakeover", "a reservation whose answer was lost and whose lease then ended is taken over by another caller; the first caller's identical retry then conflicts with the new holder",
		nil, retriedReserveAfterTakeover},
	{"ReserveBlockedReadFails", "a reservation blocked by a live record while reads fail gets a conflict holding that record or a transient error, never nil, and writes nothing",
		readFaults, reserveBlockedReadFails},
	{"ReserveRaceUnderFaults", "Racers goroutines reserve one key while the first Racers/2 writes fail or lose their answers, each retrying its identical reservation after a transient error: exactly one wins, every other gets a conflict holding the winner's token",
		nil, reserveRaceUnderFaults},
	{"CompleteNotApplied", "a completion (success, permanent or retryable failure) refused at the transport returns a transient error, not ErrLeaseLost, and writes nothing (Get shows the in-progress record); its identical retry returns the stored outcome",
		notApplied, completeNotApplied},
	{"CompleteAnswerLost", "a completion applied whose answer is lost returns the outcome or a transient error; Get shows the outcome; its identical retry, while reads fail, returns the outcome or a transient error, never ErrLeaseLost, and once answered returns the stored record; another outcome for the same lease is refused with ErrLeaseLost",
		nil, completeAnswerLost},
	{"StaleCompleteRefused", "under the fault, the completion of a holder whose lease was taken over, or whose record is past retention, returns ErrLeaseLost or a transient error, never success; its retry returns ErrLeaseLost, and Get shows the new holder's record, or nothing",
		append([]Fault{AnswerLost}, notApplied...), staleCompleteRefused},
	{"GetUnderFaults", "a read that fails returns a transient error, never ErrNotFound nor a record, for a stored key and an absent one; once the fault clears, Get answers again",
		readFaults, getUnderFaults},
	{"RunnerReserveNotApplied", "through idem.Runner: a reservation refused at the transport returns a transient error and the handler does not run; the next delivery executes it once",
		notApplied, runnerReserveNotApplied},
	{"RunnerReserveAnswerLost", "through idem.Runner, with reads answered and with reads failing: a reservation whose answer is lost either executes (the store recognised its write) or returns a transient error without running the handler; a duplicate while the lease lives does not run it; in all, it runs once",
		nil, runnerReserveAnswerLost},
	{"RunnerRetryAnswersLost", "through idem.Runner: a handler that fails transiently once is retried in the call under its reservation, with no write to the store between the tries, and the retry's success loses its answer; the store recognises the retried completion: Do returns the retry's result at attempt 1, a duplicate replays it, the handler ran twice",
		nil, runnerRetryAnswersLost},
	{"RunnerCompleteNotApplied", "through idem.Runner: a completion refused once at the transport is retried by the runner; Do returns the handler's result, a duplicate replays it, the handler ran once",
		notApplied, runnerCompleteNotApplied},
	{"RunnerCompleteNeverApplied", "through idem.Runner: a completion refused every time returns ErrOutcomeNotRecorded; a duplicate while the lease lives gets ErrInProgress and does not run the handler; after the lease ends, a delivery runs it again and its outcome is stored",
		notApplied, runnerCompleteNeverApplied},
	{"RunnerCompleteAnswerLost", "through idem.Runner: a completion whose answer is lost once is retried and recognised by the store; Do returns the handler's result, a duplicate replays it, the handler ran once",
		nil, runnerCompleteAnswerLost},
	{"RunnerCompleteAnswerLostAlways", "through idem.Runner: when every completion's answer is lost, Do returns the result or ErrOutcomeNotRecorded; the outcome is stored anyway and a duplicate replays it; the handler ran once",
		nil, runnerCompleteAnswerLostAlways},
	{"RunnerStorm", "through idem.Runner, with its default memory of keys in progress: 100 deliveries over 10 s of a key another process holds make at most 11 store calls, each answered in progress: with the holder's lease end from the store, or from the runner's memory with its next recheck of the key, before that lease end; 100 more while every write is throttled make at most 5, each in progress or the store's transient error; once the holder's success is stored, a delivery replays it from the store before the lease ends; the handler never runs",
		nil, runnerStorm},
}

func reserveNotApplied(e *fenv, fault Fault) {
	for _, st := range e.startStates() {
		k := st.key
		rec := e.newReservation("tok-new", st)
		var err error
		e.under(fault, NoFault, func() { err = e.s.Reserve(context.Background(), rec, st.prev, e.at(st.sec)) })
		e.wantTransient(st.name+": Reserve under "+fault.String(), err)
		e.state(st.name+": after the refused Reserve", k, st.sec, st.prev)
		if err := e.s.Reserve(context.Background(), rec, st.prev, e.at(st.sec)); err != nil {
			e.t.Fatalf("%s: identical retry of the Reserve = %v, want nil", st.name, err)
		}
		e.state(st.name+": after the retry", k, st.sec+1, &rec)
	}
}

// reserveAnswerLost returns the case of a reservation whose answer is lost
// while every read gets reads.
func reserveAnswerLost(reads Fault) func(e *fenv, _ Fault) {
	return func(e *fenv, _ Fault) {
		for _, st := range e.startStates() {
			k := st.key
			rec := e.newReservation("tok-new", st)
			var err error
			e.under(AnswerLost, reads, func() { err = e.s.Reserve(context.Background(), rec, st.prev, e.at(st.sec)) })
			e.nilOrTransient(st.name+": Reserve whose answer was lost", err)
			e.state(st.name+": after the lost answer", k, st.sec, &rec)
			if err := e.s.Reserve(context.Background(), rec, st.prev, e.at(st.sec+1)); err != nil {
				e.t.Fatalf("%s: identical retry of the Reserve = %v, want nil (the store's own write)", st.name, err)
			}
			other := e.newReservation("tok-other", st)
			e.conflict(e.s.Reserve(context.Background(), other, st.prev, e.at(st.sec+1)), "tok-new", core.StatusInProgress)
			e.state(st.name+": after the second reserver", k, st.sec+2, &rec)
		}
	}
}

func retriedReserveAfterTakeover(e *fenv, _ Fault) {
	k := e.key()
	rec := core.Reserve(k, fp, "tok-a", nil, e.at(0), e.at(10), retention)
	var err error
	e.under(AnswerLost, NoFault, func() { err = e.s.Reserve(context.Background(), rec, nil, e.at(0)) })
	e.nilOrTransient("Reserve whose answer was lost", err)
	_, err = e.reserve(k, "tok-b", nil, 20, 30)
	seen := e.conflict(err, "tok-a", core.StatusInProgress)
	b := e.mustReserve(k, "tok-b", &seen, 20, 30)
	e.conflict(e.s.Reserve(context.Background(), rec, nil, e.at(21)), "tok-b", core.StatusInProgress)
	e.state("after the retry", k, 22, &b)
}

func reserveBlockedReadFails(e *fenv, fault Fault) {
	k := e.key()
	a := e.mustReserve(k, "tok-a", nil, 0, 30)
	var err error
	e.under(NoFault, fault, func() {
		_, err = e.reserve(k, "tok-b", nil, 1, 30)
	})
	var ce *idem.ConflictError
	if errors.As(err, &ce) {
		e.conflict(err, "tok-a", core.StatusInProgress)
	} else {
		e.wantTransient("blocked Reserve while reads fail", err)
	}
	e.state("after the blocked Reserve", k, 2, &a)
}

func reserveRaceUnderFaults(e *fenv, _ Fault) {
	k := e.key()
	script := make([]Fault, Racers/2)
	for i := range script {
		script[i] = []Fault{AnswerLost, FailBefore, AnswerLost, Throttled, AnswerLost, TimedOut}[i%6]
	}
	e.f.Set(Write, script...)
	var (
		mu      sync.Mutex
		holders = map[string]int{} // token held by each conflict → count
	)
	winners := race(e.env, func(i int) error {
		rec := core.Reserve(k, fp, fmt.Sprintf("tok-%d", i), nil, e.at(0), e.at(30), retention)
		var err error
		for try := 0; try <= len(script); try++ {
			if err = e.s.Reserve(context.Background(), rec, nil, e.at(0)); err == nil || !e.transient(err) {
				break
			}
		}
		var ce *idem.ConflictError
		if errors.As(err, &ce) {
			mu.Lock()
			holders[ce.Existing.LeaseToken]++
			mu.Unlock()
		}
		return err
	})
	if n := e.f.Pending(Write); n > 0 {
		e.t.Fatalf("%d of %d write faults never reached the store's transport", n, len(script))
	}
	if len(winners) != 1 {
		e.t.Fatalf("winners = %v, want exactly one", winners)
	}
	want := fmt.Sprintf("tok-%d", winners[0])
	if len(holders) != 1 || holders[want] != Racers-1 {
		e.t.Fatalf("conflicts held %v, want %d conflicts holding the winner's %s", holders, Racers-1, want)
	}
	got, err := e.get(k, 1)
	if err != nil || got.LeaseToken != want {
		e.t.Fatalf("Get = %v, %v; want the winner's record (%s)", got, err, want)
	}
}

func completeNotApplied(e *fenv, fault Fault) {
	for i := range 3 {
		k := e.key()
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		out := outcomes(rec, e.at(1))[i]
		var err error
		e.under(fault, NoFault, func() { _, err = e.s.Complete(context.Background(), out) })
		e.wantTransient(fmt.Sprintf("Complete(%s) under %s", out.Status, fault), err)
		e.state("after the refused Complete", k, 2, &rec)
		got := e.mustComplete(out)
		e.equalRecord("identical retry of the Complete", got, out)
		e.state("after the retry", k, 2, &out)
	}
}

func completeAnswerLost(e *fenv, _ Fault) {
	for i := range 3 {
		k := e.key()
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		out := outcomes(rec, e.at(1))[i]
		what := fmt.Sprintf("Complete(%s) whose answer was lost", out.Status)
		got, err := e.complete(AnswerLost, NoFault, out)
		e.outcomeOrTransient(what, got, err, out)
		e.state("after the lost answer", k, 2, &out)
		got, err = e.complete(NoFault, FailBefore, out)
		e.outcomeOrTransient("its retry while reads fail", got, err, out)
		for range 2 {
			e.equalRecord("its identical retry", e.mustComplete(out), out)
		}
		// Another status for the same lease (core.SameWrite compares
		// statuses) is not a retry of the stored outcome.
		other := outcomes(rec, e.at(3))[0]
		if out.Status == core.StatusSucceeded {
			other = outcomes(rec, e.at(3))[1]
		}
		if _, err := e.s.Complete(context.Background(), other); !errors.Is(err, idem.ErrLeaseLost) {
			e.t.Fatalf("Complete(%s) after the stored %s = %v, want ErrLeaseLost", other.Status, out.Status, err)
		}
		e.state("after the other outcome", k, 4, &out)
	}
}

// complete calls Complete with every write getting write and every read
// getting read.
func (e *fenv) complete(write, read Fault, rec core.Record) (core.Record, error) {
	e.t.Helper()
	var (
		got core.Record
		err error
	)
	e.under(write, read, func() { got, err = e.s.Complete(context.Background(), rec) })
	return got, err
}

// outcomeOrTransient fails the test unless a Complete of want returned want
// with nil, or a transient error.
func (e *fenv) outcomeOrTransient(what string, got core.Record, err error, want core.Record) {
	e.t.Helper()
	if err == nil {
		e.equalRecord(what, got, want)
		return
	}
	e.wantTransient(what, err)
}

func staleCompleteRefused(e *fenv, fault Fault) {
	k := e.key()
	old := e.mustReserve(k, "tok-old", nil, 0, 10)
	_, err := e.reserve(k, "tok-new", nil, 20, 30)
	seen := e.conflict(err, "tok-old", core.StatusInProgress)
	nw := e.mustReserve(k, "tok-new", &seen, 20, 30)
	e.staleComplete("the taken-over holder's", core.Succeed(old, []byte(`"old"`), e.at(21), retention), fault)
	e.state("after the stale completion", k, 22, &nw)

	k = e.key()
	rec := core.Reserve(k, fp, "tok-a", nil, e.at(0), e.at(30), time.Minute) // expires at t0+60
	if err := e.s.Reserve(context.Background(), rec, nil, e.at(0)); err != nil {
		e.t.Fatal(err)
	}
	e.staleComplete("a completion past retention", core.Succeed(rec, []byte(`"late"`), e.at(61), retention), fault)
	e.state("after the completion past retention", k, 62, nil)
}

// staleComplete checks that a completion that must be refused is refused
// under fault, and without it.
func (e *fenv) staleComplete(what string, rec core.Record, fault Fault) {
	e.t.Helper()
	_, err := e.complete(fault, NoFault, rec)
	if !errors.Is(err, idem.ErrLeaseLost) {
		e.wantTransient(what+" Complete under "+fault.String(), err)
	}
	if _, err := e.s.Complete(context.Background(), rec); !errors.Is(err, idem.ErrLeaseLost) {
		e.t.Fatalf("%s Complete, retried = %v, want ErrLeaseLost", what, err)
	}
}

func getUnderFaults(e *fenv, fault Fault) {
	k := e.key()
	rec := e.mustReserve(k, "tok-a", nil, 0, 30)
	done := e.mustComplete(core.Succeed(rec, []byte(`"done"`), e.at(1), retention))
	absent := e.key()
	for _, key := range []string{k, absent} {
		before := e.f.Injected(Read)
		var (
			got core.Record
			err error
		)
		e.under(NoFault, fault, func() { got, err = e.get(key, 2) })
		if e.f.Injected(Read) == before {
			e.t.Fatalf("no read reached the store's transport under %s: newStore must build a store whose every request asks Faults.Next", fault)
		}
		if err == nil {
			e.t.Fatalf("Get under %s = %v, nil; want a transient error", fault, got)
		}
		e.wantTransient("Get under "+fault.String(), err)
	}
	e.state("once the fault cleared", k, 2, &done)
	e.state("once the fault cleared, an absent key", absent, 2, nil)
}
