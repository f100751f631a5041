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

// releaseCases run for stores that implement idem.Releaser: Release deletes
// only the record that was read, and the key then runs afresh.
var releaseCases = []testCase{
	{"ReleaseByTheHolder", "a runner whose handler asks for no record (core.MarkNoRecord) releases its own reservation, its lease live: the key has no record, more such calls than WithMaxAttempts allows each run, and the next runs afresh at attempt 1", releaseByTheHolder},
	{"ReleasedPrevRefused", "a reservation decided on a retryable failure that an operator released since (a retry whose Reserve comes after the release) writes nothing and returns an error wrapping ErrRecordChanged; decided again, the key runs afresh at attempt 1", releasedPrevRefused},
	{"ReleaseDeletesTheRecordRead", "Release deletes the record that was read, and the key then runs afresh at attempt 1", func(e *env) {
		k := e.key()
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		e.mustComplete(core.Fail(rec, errors.New("card declined"), false, e.at(1), retention))
		read := e.mustGet(k, 2)
		if err := e.release(read); err != nil {
			e.t.Fatalf("Release of the record read = %v, want nil", err)
		}
		if _, err := e.get(k, 3); !errors.Is(err, idem.ErrNotFound) {
			e.t.Fatalf("Get after Release = %v, want ErrNotFound", err)
		}
		fresh := e.mustReserve(k, "tok-b", nil, 4, 30)
		if fresh.Attempts != 1 {
			e.t.Fatalf("attempts after Release = %d, want 1", fresh.Attempts)
		}
		e.equalRecord("Get of the fresh record", e.mustGet(k, 5), fresh)
	}},
	{"ReleaseRefusesATakenOverRecord", "Release refuses (ErrRecordChanged) a record taken over since it was read", func(e *env) {
		k := e.key()
		e.mustReserve(k, "tok-a", nil, 0, 10)
		read := e.mustGet(k, 1)
		taken := e.mustReserve(k, "tok-b", &read, 11, 30)
		if err := e.release(read); !errors.Is(err, idem.ErrRecordChanged) {
			e.t.Fatalf("Release of a record taken over since = %v, want ErrRecordChanged", err)
		}
		e.equalRecord("Get after the refused Release", e.mustGet(k, 12), taken)
	}},
	{"ReleaseRefusesACompletedRecord", "Release refuses an in-progress record completed since it was read", func(e *env) {
		k := e.key()
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		read := e.mustGet(k, 1)
		done := e.mustComplete(core.Succeed(rec, []byte(`{"ok":true}`), e.at(2), retention))
		if err := e.release(read); !errors.Is(err, idem.ErrRecordChanged) {
			e.t.Fatalf("Release of an in-progress record completed since = %v, want ErrRecordChanged", err)
		}
		e.equalRecord("Get after the refused Release", e.mustGet(k, 3), done)
	}},
	{"ReleaseRefusesAnotherAttempt", "Release refuses a record with another attempt number, or a failure retried since", func(e *env) {
		k := e.key()
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		e.mustComplete(core.Fail(rec, errors.New("throttled"), true, e.at(1), retention))
		read := e.mustGet(k, 2)
		forged := read
		forged.Attempts++
		if err := e.release(forged); !errors.Is(err, idem.ErrRecordChanged) {
			e.t.Fatalf("Release with another attempt number = %v, want ErrRecordChanged", err)
		}
		again := e.mustReserve(k, "tok-b", &read, 3, 30)
		if err := e.release(read); !errors.Is(err, idem.ErrRecordChanged) {
			e.t.Fatalf("Release of a failure retried since = %v, want ErrRecordChanged", err)
		}
		e.equalRecord("Get after the refused Releases", e.mustGet(k, 4), again)
	}},
	{"ReleaseOfAnAbsentKey", "Release of a key never written, or released twice, is ErrNotFound", func(e *env) {
		k := e.key()
		absent := core.Reserve(k, fp, "tok-a", nil, e.at(0), e.at(30), retention)
		if err := e.release(absent); !errors.Is(err, idem.ErrNotFound) {
			e.t.Fatalf("Release of a key never written = %v, want ErrNotFound", err)
		}
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		if err := e.release(rec); err != nil {
			e.t.Fatalf("Release = %v, want nil", err)
		}
		if err := e.release(rec); !errors.Is(err, idem.ErrNotFound) {
			e.t.Fatalf("second Release = %v, want ErrNotFound", err)
		}
	}},
	{"ReleasePastRetention", "Release of a record past retention is harmless (nil or ErrNotFound), and the key runs afresh", func(e *env) {
		// A record past retention counts as absent; releasing it is
		// harmless, whether the store still holds it (nil) or has
		// removed it (ErrNotFound).
		k := e.key()
		now := e.at(0)
		rec := core.Reserve(k, fp, "tok-a", nil, now, e.at(2), 5*time.Second)
		if err := e.s.Reserve(context.Background(), rec, nil, now); err != nil {
			e.t.Fatal(err)
		}
		read := e.mustGet(k, 1)
		if err := e.release(read); err != nil && !errors.Is(err, idem.ErrNotFound) {
			e.t.Fatalf("Release past retention = %v, want nil or ErrNotFound", err)
		}
		if err := e.release(read); !errors.Is(err, idem.ErrNotFound) {
			e.t.Fatalf("second Release = %v, want ErrNotFound", err)
		}
		fresh := e.mustReserve(k, "tok-b", nil, 10, 30)
		if fresh.Attempts != 1 {
			e.t.Fatalf("attempts after Release = %d, want 1", fresh.Attempts)
		}
	}},
	{"ReleaseRace", "of concurrent Releases of one record, exactly one succeeds", func(e *env) {
		k := e.key()
		e.mustReserve(k, "tok-a", nil, 0, 10)
		read := e.mustGet(k, 11)
		var (
			wg            sync.WaitGroup
			mu            sync.Mutex
			won, notFound int
			bad           []error
			start         = make(chan struct{})
		)
		for range Racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				err := e.release(read)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case errors.Is(err, idem.ErrNotFound):
					notFound++
				default:
					bad = append(bad, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if won != 1 || notFound != Racers-1 || len(bad) > 0 {
			e.t.Fatalf("%d concurrent Releases: %d succeeded, %d not found, other errors %v; want exactly one success",
				Racers, won, notFound, bad)
		}
	}},
}

// releaseByTheHolder: a runner whose handler asks for no record releases
// its own reservation, whose lease is live, and the key runs afresh.
func releaseByTheHolder(e *env) {
	k := e.key()
	now := e.at(0)
	r, err := idem.New(e.s, idem.WithClock(func() time.Time { return now }), idem.WithMaxAttempts(2))
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 3 { // more than WithMaxAttempts: none is counted
		now = e.at(i)
		_, err := r.Do(ctx, k, []byte(`{}`), func(context.Context) ([]byte, error) {
			return nil, core.MarkNoRecord(errors.New("401: the signature matches no secret"))
		})
		if !errors.Is(err, idem.ErrTransientFailure) {
			e.t.Fatalf("delivery %d, refused: Do = %v, want a transient failure", i+1, err)
		}
		if rec, err := e.get(k, i); !errors.Is(err, idem.ErrNotFound) {
			e.t.Fatalf("delivery %d, refused: Get = %v, %v; want ErrNotFound (the reservation released)", i+1, rec, err)
		}
	}
	now = e.at(5)
	out, err := r.Do(ctx, k, []byte(`{}`), func(context.Context) ([]byte, error) { return []byte(`"done"`), nil })
	if err != nil || out.Verdict != idem.Executed || out.Attempts != 1 {
		e.t.Fatalf("the delivery after = %+v, %v; want executed at attempt 1", out, err)
	}
}

func (e *env) release(rec core.Record) error {
	r, ok := e.s.(idem.Releaser)
	if !ok {
		return fmt.Errorf("store %T is not an idem.Releaser", e.s)
	}
	return r.Release(context.Background(), rec)
}

func (e *env) mustGet(key string, sec int) core.Record {
	e.t.Helper()
	rec, err := e.get(key, sec)
	if err != nil {
		e.t.Fatalf("Get(%s) at t0+%ds = %v, want the record", key, sec, err)
	}
	return rec
}

// releaseStepCases run for stores that implement idem.Releaser and
// idem.StepRecorder: a released key's steps are gone with its record.
var releaseStepCases = []testCase{
	{"ReleasedStepsNotCarried", "after Release of a retryable failure with steps, the fresh reservation carries none of them; the same steps recorded again (the same names and results) are then the new lifetime's, and a takeover carries them", releasedStepsNotCarried},
}

func releasedStepsNotCarried(e *env) {
	k := e.key()
	charge, email := core.Step{Name: "charge", Result: []byte(`"ch_1"`)}, core.Step{Name: "email", Result: []byte(`"sent"`)}
	rec := e.mustReserve(k, "tok-a", nil, 0, 30)
	e.mustRecordStep(k, "tok-a", charge, 1)
	rec.Steps = []core.Step{charge}
	e.mustComplete(core.Fail(rec, errors.New("throttled"), true, e.at(2), retention))
	read := e.mustGet(k, 3)
	e.equalSteps("Get of the failure", read, charge)
	if err := e.release(read); err != nil {
		e.t.Fatalf("Release of the failure with steps = %v, want nil", err)
	}
	fresh := e.mustReserve(k, "tok-b", nil, 4, 10)
	if fresh.Attempts != 1 {
		e.t.Fatalf("attempts after Release = %d, want 1", fresh.Attempts)
	}
	e.equalSteps("the fresh reservation after Release", fresh)
	e.equalSteps("Get after the fresh reservation", e.mustGet(k, 5))
	e.mustRecordStep(k, "tok-b", charge, 6)
	e.mustRecordStep(k, "tok-b", email, 7)
	e.equalSteps("Get after the steps recorded again", e.mustGet(k, 8), charge, email)
	seen := e.mustGet(k, 15)
	taken := e.mustReserve(k, "tok-c", &seen, 15, 30)
	e.equalSteps("the takeover of the fresh lifetime", taken, charge, email)
}

// releasedPrevRefused is the case ReleasedPrevRefused: a release between
// a call's refused reservation (which read the failure) and its Reserve
// over that failure.
func releasedPrevRefused(e *env) {
	k := e.key()
	rec := e.mustReserve(k, "tok-a", nil, 0, 30)
	e.mustComplete(core.Fail(rec, errors.New("throttled"), true, e.at(1), retention))
	_, err := e.reserve(k, "tok-b", nil, 2, 30)
	seen := e.conflict(err, "tok-a", core.StatusFailed)
	if err := e.release(seen); err != nil {
		e.t.Fatalf("Release of the failure = %v, want nil", err)
	}
	if _, err := e.reserve(k, "tok-b", &seen, 3, 30); !errors.Is(err, idem.ErrRecordChanged) {
		e.t.Fatalf("Reserve over the released failure = %v, want ErrRecordChanged", err)
	}
	if got, err := e.get(k, 4); !errors.Is(err, idem.ErrNotFound) {
		e.t.Fatalf("Get after the refused reservation = %v, %v; want ErrNotFound (nothing written)", got, err)
	}
	if fresh := e.mustReserve(k, "tok-c", nil, 5, 30); fresh.Attempts != 1 {
		e.t.Fatalf("attempts after the release = %d, want 1", fresh.Attempts)
	}
}
