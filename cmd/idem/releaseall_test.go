package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem/core"
)

// A bulk release deletes the records of one state or verdict written in a time window,
// each on condition that it is still the record the scan read: one that changed since
// is left, and the exit code says so. Records in progress under a live lease, and
// successes, are never released in bulk; a dry run changes nothing.
func TestReleaseBulk(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now().Truncate(time.Second)
	recs := map[string]core.Record{
		"evt:old:permanent":    f.write(t, "evt:old:permanent", fp, now.Add(-3*time.Hour), 1, core.StatusFailed, false),
		"evt:new:permanent":    f.write(t, "evt:new:permanent", fp, now.Add(-30*time.Minute), 1, core.StatusFailed, false),
		"evt:changes:meantime": f.write(t, "evt:changes:meantime", fp, now.Add(-10*time.Minute), 1, core.StatusFailed, false),
		"evt:used:up":          f.write(t, "evt:used:up", fp, now.Add(-time.Hour), 3, core.StatusFailed, true),
		"evt:runs:again":       f.write(t, "evt:runs:again", fp, now.Add(-time.Hour), 1, core.StatusFailed, true),
		"evt:done:ok":          f.write(t, "evt:done:ok", fp, now.Add(-time.Hour), 1, core.StatusSucceeded, false),
		"evt:live:lease":       f.write(t, "evt:live:lease", fp, now.Add(-time.Minute), 1, core.StatusInProgress, false),
		"evt:stuck:lease":      f.write(t, "evt:stuck:lease", fp, now.Add(-time.Hour), 1, core.StatusInProgress, false),
	}
	hash := func(key string) string { return viewOf(recs[key], now).KeyHash }
	present := func(key string) bool {
		_, err := f.store.Get(context.Background(), key, now)
		return err == nil
	}
	released := func(v bulkView, action string) map[string]bool {
		out := map[string]bool{}
		for _, r := range v.Records {
			if r.Action == action {
				out[r.KeyHash] = true
			}
		}
		return out
	}
	base := []string{"release", "--table", f.table, "--json"}

	dry := decodeJSON[bulkView](t, mustCmd(t, exitOK, now, nil, append(base, "--status", "failed-permanent", "--since", "2h", "--dry-run")...).stdout)
	if got := released(dry, "release"); len(got) != 2 || !got[hash("evt:new:permanent")] || !got[hash("evt:changes:meantime")] || dry.Released != 0 {
		t.Errorf("dry run since 2h = %+v, want the two permanent failures of the last two hours, nothing released", dry)
	}
	for key := range recs {
		if !present(key) {
			t.Fatalf("the dry run deleted %s", key)
		}
	}

	v := decodeJSON[bulkView](t, mustCmd(t, exitOK, now, nil, append(base, "--verdict", "retries_exhausted", "--max-attempts", "3", "--yes")...).stdout)
	if got := released(v, "released"); len(got) != 1 || !got[hash("evt:used:up")] || present("evt:used:up") || !present("evt:runs:again") {
		t.Errorf("--verdict retries_exhausted = %+v, want evt:used:up alone released", v)
	}

	// A delivery runs evt:changes:meantime again between the scan and its release.
	proxy := newDynamoProxy(t)
	var once sync.Once
	proxy.before = func(op string, body []byte) {
		if op == "DeleteItem" && strings.Contains(string(body), "evt:changes:meantime") {
			once.Do(func() {
				if err := f.store.Release(context.Background(), recs["evt:changes:meantime"]); err != nil {
					t.Errorf("changing the record: %v", err)
				}
				f.write(t, "evt:changes:meantime", fp, now, 1, core.StatusFailed, false)
			})
		}
	}
	r := mustCmd(t, exitLeftBehind, now, nil, append(base, "--status", "failed-permanent", "--yes", "--endpoint-url", proxy.URL)...)
	v = decodeJSON[bulkView](t, r.stdout)
	if v.Released != 2 || v.Left != 1 || !released(v, "left")[hash("evt:changes:meantime")] || !strings.Contains(r.stderr, "1 record left (changed since read)") {
		t.Errorf("--status failed-permanent = %+v, stderr %s; want 2 released and the changed one left", v, r.stderr)
	}
	if present("evt:old:permanent") || present("evt:new:permanent") || !present("evt:changes:meantime") {
		t.Error("the permanent failures that did not change are not all released, or the changed one is")
	}

	mustCmd(t, exitOK, now, nil, append(base, "--status", "stuck", "--yes")...)
	for key, want := range map[string]bool{"evt:stuck:lease": false, "evt:live:lease": true, "evt:done:ok": true, "evt:runs:again": true} {
		if present(key) != want {
			t.Errorf("%s present: %v, want %v", key, !want, want)
		}
	}

	// Two failures are left: --max 1 takes one, and the token it prints the other.
	r = mustCmd(t, exitLeftBehind, now, nil, append(base, "--status", "failed", "--dry-run", "--max", "1")...)
	first := decodeJSON[bulkView](t, r.stdout)
	if len(first.Records) != 1 || first.Stopped != stoppedMax || first.Next == "" || !strings.Contains(r.stderr, "stopped (--max reached): continue with --next") {
		t.Fatalf("--max 1 = %+v, stderr %s", first, r.stderr)
	}
	rest := decodeJSON[bulkView](t, mustCmd(t, exitOK, now, nil, append(base, "--status", "failed", "--dry-run", "--next", first.Next)...).stdout)
	if len(rest.Records) != 1 || rest.Records[0].KeyHash == first.Records[0].KeyHash {
		t.Errorf("--next after --max 1 = %+v, want the other failure", rest)
	}

	r = mustCmd(t, exitNotReleased, now, strings.NewReader("no\n"), "release", "--table", f.table, "--status", "failed")
	if !strings.Contains(r.stderr, "Release (delete) every record in state failed in "+f.table) || !present("evt:runs:again") {
		t.Errorf("unconfirmed: stderr %s", r.stderr)
	}
}

func TestReleaseBulkUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"in progress", []string{"--status", "in_progress"}, "never released in bulk"},
		{"succeeded", []string{"--status", "succeeded"}, "never released in bulk"},
		{"verdict of no record", []string{"--verdict", "executed"}, "want failed_permanently, replayed_failure or retries_exhausted"},
		{"both", []string{"--status", "failed", "--verdict", "retries_exhausted"}, "not both"},
		{"with a key", []string{"--status", "failed", "--key", "evt:abc:def"}, "take no key"},
		{"bad time", []string{"--status", "failed", "--since", "yesterday"}, `--since "yesterday"`},
	}
	for _, tc := range tests {
		r := cmd(t, t0, nil, append([]string{"release", "--table", "t1x"}, tc.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant exit %d and %q", tc.name, r.code, r.stderr, exitUsage, tc.want)
		}
	}
}
