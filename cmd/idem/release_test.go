package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// onRead is a stdin that calls fn on its first read (the moment the
// operator answers the prompt), then answers with answer.
type onRead struct {
	fn     func()
	answer *strings.Reader
}

func (r *onRead) Read(p []byte) (int, error) {
	if r.fn != nil {
		r.fn()
		r.fn = nil
	}
	return r.answer.Read(p)
}

func TestReleaseConfirmed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const key = "evt:release:confirmed"
	f.put(t, key, spec{status: core.StatusFailed, errText: "card declined", done: time.Minute, token: "tok-a"})
	now := t0.Add(time.Hour)
	r := mustCmd(t, exitOK, now, strings.NewReader("yes\n"), "release", "--table", f.table, "--key", key)
	for _, want := range []string{"state:        failed-permanent", "fence:        failed/1/tok-a",
		"released: the record of key hash " + idem.HashKey(key) + " is deleted"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("release output lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "Release (delete) this record?") {
		t.Errorf("no confirmation prompt on stderr:\n%s", r.stderr)
	}
	mustCmd(t, exitNotFound, now, nil, "inspect", "--table", f.table, "--key", key)
	mustCmd(t, exitNotFound, now, nil, "release", "--table", f.table, "--key", key, "--yes")
}

func TestReleaseNotConfirmed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const key = "evt:release:declined"
	f.put(t, key, spec{status: core.StatusFailed, errText: "card declined", done: time.Minute})
	for _, answer := range []string{"no\n", "", "yes please\n"} {
		r := mustCmd(t, exitNotReleased, t0.Add(time.Hour), strings.NewReader(answer), "release", "--table", f.table, "--key", key)
		if !strings.Contains(r.stderr, "not released: not confirmed") {
			t.Errorf("answer %q: stderr:\n%s", answer, r.stderr)
		}
	}
	mustCmd(t, exitOK, t0.Add(time.Hour), nil, "inspect", "--table", f.table, "--key", key)
}

// TestReleaseFencedByItsOwnRead changes the record while the operator is
// answering the prompt: the conditional delete refuses it.
func TestReleaseFencedByItsOwnRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const key = "evt:release:raced"
	failed := f.put(t, key, spec{status: core.StatusFailed, retryable: true, errText: "throttled", done: time.Minute, token: "tok-a"})
	var retried core.Record
	stdin := &onRead{answer: strings.NewReader("yes\n"), fn: func() {
		// A redelivery retries the key meanwhile.
		now := t0.Add(2 * time.Minute)
		retried = core.Reserve(key, fp, "tok-b", &failed, now, now.Add(5*time.Minute), 24*time.Hour)
		if err := f.store.Reserve(context.Background(), retried, &failed, now); err != nil {
			t.Errorf("retry's Reserve = %v", err)
		}
	}}
	r := mustCmd(t, exitChanged, t0.Add(90*time.Second), stdin, "release", "--table", f.table, "--key", key)
	if !strings.Contains(r.stderr, "nothing released: the record changed after it was read") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	got, err := f.store.Get(context.Background(), key, t0.Add(3*time.Minute))
	if err != nil || got.LeaseToken != "tok-b" || got.Status != core.StatusInProgress || got.Attempts != 2 {
		t.Errorf("record after the refused release = %v, %v; want the retry's in-progress record", got, err)
	}
}

// TestReleaseFencedByInspect releases with the fence an earlier inspect
// printed: a record that changed since is not deleted.
func TestReleaseFencedByInspect(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const key = "evt:release:fence"
	f.put(t, key, spec{status: core.StatusInProgress, lease: time.Minute, token: "tok-a"})
	now := t0.Add(2 * time.Minute) // the lease has ended: stuck
	v := decodeJSON[inspectView](t, mustCmd(t, exitOK, now, nil, "inspect", "--table", f.table, "--key", key, "--json").stdout)
	if v.Fence != "in_progress/1/tok-a" || v.Record.State != stateStuck {
		t.Fatalf("inspect: fence %q state %s, want in_progress/1/tok-a, stuck", v.Fence, v.Record.State)
	}
	// The stuck holder completes after all.
	stale, err := f.store.Get(context.Background(), key, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Complete(context.Background(), core.Succeed(stale, []byte(`1`), now, time.Hour)); err != nil {
		t.Fatal(err)
	}
	r := mustCmd(t, exitChanged, now, nil, "release", "--table", f.table, "--key", key, "--fence", v.Fence, "--yes")
	if !strings.Contains(r.stderr, "the record changed since it was inspected (fence in_progress/1/tok-a, now succeeded/1/tok-a)") ||
		!strings.Contains(r.stdout, "state:        succeeded") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	mustCmd(t, exitOK, now, nil, "inspect", "--table", f.table, "--key", key)
	rel := decodeJSON[releaseView](t, mustCmd(t, exitOK, now, nil, "release", "--table", f.table, "--key", key, "--fence", "succeeded/1/tok-a", "--yes", "--json").stdout)
	if !rel.Released || rel.KeyHash != idem.HashKey(key) || rel.Record.State != stateSucceeded {
		t.Errorf("release JSON = %+v", rel)
	}
	if _, err := f.store.Get(context.Background(), key, now); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Get after release = %v, want ErrNotFound", err)
	}
}

func TestReleaseLiveLease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const key = "evt:release:live"
	f.put(t, key, spec{status: core.StatusInProgress, lease: 10 * time.Minute})
	now := t0.Add(time.Minute)
	r := mustCmd(t, exitNotReleased, now, strings.NewReader("yes\n"), "release", "--table", f.table, "--key", key)
	if !strings.Contains(r.stderr, "not released: the lease is live until 2026-12-03T10:10:00Z") || strings.Contains(r.stderr, "Release (delete)") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	mustCmd(t, exitOK, now, nil, "inspect", "--table", f.table, "--key", key)
	mustCmd(t, exitOK, now, nil, "release", "--table", f.table, "--key", key, "--force", "--yes")
	mustCmd(t, exitNotFound, now, nil, "inspect", "--table", f.table, "--key", key)
}

// Releasing a success says until when warm runners with a cache may still
// replay it (now plus their cache TTL); releasing a failure, which no cache
// holds, says nothing of the kind.
func TestReleaseSaysHowLongCachesReplay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := t0.Add(time.Hour)
	for _, tc := range []struct {
		name, key string
		spec      spec
		args      []string
		want      string // the line's until, or "" for no line
	}{
		{"success, default TTL", "evt:release:cache-1", spec{status: core.StatusSucceeded, done: time.Minute}, nil,
			now.Add(idem.DefaultCacheTTL).UTC().Format(time.RFC3339)},
		{"success, --cache-ttl", "evt:release:cache-2", spec{status: core.StatusSucceeded, done: time.Minute}, []string{"--cache-ttl", "5m"},
			now.Add(5 * time.Minute).UTC().Format(time.RFC3339)},
		{"failure", "evt:release:cache-3", spec{status: core.StatusFailed, errText: "card declined", done: time.Minute}, nil, ""},
	} {
		f.put(t, tc.key, tc.spec)
		args := append([]string{"release", "--table", f.table, "--key", tc.key, "--yes"}, tc.args...)
		r := mustCmd(t, exitOK, now, nil, args...)
		line := "may still replay this success from memory until " + tc.want
		if got := strings.Contains(r.stdout, "may still replay"); got != (tc.want != "") || (got && !strings.Contains(r.stdout, line)) {
			t.Errorf("%s: stdout lacks %q (or has it for a failure):\n%s", tc.name, line, r.stdout)
		}
	}
	f.put(t, "evt:release:cache-4", spec{status: core.StatusSucceeded, done: time.Minute})
	rel := decodeJSON[releaseView](t, mustCmd(t, exitOK, now, nil, "release", "--table", f.table, "--key", "evt:release:cache-4", "--yes", "--json").stdout)
	if rel.CacheReplayUntil != now.Add(idem.DefaultCacheTTL).UTC().Format(time.RFC3339) {
		t.Errorf("JSON cache_replay_until = %q", rel.CacheReplayUntil)
	}
	mustCmd(t, exitUsage, now, nil, "release", "--table", f.table, "--key", "evt:release:cache-4", "--cache-ttl", "0s", "--yes")
}
