package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/fakeclock"
	idemlambda "github.com/idemgo/idem/lambda"
)

// mixed is the table of TestList and TestStats, at listNow: each state's
// keys.
type mixed struct {
	f      *fixture
	states map[string][]string // key hashes by state
}

var listNow = t0.Add(10 * time.Minute)

func newMixed(t *testing.T) *mixed {
	t.Helper()
	// Items of at most 4 KB: a result that does not compress below that is
	// omitted; 20 KB of one byte repeated compresses and is kept; 2,000
	// bytes are kept in a result item of their own (the 21st item).
	m := &mixed{f: newFixture(t, ddbstore.WithMaxItemSize(4096)), states: map[string][]string{}}
	big := make([]byte, 8<<10)
	fillIncompressible(big)
	add := func(state string, n int, s spec) {
		for i := range n {
			key := fmt.Sprintf("evt:%s-%d:act", state, i)
			if state == stateSucceeded {
				s.result = [][]byte{nil, []byte(strings.Repeat("x", 100)), []byte(strings.Repeat("y", 2000)), []byte(strings.Repeat("z", 20<<10)), big}[i]
			}
			m.f.put(t, key, s)
			m.states[state] = append(m.states[state], idem.HashKey(key))
		}
		slices.Sort(m.states[state])
	}
	add(stateInProgress, 4, spec{status: core.StatusInProgress, at: 9 * time.Minute, lease: time.Hour})
	add(stateStuck, 3, spec{status: core.StatusInProgress, lease: time.Minute})
	add(stateSucceeded, 5, spec{status: core.StatusSucceeded, done: time.Minute})
	add(stateFailedPermanent, 4, spec{status: core.StatusFailed, errText: "card declined", done: time.Minute})
	add(stateFailedRetryable, 2, spec{status: core.StatusFailed, retryable: true, errText: "throttled", done: time.Minute})
	add(stateExpired, 2, spec{status: core.StatusSucceeded, done: time.Minute, retention: 5 * time.Minute})
	return m
}

func hashesOf(recs []recordView) []string {
	var h []string
	for _, r := range recs {
		h = append(h, r.KeyHash)
	}
	slices.Sort(h)
	return h
}

func TestList(t *testing.T) {
	t.Parallel()
	m := newMixed(t)
	table := m.f.table
	t.Run("pages of a state", func(t *testing.T) {
		first := decodeJSON[listView](t, mustCmd(t, exitOK, listNow, nil, "list", "--table", table, "--status", stateFailedPermanent, "--limit", "3", "--json").stdout)
		if len(first.Records) != 3 || first.Stopped != stoppedLimit || first.Next == "" {
			t.Fatalf("first page: %d records, stopped %q, next %q; want 3, limit, a token", len(first.Records), first.Stopped, first.Next)
		}
		rest := decodeJSON[listView](t, mustCmd(t, exitOK, listNow, nil, "list", "--table", table, "--status", stateFailedPermanent, "--limit", "3", "--next", first.Next, "--json").stdout)
		if rest.Stopped != "" || rest.Next != "" {
			t.Errorf("second page: stopped %q, next %q; want the end of the table", rest.Stopped, rest.Next)
		}
		got := hashesOf(append(first.Records, rest.Records...))
		if !slices.Equal(got, m.states[stateFailedPermanent]) {
			t.Errorf("listed %v, want %v", got, m.states[stateFailedPermanent])
		}
	})
	for _, state := range listStates {
		t.Run(state, func(t *testing.T) {
			want := m.states[state]
			switch state {
			case stateInProgress:
				want = slices.Sorted(slices.Values(append(slices.Clone(want), m.states[stateStuck]...)))
			case string(core.StatusFailed):
				want = slices.Sorted(slices.Values(append(slices.Clone(m.states[stateFailedPermanent]), m.states[stateFailedRetryable]...)))
			}
			v := decodeJSON[listView](t, mustCmd(t, exitOK, listNow, nil, "list", "--table", table, "--status", state, "--json").stdout)
			if got := hashesOf(v.Records); !slices.Equal(got, want) || v.Next != "" || v.State != state {
				t.Errorf("listed %v (next %q), want %v", got, v.Next, want)
			}
		})
	}
	t.Run("all", func(t *testing.T) {
		v := decodeJSON[listView](t, mustCmd(t, exitOK, listNow, nil, "list", "--table", table, "--json").stdout)
		if len(v.Records) != 18 || v.ExpiredSkipped != 2 || v.Scanned != 21 || v.ConsumedRCU <= 0 || v.Next != "" {
			t.Errorf("list: %d records, %d expired skipped, %d scanned, %v RCU, next %q; want 18, 2, 21 (a result item), some, none",
				len(v.Records), v.ExpiredSkipped, v.Scanned, v.ConsumedRCU, v.Next)
		}
	})
	t.Run("table", func(t *testing.T) {
		out := mustCmd(t, exitOK, listNow, nil, "list", "--table", table, "--status", stateFailedPermanent, "--limit", "1").stdout
		lines := strings.Split(out, "\n")
		header := "KEY HASH          STATE             ATTEMPTS  UPDATED               LEASE END  RETENTION END         ERROR"
		if len(lines) != 6 || lines[0] != header || !strings.HasPrefix(lines[4], "stopped (--limit reached): continue with --next v1.") ||
			!strings.HasPrefix(lines[3], "1 record in "+table+" (scanned ") {
			t.Fatalf("list output:\n%s\nwant the header %q, one row, a summary and a continuation", out, header)
		}
		row := strings.Fields(lines[1])
		want := []string{"failed-permanent", "1", "2026-12-03T10:01:00Z", "-", "2026-12-04T10:01:00Z", "card", "declined"}
		if len(row) != 8 || !slices.Contains(m.states[stateFailedPermanent], row[0]) || !slices.Equal(row[1:], want) {
			t.Errorf("row %q, want a failed-permanent key hash and %q", lines[1], want)
		}
	})
}

func TestListCapacityBound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const n = 40
	for i := range n {
		// Items of about 1 KB: a page of a few of them costs 0.5 RCU.
		f.put(t, fmt.Sprintf("evt:cap-%02d:act", i), spec{status: core.StatusFailed, errText: strings.Repeat("e", 1000), done: time.Minute})
	}
	const bound = 1.0
	seen := map[string]bool{}
	next, runs := "", 0
	for {
		args := []string{"list", "--table", f.table, "--limit", "1000", "--max-rcu", fmt.Sprint(bound), "--json"}
		if next != "" {
			args = append(args, "--next", next)
		}
		v := decodeJSON[listView](t, mustCmd(t, exitOK, listNow, nil, args...).stdout)
		runs++
		// One Scan may pass the bound, by at most what its items cost.
		if v.ConsumedRCU > bound+0.5 || (v.ConsumedRCU <= 0 && v.Scanned > 0) {
			t.Errorf("run %d consumed %v RCU, bound %v", runs, v.ConsumedRCU, bound)
		}
		for _, r := range v.Records {
			if seen[r.KeyHash] {
				t.Errorf("run %d listed %s again", runs, r.KeyHash)
			}
			seen[r.KeyHash] = true
		}
		if v.Next == "" {
			break
		}
		if v.Stopped != stoppedMaxRCU {
			t.Fatalf("run %d stopped %q with a token, want max-rcu", runs, v.Stopped)
		}
		next = v.Next
		if runs > n {
			t.Fatal("the listing does not end")
		}
	}
	if len(seen) != n || runs < 3 {
		t.Errorf("listed %d records in %d runs, want %d in several runs", len(seen), runs, n)
	}
	r := mustCmd(t, exitUsage, listNow, nil, "list", "--table", f.table, "--next", "v1.not-a-token!")
	if !strings.Contains(r.stderr, "--next is not a token that list or stats printed") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}

func TestStats(t *testing.T) {
	t.Parallel()
	m := newMixed(t)
	v := decodeJSON[statsView](t, mustCmd(t, exitOK, listNow, nil, "stats", "--table", m.f.table, "--json").stdout)
	want := map[string]int{stateInProgress: 4, stateStuck: 3, stateSucceeded: 5, stateFailedPermanent: 4, stateFailedRetryable: 2, stateExpired: 2}
	if fmt.Sprint(v.States) != fmt.Sprint(want) || !v.Complete || v.Scanned != 21 || v.Corrupt != 0 {
		t.Errorf("stats: states %v complete %v scanned %d; want %v, complete, 21 (a result item)", v.States, v.Complete, v.Scanned, want)
	}
	sizes := map[string]int{}
	for _, b := range v.ResultSizes {
		sizes[b.Range] = b.Count
	}
	wantSizes := map[string]int{"none": 1, "1B-1KiB": 1, "1-4KiB": 1, "4-16KiB": 0, "16-64KiB": 1, "64-256KiB": 0, ">256KiB": 0, "omitted": 1}
	if fmt.Sprint(sizes) != fmt.Sprint(wantSizes) {
		t.Errorf("result sizes %v, want %v", sizes, wantSizes)
	}
	if o := v.OldestInProgress; o == nil || o.State != stateStuck || !slices.Contains(m.states[stateStuck], o.KeyHash) || !o.UpdatedAt.Equal(t0) {
		t.Errorf("oldest in progress = %+v, want a stuck record started at t0", o)
	}

	out := mustCmd(t, exitOK, listNow, nil, "stats", "--table", m.f.table).stdout
	for _, line := range []string{
		"(whole table)",
		"STATE             RECORDS\nin_progress       4\nstuck             3\nsucceeded         5\nfailed-retryable  2\nfailed-permanent  4\nexpired           2\n",
		"\noldest in progress: key hash " + v.OldestInProgress.KeyHash + ", stuck, attempt 1, started 2026-12-03T10:00:00Z (10m0s ago), lease end 2026-12-03T10:01:00Z (9m0s ago)\n",
		"RESULT SIZE  SUCCEEDED\nnone         1\n1B-1KiB      1\n1-4KiB       1\n4-16KiB      0\n16-64KiB     1\n64-256KiB    0\n>256KiB      0\nomitted      1\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("stats output lacks %q:\n%s", line, out)
		}
	}
}

func TestStatsInParts(t *testing.T) {
	t.Parallel()
	m := newMixed(t)
	total := map[string]int{}
	next, parts := "", 0
	for {
		args := []string{"stats", "--table", m.f.table, "--max-rcu", "1", "--json"}
		if next != "" {
			args = append(args, "--next", next)
		}
		v := decodeJSON[statsView](t, mustCmd(t, exitOK, listNow, nil, args...).stdout)
		parts++
		for s, n := range v.States {
			total[s] += n
		}
		if v.Complete != (v.Next == "") {
			t.Errorf("part %d: complete %v with next %q", parts, v.Complete, v.Next)
		}
		if v.Next == "" {
			break
		}
		next = v.Next
		if parts > 20 {
			t.Fatal("stats in parts does not end")
		}
	}
	sum := 0
	for _, n := range total {
		sum += n
	}
	if sum != 20 || parts < 2 || total[stateStuck] != 3 {
		t.Errorf("%d parts counted %v (%d records), want 20 records in several parts", parts, total, sum)
	}
}

func TestTableErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := mustCmd(t, exitNoTable, t0, nil, "inspect", "--table", f.table+"-missing", "--key", "evt:any:key")
	if !strings.Contains(r.stderr, `idem: table "`+f.table+`-missing" not found (or not ACTIVE)`) {
		t.Errorf("missing table: stderr:\n%s", r.stderr)
	}
	r = mustCmd(t, exitSchema, t0, nil, "list", "--table", f.table, "--key-attr", "id")
	if !strings.Contains(r.stderr, "does not have the store's key schema: pass --key-attr") ||
		!strings.Contains(r.stderr, `want a single string partition key "id", table has pk (HASH, S)`) {
		t.Errorf("wrong key schema: stderr:\n%s", r.stderr)
	}
	mustCmd(t, exitUsage, t0, nil, "list", "--table", f.table, "--key-attr", "status")
}

// TestListInterrupted cancels a listing between two pages: what was read is
// shown, with the token that continues it.
func TestListInterrupted(t *testing.T) {
	t.Parallel()
	m := newMixed(t)
	var out bytes.Buffer
	c := &cli{stdout: &out, stderr: io.Discard, now: func() time.Time { return listNow }}
	sc := newScanner(m.f.store, scanFlags{}, "", newProgress(io.Discard, c.now, false))
	first, err := sc.page(context.Background(), 5)
	if err != nil || len(first) != 5 || sc.next == "" {
		t.Fatalf("first page: %d records, next %q, %v", len(first), sc.next, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v, err := c.collect(ctx, sc, filter{}, 100)
	if code, _ := explain(err); code != exitInterrupted || v.Stopped != stoppedInterrupted || v.Next == "" || v.Scanned != 5 {
		t.Fatalf("interrupted collect = %+v, %v (exit %d); want stopped interrupted with a token", v, err, code)
	}
	if err := c.writeList(false, v); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "stopped (interrupted): continue with --next "+v.Next) {
		t.Errorf("output:\n%s", out.String())
	}
}

// In a table shared by functions that give their stores a key prefix each
// (ddbstore.WithKeyPrefix), --prefix lists one function's records.
func TestListPrefix(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	want := map[string][]string{}
	for _, prefix := range []string{"orders-api#", "orders-consumer#", "payments#"} {
		store, err := ddbstore.New(f.client, f.table, ddbstore.WithKeyPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		shared := &fixture{client: f.client, table: f.table, store: store}
		for i := range 3 {
			key := fmt.Sprintf("evt:%d:act", i)
			shared.put(t, key, spec{status: core.StatusSucceeded, done: time.Minute})
			want[prefix] = append(want[prefix], idem.HashKey(prefix+key))
		}
		slices.Sort(want[prefix])
	}
	for _, tc := range []struct {
		name, prefix string
		want         []string
	}{
		{"one function", "orders-consumer#", want["orders-consumer#"]},
		{"two functions", "orders-", slices.Sorted(slices.Values(append(slices.Clone(want["orders-api#"]), want["orders-consumer#"]...)))},
		{"none", "billing#", nil},
	} {
		v := decodeJSON[listView](t, mustCmd(t, exitOK, t0.Add(time.Hour), nil, "list", "--table", f.table, "--prefix", tc.prefix, "--json").stdout)
		if got := hashesOf(v.Records); !slices.Equal(got, tc.want) || v.Prefix != tc.prefix || v.Scanned != 9 {
			t.Errorf("%s: --prefix %s listed %v (prefix %q, scanned %d), want %v of 9", tc.name, tc.prefix, got, v.Prefix, v.Scanned, tc.want)
		}
	}
	// With the function's own --key-prefix, keys are given and hashed as the function's
	// store sees them, and --prefix continues after it.
	v := decodeJSON[listView](t, mustCmd(t, exitOK, t0.Add(time.Hour), nil, "list", "--table", f.table, "--key-prefix", "payments#", "--prefix", "evt:1:", "--json").stdout)
	if got := hashesOf(v.Records); !slices.Equal(got, []string{idem.HashKey("evt:1:act")}) {
		t.Errorf("--key-prefix payments# --prefix evt:1: listed %v, want the hash of evt:1:act", got)
	}
}

// A scan that takes more than a second writes its progress to stderr, by the command's
// clock; --json writes none.
func TestListProgress(t *testing.T) {
	t.Parallel()
	m := newMixed(t)
	for _, tc := range []struct {
		name string
		json bool
		want string
	}{
		{"table", false, "idem: scanning: 3 items, "},
		{"json", true, ""},
	} {
		clock := fakeclock.New(listNow)
		var out, errOut bytes.Buffer
		c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, now: func() time.Time {
			defer clock.Advance(700 * time.Millisecond) // each read of the clock is 0.7 s later
			return clock.Now()
		}}
		args := []string{"list", "--table", m.f.table, "--limit", "3"}
		if tc.json {
			args = append(args, "--json")
		}
		if code := c.run(context.Background(), args); code != exitOK {
			t.Fatalf("%s: exit %d\n%s", tc.name, code, errOut.String())
		}
		if got := errOut.String(); tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: stderr %q, want %q", tc.name, got, tc.want)
		}
	}
}

// create-table makes a table the store works on, and says so; again, it finds it.
func TestCreateTable(t *testing.T) {
	t.Parallel()
	integration(t)
	table := tableName()
	t.Cleanup(func() {
		if cfg, err := config.LoadDefaultConfig(context.Background()); err == nil {
			_, _ = dynamodb.NewFromConfig(cfg).DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		}
	})
	r := mustCmd(t, exitOK, t0, nil, "create-table", "--table", table)
	if !strings.HasPrefix(r.stdout, "created table "+table+" (on demand): pk (partition key, S)\n") || !strings.Contains(r.stdout, "Time to Live") {
		t.Errorf("create-table printed:\n%s", r.stdout)
	}
	v := decodeJSON[createTableView](t, mustCmd(t, exitOK, t0, nil, "create-table", "--table", table, "--json").stdout)
	if v.Created || v.Table != table || v.TTL != ddbstore.DefaultTTLAttribute {
		t.Errorf("create-table again = %+v, want the existing table", v)
	}
	mustCmd(t, exitOK, t0, nil, "stats", "--table", table)
	r = mustCmd(t, exitSchema, t0, nil, "create-table", "--table", table, "--key-attr", "id")
	if !strings.Contains(r.stderr, "does not have the store's key schema") {
		t.Errorf("create-table with another key attribute: stderr:\n%s", r.stderr)
	}
}

// --action selects the keys that name the action (given verbatim as evt:<event-id>:<action>)
// and counts apart the hashed keys, whose action cannot be read.
func TestListAction(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var want []string
	for _, key := range []string{"evt:1001:notify", "evt:order:7:notify", "evt:1001:ship", "evt:1002:notify-2"} {
		f.put(t, key, spec{status: core.StatusSucceeded, done: time.Minute})
		if strings.HasSuffix(key, ":notify") {
			want = append(want, idem.HashKey(key))
		}
	}
	slices.Sort(want)
	for _, id := range []string{"e-1", "e-2"} {
		key, err := idemlambda.EventKey(id, "notify")
		if err != nil {
			t.Fatal(err)
		}
		f.put(t, key, spec{status: core.StatusSucceeded, done: time.Minute})
	}
	v := decodeJSON[listView](t, mustCmd(t, exitOK, t0.Add(time.Hour), nil, "list", "--table", f.table, "--action", "notify", "--json").stdout)
	if got := hashesOf(v.Records); !slices.Equal(got, want) || v.HashedSkipped != 2 || v.Action != "notify" {
		t.Errorf("--action notify listed %v, %d hashed left out; want %v and 2", got, v.HashedSkipped, want)
	}
	out := mustCmd(t, exitOK, t0.Add(time.Hour), nil, "list", "--table", f.table, "--action", "notify").stdout
	if !strings.Contains(out, "2 records in "+f.table) || !strings.Contains(out, "2 records left out: the key is a hash") || !strings.Contains(out, "--prefix") {
		t.Errorf("--action notify printed:\n%s", out)
	}
	for key, want := range map[string]bool{"evt:1:notify": true, "orders#evt:1:notify": true, "evt::notify": false, "evt:1:notify-2": false, "sha256:notify": false} {
		if got := namesAction(key, "notify"); got != want {
			t.Errorf("namesAction(%q, notify) = %v, want %v", key, got, want)
		}
	}
}
