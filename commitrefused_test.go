package idem_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/refusecommit"
	"github.com/idemgo/idem/memstore"
)

// refusalFixture is a runner over a refusecommit.Store that refuses refuse
// commits and logs JSON into log, with three completion attempts.
func refusalFixture(t *testing.T, refuse int32, permanent bool) (*fixture, *refusecommit.Store, *bytes.Buffer) {
	f := newFixture(t)
	rs := refusecommit.New()
	rs.Refuse.Store(refuse)
	rs.Permanent = permanent
	f.store = rs.Store
	var log bytes.Buffer
	r, err := idem.New(rs, idem.WithClock(f.clock.Now), idem.WithSleep(f.clock.Sleep), idem.WithRand(func() float64 { return 0 }),
		idem.WithRetry(3, base, maxDelay), idem.WithCompletionAttempts(3),
		idem.WithLogger(slog.New(slog.NewJSONHandler(&log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	f.runner = r
	return f, rs, &log
}

// stagedDebit is a handler that stages a debit into l, counting its runs.
func stagedDebit(l *ledger, runs *int) idem.Handler {
	return func(ctx context.Context) ([]byte, error) {
		*runs++
		return []byte(`{"ok":true}`), memstore.Stage(ctx, l.add("debit"))
	}
}

// TestCommitRefused: a success whose commit the store refuses as a whole,
// writing nothing (idem.ErrCommitRefused), is commit_refused, logged at
// ERROR with its cause: after the completion's retries for a transient
// refusal, none for a permanent one, a retryable failure is recorded under
// the call's lease in the success's place, the handler is not run again in
// the call, and the next delivery runs it and commits.
func TestCommitRefused(t *testing.T) {
	for _, tc := range []struct {
		name      string
		permanent bool
		commits   int32
		cause     string
	}{
		{"transient refusal, after the completion's retries", false, 3, "TransactionConflict"},
		{"permanent refusal, at once", true, 1, "access denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, rs, log := refusalFixture(t, -1, tc.permanent)
			var l ledger
			runs := 0
			out, err := f.runner.Do(f.ctx(t, 30*time.Second), "order:refused", []byte(`{}`), stagedDebit(&l, &runs))
			if out.Verdict != idem.CommitRefused || !errors.Is(err, idem.ErrCommitRefused) || errors.Is(err, idem.ErrOutcomeNotRecorded) || out.Result != nil {
				t.Fatalf("Do = %+v, %v; want commit_refused without a result", out, err)
			}
			if runs != 1 || rs.Commits.Load() != tc.commits || len(l.entries) != 0 {
				t.Fatalf("runs %d, commits %d, ledger %v; want 1 run, %d commits, nothing applied", runs, rs.Commits.Load(), l.entries, tc.commits)
			}
			rec, gerr := f.store.Get(context.Background(), "order:refused", f.clock.Now())
			if gerr != nil || rec.Status != core.StatusFailed || !rec.Retryable || rec.Attempts != 1 || !strings.Contains(rec.Error, "commit refused") {
				t.Fatalf("record = %+v, %v; want a retryable failure of attempt 1 naming the refusal", rec, gerr)
			}
			line := records(t, log)
			if len(line) != 1 || line[0]["level"] != "ERROR" || line[0]["verdict"] != "commit_refused" ||
				!strings.Contains(fmt.Sprint(line[0]["error"]), tc.cause) {
				t.Fatalf("log = %v; want one ERROR record of commit_refused with its cause", line)
			}
			rs.Refuse.Store(0)
			out, err = f.runner.Do(f.ctx(t, 30*time.Second), "order:refused", []byte(`{}`), stagedDebit(&l, &runs))
			if err != nil || out.Verdict != idem.Executed || out.Attempts != 2 || runs != 2 || len(l.entries) != 1 {
				t.Fatalf("next delivery = %+v, %v, runs %d, ledger %v; want executed at attempt 2, one debit", out, err, runs, l.entries)
			}
		})
	}
}

// TestCommitRefusedOnceIsRetried: a transient refusal that the completion's
// retry gets past is no refusal: the success commits.
func TestCommitRefusedOnceIsRetried(t *testing.T) {
	f, rs, _ := refusalFixture(t, 1, false)
	var l ledger
	runs := 0
	out, err := f.runner.Do(f.ctx(t, 30*time.Second), "order:once", []byte(`{}`), stagedDebit(&l, &runs))
	if err != nil || out.Verdict != idem.Executed || rs.Commits.Load() != 2 || runs != 1 || len(l.entries) != 1 {
		t.Fatalf("Do = %+v, %v, commits %d, runs %d, ledger %v; want executed on the second commit", out, err, rs.Commits.Load(), runs, l.entries)
	}
}

// TestCommitRefusedFailureNotRecorded: when the failure cannot be recorded
// either, the call is still commit_refused (reported: nothing landed), the
// error names both, and the key stays in progress until its lease ends.
func TestCommitRefusedFailureNotRecorded(t *testing.T) {
	f, rs, _ := refusalFixture(t, -1, true)
	rs.FailWrites.Store(true)
	var l ledger
	runs := 0
	out, err := f.runner.Do(f.ctx(t, 30*time.Second), "order:stuck", []byte(`{}`), stagedDebit(&l, &runs))
	if out.Verdict != idem.CommitRefused || !errors.Is(err, idem.ErrCommitRefused) || !strings.Contains(err.Error(), "throttled") {
		t.Fatalf("Do = %s, %v; want commit_refused, naming the failed write too", out.Verdict, err)
	}
	if rec, gerr := f.store.Get(context.Background(), "order:stuck", f.clock.Now()); gerr != nil || rec.Status != core.StatusInProgress {
		t.Fatalf("record = %+v, %v; want in progress", rec, gerr)
	}
}
