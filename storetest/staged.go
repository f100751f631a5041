package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
)

// NewWrite returns, for RunStaged, a write of the store's own type that
// the store's CompleteStaged can commit (an unconditional write of an item
// named after key, on the store's backend), and applied, which reports
// whether that write has been applied. Each call gets a key of its own.
type NewWrite func(t *testing.T, key string) (write any, applied func() bool)

// RunStaged checks the record's side of idem.StagedCompleter, which is the
// same for every store: a commit applies the record and the staged write
// together; a stale holder's commit (its lease taken over), a commit over a
// record completed otherwise and a commit after the record's retention are
// refused as a whole with idem.ErrLeaseLost, the staged write not applied;
// a retried commit whose first try was applied is recognised and returns
// the stored record; through idem.Runner, with lease renewal and steps
// where the store has them, the write lands once with the success.
// newStore's stores must implement
// idem.StagedCompleter; newWrite makes the store's writes. Subtests are
// not run in parallel (a server that is not atomic under concurrency may
// run them).
func RunStaged(t *testing.T, newStore func(t *testing.T) idem.Store, newWrite NewWrite) {
	t.Helper()
	run := newRunID()
	for _, tc := range stagedCases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if _, ok := s.(idem.StagedCompleter); !ok {
				t.Fatalf("store %T does not implement idem.StagedCompleter", s)
			}
			e := &env{t: t, s: s, prefix: fmt.Sprintf("st:%s:%s:", run, tc.name), t0: time.Now().Truncate(time.Second)}
			tc.fn(&stagedEnv{env: e, newWrite: func(key string) (any, func() bool) { return newWrite(t, key) }})
		})
	}
}

type stagedEnv struct {
	*env
	newWrite func(key string) (any, func() bool)
}

func (e *stagedEnv) commit(rec core.Record, w any) (core.Record, error) {
	return e.s.(idem.StagedCompleter).CompleteStaged(context.Background(), rec, []any{w})
}

// refused checks that err wraps ErrLeaseLost and the write was not applied.
func (e *stagedEnv) refused(what string, err error, applied func() bool) {
	e.t.Helper()
	if !errors.Is(err, idem.ErrLeaseLost) {
		e.t.Fatalf("%s: CompleteStaged = %v, want ErrLeaseLost", what, err)
	}
	if applied() {
		e.t.Fatalf("%s: the staged write was applied by a refused commit", what)
	}
}

var stagedCases = []struct {
	name string
	fn   func(e *stagedEnv)
}{
	{"StagedCommitAppliesBoth", func(e *stagedEnv) {
		k := e.key()
		w, applied := e.newWrite(k)
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		want := core.Succeed(rec, []byte(`{"ok":true}`), e.at(1), retention)
		got, err := e.commit(want, w)
		if err != nil {
			e.t.Fatalf("CompleteStaged = %v, want nil", err)
		}
		e.equalRecord("CompleteStaged's record", got, want)
		e.equalRecord("Get after the commit", e.mustGet(k, 2), want)
		if !applied() {
			e.t.Fatal("the staged write was not applied by the commit")
		}
	}},
	{"StaleHolderRefusedAsAWhole", func(e *stagedEnv) {
		k := e.key()
		w, applied := e.newWrite(k)
		stale := e.mustReserve(k, "tok-a", nil, 0, 10)
		read := e.mustGet(k, 1)
		taken := e.mustReserve(k, "tok-b", &read, 11, 30)
		_, err := e.commit(core.Succeed(stale, []byte(`{"stale":true}`), e.at(12), retention), w)
		e.refused("commit by the holder whose lease was taken over", err, applied)
		e.equalRecord("Get after the refused commit", e.mustGet(k, 13), taken)
	}},
	{"CommitOverAnotherOutcomeRefused", func(e *stagedEnv) {
		k := e.key()
		w, applied := e.newWrite(k)
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		failed := e.mustComplete(core.Fail(rec, errors.New("card declined"), false, e.at(1), retention))
		_, err := e.commit(core.Succeed(rec, []byte(`{"ok":true}`), e.at(2), retention), w)
		e.refused("commit over a failure recorded with the same lease", err, applied)
		e.equalRecord("Get after the refused commit", e.mustGet(k, 3), failed)
	}},
	{"RetriedCommitRecognised", func(e *stagedEnv) {
		k := e.key()
		w, applied := e.newWrite(k)
		rec := e.mustReserve(k, "tok-a", nil, 0, 30)
		want := core.Succeed(rec, []byte(`{"ok":true}`), e.at(1), retention)
		if _, err := e.commit(want, w); err != nil {
			e.t.Fatalf("first CompleteStaged = %v, want nil", err)
		}
		got, err := e.commit(want, w)
		if err != nil {
			e.t.Fatalf("retried CompleteStaged = %v, want nil (the stored outcome is this commit's)", err)
		}
		e.equalRecord("retried CompleteStaged's record", got, want)
		if !applied() {
			e.t.Fatal("the staged write is not applied")
		}
	}},
	{"CommitAfterRetentionLosesTheLease", func(e *stagedEnv) {
		k := e.key()
		w, applied := e.newWrite(k)
		rec := e.mustReserve(k, "tok-a", nil, 0, 10)
		late := int(retention/time.Second) + 1
		_, err := e.commit(core.Succeed(rec, []byte(`{"late":true}`), e.at(late), retention), w)
		e.refused("commit after the record's retention", err, applied)
	}},
	{"StagedThroughARunnerWithRenewalAndSteps", stagedThroughARunner},
}

// stagedThroughARunner commits a staged write through idem.Runner, with
// lease renewal and steps where the store has them: the handler records a
// step, runs through renewals past its first lease, records a step after
// it and stages the write; the write lands once with the success, a
// duplicate replays without running, and the success keeps no step.
func stagedThroughARunner(e *stagedEnv) {
	k := e.key()
	w, applied := e.newWrite(k)
	clock := fakeclock.New(e.t0)
	opts := []idem.Option{idem.WithClock(clock.Now), idem.WithSleep(clock.Block), idem.WithRand(func() float64 { return 0.5 }),
		idem.WithLease(renewMargin, time.Hour)}
	_, renews := e.s.(idem.LeaseRenewer)
	_, steps := e.s.(idem.StepRecorder)
	if renews {
		opts = append(opts, idem.WithLeaseRenewal(renewEvery))
	}
	r, err := idem.New(e.s, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	runs := 0
	handler := func(ctx context.Context) ([]byte, error) {
		runs++
		for i := 0; steps && i < 2; i++ {
			if _, err := idem.Step(ctx, fmt.Sprintf("step-%d", i), func(context.Context) ([]byte, error) { return []byte("done"), nil }); err != nil {
				return nil, err
			}
			for j := 0; renews && i == 0 && j < 3; j++ { // three renewals: past the first lease
				if err := clock.WaitBlocked(ctx, 1); err != nil {
					return nil, err
				}
				clock.Advance(renewEvery)
			}
		}
		return []byte(`"staged"`), idem.Stage(ctx, w)
	}
	out, err := r.Do(context.Background(), k, []byte(`{}`), handler)
	if err != nil || out.Verdict != idem.Executed || !applied() {
		e.t.Fatalf("Do (renewal %v, steps %v) = %s, %v; staged write applied %v; want executed, applied", renews, steps, out.Verdict, err, applied())
	}
	out, err = r.Do(context.Background(), k, []byte(`{}`), handler)
	if err != nil || out.Verdict != idem.Replayed || string(out.Result) != `"staged"` || runs != 1 {
		e.t.Fatalf("a duplicate = %s %q, %v after %d runs; want replayed, one run", out.Verdict, out.Result, err, runs)
	}
	if rec := e.mustGet(k, int(clock.Now().Sub(e.t0)/time.Second)); rec.Status != core.StatusSucceeded || len(rec.Steps) != 0 {
		e.t.Fatalf("stored %v with steps %q; want succeeded without steps", rec, rec.Steps)
	}
}
