package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// Racers is the number of goroutines of the reservation race.
const Racers = 64

// Run runs the conformance suite against the stores newStore returns.
func Run(t *testing.T, newStore func(t *testing.T) idem.Store) {
	t.Helper()
	run := newRunID()
	all := cases
	if _, ok := newStore(t).(idem.Releaser); ok {
		all = append(all[:len(all):len(all)], releaseCases...)
	}
	if _, ok := newStore(t).(idem.LeaseRenewer); ok {
		all = append(all[:len(all):len(all)], renewCases...)
	}
	if _, ok := newStore(t).(idem.StepRecorder); ok {
		all = append(all[:len(all):len(all)], stepCases...)
	}
	if _, ok := newStore(t).(idem.Acquirer); ok {
		all = append(all[:len(all):len(all)], acquireCases...)
	}
	_, renews := newStore(t).(idem.LeaseRenewer)
	if _, steps := newStore(t).(idem.StepRecorder); renews && steps {
		all = append(all[:len(all):len(all)], combinedCases...)
	}
	_, releases := newStore(t).(idem.Releaser)
	if _, steps := newStore(t).(idem.StepRecorder); releases && steps {
		all = append(all[:len(all):len(all)], releaseStepCases...)
	}
	for _, tc := range all {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			e := &env{t: t, s: s, prefix: fmt.Sprintf("st:%s:%s:", run, tc.name), t0: time.Now().Truncate(time.Second)}
			tc.fn(e)
		})
	}
}

func newRunID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

type env struct {
	t      testing.TB
	s      idem.Store
	prefix string
	t0     time.Time
	n      int
}

func (e *env) key() string {
	e.n++
	return fmt.Sprintf("%sk%d", e.prefix, e.n)
}

func (e *env) at(sec int) time.Time { return e.t0.Add(time.Duration(sec) * time.Second) }

const (
	fp        = "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"
	retention = time.Hour
)

// reserve builds and writes a reservation at second sec with a lease of
// leaseSec seconds.
func (e *env) reserve(key, token string, prev *core.Record, sec, leaseSec int) (core.Record, error) {
	now := e.at(sec)
	rec := core.Reserve(key, fp, token, prev, now, now.Add(time.Duration(leaseSec)*time.Second), retention)
	return rec, e.s.Reserve(context.Background(), rec, prev, now)
}

func (e *env) mustReserve(key, token string, prev *core.Record, sec, leaseSec int) core.Record {
	e.t.Helper()
	rec, err := e.reserve(key, token, prev, sec, leaseSec)
	if err != nil {
		e.t.Fatalf("Reserve(%s, token %s) at t0+%ds = %v, want nil", key, token, sec, err)
	}
	return rec
}

func (e *env) mustComplete(rec core.Record) core.Record {
	e.t.Helper()
	got, err := e.s.Complete(context.Background(), rec)
	if err != nil {
		e.t.Fatalf("Complete(%s, %s, token %s) = %v, want nil", rec.Key, rec.Status, rec.LeaseToken, err)
	}
	return got
}

func (e *env) conflict(err error, wantToken string, wantStatus core.Status) core.Record {
	e.t.Helper()
	var ce *idem.ConflictError
	if !errors.As(err, &ce) {
		e.t.Fatalf("error = %v, want *idem.ConflictError", err)
	}
	if ce.Existing.LeaseToken != wantToken || ce.Existing.Status != wantStatus {
		e.t.Fatalf("conflict record = token %s status %s, want token %s status %s", ce.Existing.LeaseToken, ce.Existing.Status, wantToken, wantStatus)
	}
	return ce.Existing
}

func (e *env) get(key string, sec int) (core.Record, error) {
	return e.s.Get(context.Background(), key, e.at(sec))
}

func sameTime(a, b time.Time) bool { return a.Equal(b) || (a.IsZero() && b.IsZero()) }

func (e *env) equalRecord(what string, got, want core.Record) {
	e.t.Helper()
	if got.Key != want.Key || got.Fingerprint != want.Fingerprint || got.Status != want.Status ||
		got.LeaseToken != want.LeaseToken || got.Attempts != want.Attempts || got.Retryable != want.Retryable ||
		got.Error != want.Error || got.ResultOmitted != want.ResultOmitted || !bytes.Equal(got.Result, want.Result) ||
		!sameTime(got.ExpiresAt, want.ExpiresAt) || (want.Status == core.StatusInProgress && !sameTime(got.LeaseUntil, want.LeaseUntil)) {
		e.t.Fatalf("%s = %v result %q error %q fp %s, want %v result %q error %q fp %s", what,
			got, got.Result, got.Error, got.Fingerprint, want, want.Result, want.Error, want.Fingerprint)
	}
}

type testCase struct {
	name string
	doc  string // the checklist line of docs/writing-a-store.md
	fn   func(e *env)
}

// cases are the cases of Run, in the order of the checklist of
// docs/writing-a-store.md.
var cases = []testCase{
	{"ReserveAbsentThenGet", "Get of an absent key returns ErrNotFound; a reservation of it succeeds, and Get returns the record as written", func(e *env) {
		k := e.key()
		if _, err := e.get(k, 0); !errors.Is(err, idem.ErrNotFound) {
			e.t.Fatalf("Get of an absent key = %v, want ErrNotFound", err)
		}
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		got, err := e.get(k, 1)
		if err != nil {
			e.t.Fatalf("Get = %v", err)
		}
		e.equalRecord("Get after Reserve", got, rec)
	}},
	{"LiveLeaseBlocksReserve", "a live lease blocks another reservation with a conflict holding it, even one that presents the live record as prev", func(e *env) {
		k := e.key()
		first := e.mustReserve(k, "tok-a", nil, 0, 30)
		_, err := e.reserve(k, "tok-b", nil, 10, 30)
		e.conflict(err, "tok-a", core.StatusInProgress)
		// Even a caller that presents the live record as prev is refused.
		_, err = e.reserve(k, "tok-c", &first, 29, 30)
		e.conflict(err, "tok-a", core.StatusInProgress)
	}},
	{"ExpiredLeaseTakeover", "an expired lease still blocks a reservation without prev; with the record it saw as prev, a caller takes it over at attempt 2; the stale holder's completion is refused with ErrLeaseLost and the new holder's is stored", func(e *env) {
		k := e.key()
		old := e.mustReserve(k, "tok-old", nil, 0, 30)
		// Without prev, an expired lease still blocks: the caller must
		// decide on the record it saw.
		_, err := e.reserve(k, "tok-new", nil, 31, 30)
		seen := e.conflict(err, "tok-old", core.StatusInProgress)
		nrec := e.mustReserve(k, "tok-new", &seen, 31, 30)
		if nrec.Attempts != 2 {
			e.t.Fatalf("takeover attempts = %d, want 2", nrec.Attempts)
		}
		// The stale holder's completion is refused.
		_, err = e.s.Complete(context.Background(), core.Succeed(old, []byte(`"old"`), e.at(32), retention))
		if !errors.Is(err, idem.ErrLeaseLost) {
			e.t.Fatalf("stale holder's Complete = %v, want ErrLeaseLost", err)
		}
		done := e.mustComplete(core.Succeed(nrec, []byte(`"new"`), e.at(33), retention))
		got, err := e.get(k, 34)
		if err != nil {
			e.t.Fatal(err)
		}
		e.equalRecord("Get after takeover and completion", got, done)
	}},
	{"StalePrevRefused", "a caller that decided on a record since replaced is refused and sees the replacement, even after the replacement's lease expired", func(e *env) {
		k := e.key()
		a := e.mustReserve(k, "tok-a", nil, 0, 10)
		b := e.mustReserve(k, "tok-b", &a, 11, 10)
		// A third caller that decided on a's record (now replaced by b's)
		// is refused and sees b, even after b's lease expired.
		_, err := e.reserve(k, "tok-c", &a, 30, 10)
		e.conflict(err, b.LeaseToken, core.StatusInProgress)
	}},
	{"GonePrevRefused", "a reservation decided on a record (prev) is written only over that record: where no live record is left (prev never stored, or past its retention since), it writes nothing and returns an error wrapping ErrRecordChanged, whether it carries steps or not, and decided again without prev it starts at attempt 1", gonePrevRefused},
	{"SucceededBlocksAndReplays", "a succeeded record blocks every reservation, with or without prev, and the conflict holds it as completed", func(e *env) {
		k := e.key()
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		done := e.mustComplete(core.Succeed(rec, []byte(`{"ok":true}`), e.at(1), retention))
		_, err := e.reserve(k, "tok-b", nil, 2, 30)
		seen := e.conflict(err, "tok-a", core.StatusSucceeded)
		e.equalRecord("conflict record", seen, done)
		_, err = e.reserve(k, "tok-c", &seen, 3, 30)
		e.conflict(err, "tok-a", core.StatusSucceeded)
	}},
	{"PermanentFailureBlocks", "a permanent failure blocks every reservation, with or without prev, and the conflict holds it as completed", func(e *env) {
		k := e.key()
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		done := e.mustComplete(core.Fail(rec, errors.New("card declined"), false, e.at(1), retention))
		_, err := e.reserve(k, "tok-b", nil, 2, 30)
		seen := e.conflict(err, "tok-a", core.StatusFailed)
		e.equalRecord("conflict record", seen, done)
		_, err = e.reserve(k, "tok-c", &seen, 3, 30)
		e.conflict(err, "tok-a", core.StatusFailed)
	}},
	{"RetryableFailureReReserved", "a retryable failure blocks a reservation without prev (the conflict holds it, its attempts and its error); with it as prev, it is re-reserved at attempt 2", func(e *env) {
		k := e.key()
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		e.mustComplete(core.Fail(rec, errors.New("throttled"), true, e.at(1), retention))
		_, err := e.reserve(k, "tok-b", nil, 2, 30)
		seen := e.conflict(err, "tok-a", core.StatusFailed)
		if !seen.Retryable || seen.Attempts != 1 || seen.Error != "throttled" {
			e.t.Fatalf("retryable record = %v error %q, want retryable, 1 attempt, error throttled", seen, seen.Error)
		}
		again := e.mustReserve(k, "tok-b", &seen, 2, 30)
		if again.Attempts != 2 {
			e.t.Fatalf("attempts = %d, want 2", again.Attempts)
		}
		got, err := e.get(k, 3)
		if err != nil {
			e.t.Fatal(err)
		}
		e.equalRecord("Get after retry reservation", got, again)
	}},
	{"RetentionExpiryIsAbsence", "a record past retention counts as absent: Get returns it until its expiry and ErrNotFound from then on, and a new reservation then starts again at attempt 1", func(e *env) {
		k := e.key()
		now := e.at(0)
		rec := core.Reserve(k, fp, "tok-a", nil, now, now.Add(2*time.Second), 5*time.Second)
		if err := e.s.Reserve(context.Background(), rec, nil, now); err != nil {
			e.t.Fatal(err)
		}
		done := e.mustComplete(core.Succeed(rec, []byte(`1`), e.at(1), 5*time.Second)) // expires at t0+6
		if _, err := e.get(k, 5); err != nil {
			e.t.Fatalf("Get one second before expiry = %v, want the record", err)
		}
		if _, err := e.get(k, 6); !errors.Is(err, idem.ErrNotFound) {
			e.t.Fatalf("Get at expiry = %v, want ErrNotFound", err)
		}
		_, err := e.reserve(k, "tok-b", nil, 5, 30)
		e.conflict(err, done.LeaseToken, core.StatusSucceeded)
		fresh := e.mustReserve(k, "tok-b", nil, 7, 30)
		if fresh.Attempts != 1 {
			e.t.Fatalf("attempts after expiry = %d, want 1", fresh.Attempts)
		}
		got, err := e.get(k, 8)
		if err != nil {
			e.t.Fatal(err)
		}
		e.equalRecord("Get of the fresh record", got, fresh)
	}},
	{"CompleteNeedsTheLease", "a completion of an absent key, with another lease token, or after the outcome is stored, is refused with ErrLeaseLost and writes nothing", func(e *env) {
		k := e.key()
		if _, err := e.s.Complete(context.Background(), core.Succeed(core.Record{Key: k, Fingerprint: fp, LeaseToken: "tok-x", Attempts: 1}, nil, e.at(0), retention)); !errors.Is(err, idem.ErrLeaseLost) {
			e.t.Fatalf("Complete of an absent key = %v, want ErrLeaseLost", err)
		}
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		forged := rec
		forged.LeaseToken = "tok-forged"
		if _, err := e.s.Complete(context.Background(), core.Succeed(forged, []byte(`1`), e.at(1), retention)); !errors.Is(err, idem.ErrLeaseLost) {
			e.t.Fatalf("Complete with another token = %v, want ErrLeaseLost", err)
		}
		done := e.mustComplete(core.Fail(rec, errors.New("boom"), false, e.at(2), retention))
		if _, err := e.s.Complete(context.Background(), core.Succeed(rec, []byte(`1`), e.at(3), retention)); !errors.Is(err, idem.ErrLeaseLost) {
			e.t.Fatalf("second Complete = %v, want ErrLeaseLost", err)
		}
		got, err := e.get(k, 4)
		if err != nil {
			e.t.Fatal(err)
		}
		e.equalRecord("Get after refused completions", got, done)
	}},
	{"LiveLeaseOutlivesRetention", "a record whose retention ends before its lease still blocks reservations, and Get returns it, while its lease lives (core.Record.Expired)", func(e *env) {
		// A record whose retention ends before its lease (as a store or a
		// version that did not extend it would write) still blocks while
		// its lease lives: core.Record.Expired.
		k := e.key()
		now := e.at(0)
		rec := core.Reserve(k, fp, "tok-a", nil, now, e.at(900), time.Minute)
		rec.ExpiresAt = e.at(60)
		if err := e.s.Reserve(context.Background(), rec, nil, now); err != nil {
			e.t.Fatal(err)
		}
		_, err := e.reserve(k, "tok-b", nil, 61, 30)
		e.conflict(err, "tok-a", core.StatusInProgress)
		if _, err := e.get(k, 61); err != nil {
			e.t.Fatalf("Get past retention with a live lease = %v, want the record", err)
		}
		e.mustComplete(core.Succeed(rec, []byte(`1`), e.at(62), retention))
		if _, err := e.reserve(k, "tok-c", nil, 901, 30); err == nil {
			e.t.Fatalf("Reserve over a completed record succeeded")
		}
	}},
	{"RetriedWritesRecognised", "a write retried after its answer was lost is answered as the first try was: the reservation with nil, the completion with the stored record; once completed, the reservation conflicts", func(e *env) {
		// A write retried after its answer was lost is answered as the
		// first try was.
		k := e.key()
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		if err := e.s.Reserve(context.Background(), rec, nil, e.at(1)); err != nil {
			e.t.Fatalf("retried Reserve = %v, want nil", err)
		}
		done := e.mustComplete(core.Succeed(rec, []byte(`{"n":1}`), e.at(2), retention))
		again, err := e.s.Complete(context.Background(), core.Succeed(rec, []byte(`{"n":1}`), e.at(3), retention))
		if err != nil {
			e.t.Fatalf("retried Complete = %v, want nil", err)
		}
		e.equalRecord("retried Complete's record", again, done)
		// Once completed, the reservation is no longer the stored record.
		e.conflict(e.s.Reserve(context.Background(), rec, nil, e.at(4)), "tok-a", core.StatusSucceeded)
	}},
	{"CompleteAfterRetentionLosesTheLease", "a completion made past the record's retention is refused with ErrLeaseLost; the key is then reserved afresh at attempt 1", func(e *env) {
		k := e.key()
		now := e.at(0)
		rec := core.Reserve(k, fp, "tok-a", nil, now, e.at(30), time.Minute) // expires at t0+60
		if err := e.s.Reserve(context.Background(), rec, nil, now); err != nil {
			e.t.Fatal(err)
		}
		_, err := e.s.Complete(context.Background(), core.Succeed(rec, []byte(`1`), e.at(61), retention))
		if !errors.Is(err, idem.ErrLeaseLost) {
			e.t.Fatalf("Complete past retention = %v, want ErrLeaseLost", err)
		}
		fresh := e.mustReserve(k, "tok-b", nil, 62, 30)
		if fresh.Attempts != 1 {
			e.t.Fatalf("attempts after expiry = %d, want 1", fresh.Attempts)
		}
	}},
	{"ResultRoundTrip", "results (JSON, bytes that are not UTF-8, empty, 16 KiB) are stored and read back exactly", func(e *env) {
		for i, result := range [][]byte{[]byte(`{"ok":true,"n":1.50}`), []byte("plain text, not JSON \x00\xff"), {}, bytes.Repeat([]byte("abcdefgh"), 2048)} {
			k := e.key()
			rec := e.mustReserve(k, "tok-a", nil, 0, 30)
			done := e.mustComplete(core.Succeed(rec, result, e.at(1), retention))
			got, err := e.get(k, 2)
			if err != nil {
				e.t.Fatalf("case %d: %v", i, err)
			}
			if len(result) == 0 && len(got.Result) == 0 {
				got.Result, done.Result = nil, nil
			}
			e.equalRecord(fmt.Sprintf("case %d: Get", i), got, done)
		}
	}},
	{"LargeResultsReplayTheirBytes", "results of 100 bytes, 4 KiB, 64 KiB and 300 KiB that do not compress are replayed by the conflict and Get as stored (or flagged ResultOmitted without bytes, never other bytes); once the record's retention ends the key runs afresh, and the new result is replayed, not the old", largeResultsReplay},
	{"ReserveRace", "Racers goroutines reserve one absent key at once: exactly one wins, every other gets a conflict, and Get shows the winner's record", func(e *env) {
		k := e.key()
		winners := race(e, func(i int) error {
			_, err := e.reserve(k, fmt.Sprintf("tok-%d", i), nil, 0, 30)
			return err
		})
		got, err := e.get(k, 1)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(winners) != 1 || got.LeaseToken != fmt.Sprintf("tok-%d", winners[0]) {
			e.t.Fatalf("winners = %v, stored token %s; want exactly one winner holding the record", winners, got.LeaseToken)
		}
	}},
	{"TakeoverRace", "Racers goroutines take over one expired lease at once: exactly one wins, at attempt 2, and every other gets a conflict", func(e *env) {
		k := e.key()
		old := e.mustReserve(k, "tok-old", nil, 0, 10)
		winners := race(e, func(i int) error {
			_, err := e.reserve(k, fmt.Sprintf("tok-%d", i), &old, 20, 30)
			return err
		})
		got, err := e.get(k, 21)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(winners) != 1 || got.LeaseToken != fmt.Sprintf("tok-%d", winners[0]) || got.Attempts != 2 {
			e.t.Fatalf("winners = %v, stored %v; want exactly one winner, attempt 2", winners, got)
		}
	}},
}

// race runs Racers calls of fn at once and returns the indexes of those that
// returned nil; every other call must return a *idem.ConflictError.
func race(e *env, fn func(i int) error) []int {
	e.t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []int
		bad     []error
		start   = make(chan struct{})
	)
	for i := 0; i < Racers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			err := fn(i)
			mu.Lock()
			defer mu.Unlock()
			var ce *idem.ConflictError
			switch {
			case err == nil:
				winners = append(winners, i)
			case !errors.As(err, &ce):
				bad = append(bad, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(bad) > 0 {
		e.t.Fatalf("%d racers got errors other than a conflict, first: %v", len(bad), bad[0])
	}
	return winners
}

// gonePrevRefused is the case GonePrevRefused: core.Reservable. A
// reservation decided on prev carries prev's attempt count and, for the
// same payload, its steps; over a key whose record went it would start a
// record lifetime with them.
func gonePrevRefused(e *env) {
	k := e.key()
	ghost := core.Fail(core.Reserve(k, fp, "tok-ghost", nil, e.at(0), e.at(30), retention), errors.New("throttled"), true, e.at(1), retention)
	ghost.Steps = []core.Step{{Name: "charge", Result: []byte(`"ch_1"`)}}
	rec, err := e.reserve(k, "tok-b", &ghost, 2, 30)
	if !errors.Is(err, idem.ErrRecordChanged) || len(rec.Steps) != 1 {
		e.t.Fatalf("Reserve with %d steps over a prev never stored = %v, want ErrRecordChanged", len(rec.Steps), err)
	}
	if got, err := e.get(k, 3); !errors.Is(err, idem.ErrNotFound) {
		e.t.Fatalf("Get after the refused reservation = %v, %v; want ErrNotFound (nothing written)", got, err)
	}
	// A retryable failure, decided on while it lived, written to after its
	// retention ended.
	k = e.key()
	held := e.mustReserve(k, "tok-a", nil, 0, 30)
	failed := e.mustComplete(core.Fail(held, errors.New("throttled"), true, e.at(1), retention))
	decided := core.Reserve(k, fp, "tok-b", &failed, e.at(2), e.at(32), retention)
	later := e.at(int(retention/time.Second) + 100)
	if err := e.s.Reserve(context.Background(), decided, &failed, later); !errors.Is(err, idem.ErrRecordChanged) {
		e.t.Fatalf("Reserve at attempt %d over a prev past its retention = %v, want ErrRecordChanged", decided.Attempts, err)
	}
	fresh := core.Reserve(k, fp, "tok-c", nil, later, later.Add(30*time.Second), retention)
	if err := e.s.Reserve(context.Background(), fresh, nil, later); err != nil || fresh.Attempts != 1 {
		e.t.Fatalf("Reserve decided again without prev = attempt %d, %v; want attempt 1, nil", fresh.Attempts, err)
	}
	got, err := e.s.Get(context.Background(), k, later.Add(time.Second))
	if err != nil {
		e.t.Fatal(err)
	}
	e.equalRecord("Get of the fresh record", got, fresh)
}

// noise returns n random bytes, which do not compress.
func noise(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return b
}

// largeResultsReplay is the case LargeResultsReplayTheirBytes.
func largeResultsReplay(e *env) {
	for _, size := range []int{100, 4 << 10, 64 << 10, 300 << 10} {
		k := e.key()
		first, second := noise(size), noise(size)
		rec := core.Reserve(k, fp, "tok-a", nil, e.at(0), e.at(30), 10*time.Second)
		if err := e.s.Reserve(context.Background(), rec, nil, e.at(0)); err != nil {
			e.t.Fatal(err)
		}
		e.mustComplete(core.Succeed(rec, first, e.at(1), 10*time.Second)) // expires at t0+11
		_, err := e.reserve(k, "tok-b", nil, 2, 30)
		e.replays(fmt.Sprintf("%d bytes: the conflict", size), e.conflict(err, "tok-a", core.StatusSucceeded), first)
		got, err := e.get(k, 3)
		if err != nil {
			e.t.Fatalf("%d bytes: Get = %v", size, err)
		}
		e.replays(fmt.Sprintf("%d bytes: Get", size), got, first)
		again := e.mustReserve(k, "tok-c", nil, 12, 30)
		if again.Attempts != 1 {
			e.t.Fatalf("%d bytes: attempts after retention = %d, want 1", size, again.Attempts)
		}
		e.mustComplete(core.Succeed(again, second, e.at(13), retention))
		_, err = e.reserve(k, "tok-d", nil, 14, 30)
		e.replays(fmt.Sprintf("%d bytes: the conflict after a second execution", size), e.conflict(err, "tok-c", core.StatusSucceeded), second)
	}
}

// replays fails unless got, a succeeded record, holds want, or no bytes
// and ResultOmitted.
func (e *env) replays(what string, got core.Record, want []byte) {
	e.t.Helper()
	if got.ResultOmitted && got.Result == nil {
		return
	}
	if got.ResultOmitted || !bytes.Equal(got.Result, want) {
		e.t.Fatalf("%s: %d bytes (omitted %v), want the %d stored", what, len(got.Result), got.ResultOmitted, len(want))
	}
}
