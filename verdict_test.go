package idem_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// TestVerdicts drives one call to each verdict and checks Outcome.Verdict,
// VerdictOf and the name logs use.
func TestVerdicts(t *testing.T) {
	ok := func(context.Context) ([]byte, error) { return []byte(`1`), nil }
	for _, tc := range []struct {
		name  string
		setup func(f *fixture) // calls made before the one checked
		key   string
		body  string
		fn    idem.Handler
		want  idem.Verdict
		label string
	}{
		{name: "executed", key: "evt:v1:a", fn: ok, want: idem.Executed, label: "executed"},
		{name: "replayed", key: "evt:v2:a", fn: ok, setup: func(f *fixture) { f.mustDo("evt:v2:a", `{}`, ok, false) }, want: idem.Replayed, label: "replayed"},
		{name: "replayed failure", key: "evt:v3:a", fn: ok, setup: func(f *fixture) {
			f.mustDo("evt:v3:a", `{}`, func(context.Context) ([]byte, error) { return nil, core.MarkPermanent(errors.New("declined")) }, true)
		}, want: idem.ReplayedFailure, label: "replayed_failure"},
		{name: "key reused", key: "evt:v4:a", body: `{"n":2}`, fn: ok, setup: func(f *fixture) { f.mustDo("evt:v4:a", `{"n":1}`, ok, false) }, want: idem.KeyReused, label: "key_reused"},
		{name: "invalid key", key: "bad key", fn: ok, want: idem.InvalidKey, label: "invalid_key"},
		{name: "invalid payload", key: "evt:v5:a", body: `{"n":`, fn: ok, want: idem.InvalidPayload, label: "invalid_payload"},
		{name: "failed permanently", key: "evt:v6:a", fn: func(context.Context) ([]byte, error) { return nil, core.MarkPermanent(errors.New("declined")) }, want: idem.FailedPermanently, label: "failed_permanently"},
		{name: "failed unclassified", key: "evt:v9:a", fn: func(context.Context) ([]byte, error) { return nil, errors.New("declined") }, want: idem.FailedUnclassified, label: "failed_unclassified"},
		{name: "failed transiently", key: "evt:v7:a", fn: func(context.Context) ([]byte, error) { return nil, transient("busy") }, want: idem.FailedTransiently, label: "failed_transiently"},
		{name: "retries exhausted", key: "evt:v8:a", fn: ok, setup: func(f *fixture) {
			for i := 0; i < 2; i++ {
				f.mustDo("evt:v8:a", `{}`, func(context.Context) ([]byte, error) { return nil, transient("busy") }, true)
			}
		}, want: idem.RetriesExhausted, label: "retries_exhausted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, idem.WithRetry(1, base, maxDelay), idem.WithMaxAttempts(2))
			f.t = t
			if tc.setup != nil {
				tc.setup(f)
			}
			body := tc.body
			if body == "" {
				body = `{}`
			}
			out, err := f.runner.Do(f.ctx(t, 30*time.Second), tc.key, []byte(body), tc.fn)
			if out.Verdict != tc.want || out.Verdict.String() != tc.label {
				t.Fatalf("Verdict = %v, want %v (%s); err %v", out.Verdict, tc.want, tc.label, err)
			}
			if err != nil && idem.VerdictOf(err) != tc.want {
				t.Fatalf("VerdictOf(%v) = %v, want %v", err, idem.VerdictOf(err), tc.want)
			}
		})
	}
}

func TestVerdictOfJoinedAndStoreErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want idem.Verdict
	}{
		{"nil", nil, idem.VerdictUnknown},
		{"in progress", &core.InProgressError{}, idem.InProgress},
		{"a failure keeps its verdict when not recorded", errors.Join(&core.FailureError{Message: "x"}, idem.ErrOutcomeNotRecorded), idem.FailedPermanently},
		{"a transient failure stays transient when not recorded", errors.Join(fmt.Errorf("%w: busy", idem.ErrTransientFailure), idem.ErrOutcomeNotRecorded), idem.FailedTransiently},
		{"an unclassified failure stays one when not recorded", errors.Join(fmt.Errorf("%w: boom", idem.ErrUnclassifiedFailure), idem.ErrOutcomeNotRecorded), idem.FailedUnclassified},
		{"lease lost", fmt.Errorf("wrapped: %w", idem.ErrLeaseLost), idem.OutcomeNotRecorded},
		{"commit refused", fmt.Errorf("not committed: %w", idem.ErrCommitRefused), idem.CommitRefused},
		{"commit refused, its failure's record refused too", errors.Join(fmt.Errorf("not committed: %w", idem.ErrCommitRefused), idem.ErrLeaseLost), idem.CommitRefused},
		{"store error", core.MarkTransient(errors.New("throttled")), idem.StoreFailed},
	} {
		if got := idem.VerdictOf(tc.err); got != tc.want {
			t.Errorf("%s: VerdictOf = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := idem.Verdict(99).String(); got != "Verdict(99)" {
		t.Errorf("String of an unknown verdict = %q", got)
	}
	if vs := idem.Verdicts(); len(vs) != 22 || vs[0] != idem.Executed || !idem.Executed.Ran() || idem.Replayed.Ran() || !idem.FailedUnclassified.Ran() {
		t.Errorf("Verdicts() = %v", vs)
	}
}
