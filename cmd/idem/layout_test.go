package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
)

// ordersLayout is a single-table layout, as store options and as the flags
// that describe it.
var (
	ordersLayout = []ddbstore.Option{
		ddbstore.WithKeyAttribute("PK"), ddbstore.WithSortKey("SK", "idempotency#"), ddbstore.WithKeyPrefix("orders#"),
		ddbstore.WithTTLAttribute("ttl"),
		ddbstore.WithAttributeNames(ddbstore.AttributeNames{Status: "state", Result: "data", LeaseUntil: "lease"}),
	}
	ordersFlags = []string{"--key-attr", "PK", "--sort-key", "SK", "--sort-key-value", "idempotency#", "--key-prefix", "orders#",
		"--ttl-attr", "ttl", "--attr", "status=state", "--attr", "result=data", "--attr", "lease_until_ms=lease"}
)

// TestSingleTableLayout runs every command on a table shared by two stores
// (prefixes orders# and payments#) and an item of another entity: with the
// orders store's flags, each sees and releases the orders store's records
// only.
func TestSingleTableLayout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ordersLayout...)
	payments, err := ddbstore.New(f.client, f.table, append(slices.Clone(ordersLayout), ddbstore.WithKeyPrefix("payments#"))...)
	if err != nil {
		t.Fatal(err)
	}
	other := &fixture{client: f.client, table: f.table, store: payments}
	const key = "evt:order-1001:ship"
	f.put(t, key, spec{status: core.StatusFailed, errText: "card declined", done: time.Minute, token: "tok-orders"})
	f.put(t, "evt:order-1002:ship", spec{status: core.StatusSucceeded, result: []byte(`{"ok":1}`), done: time.Minute})
	other.put(t, key, spec{status: core.StatusSucceeded, result: []byte(`{"paid":1}`), done: time.Minute, token: "tok-payments"})
	now := t0.Add(time.Hour)
	run := func(code int, args ...string) result {
		t.Helper()
		return mustCmd(t, code, now, nil, append(append(args[:1:1], ordersFlags...), args[1:]...)...)
	}

	v := decodeJSON[inspectView](t, run(exitOK, "inspect", "--table", f.table, "--key", key, "--json").stdout)
	if v.Record == nil || v.Record.State != stateFailedPermanent || v.Fence != "failed/1/tok-orders" || v.KeyHash != idem.HashKey(key) {
		t.Errorf("inspect = %+v, want the orders store's failed record", v)
	}
	l := decodeJSON[listView](t, run(exitOK, "list", "--table", f.table, "--json").stdout)
	if got, want := hashesOf(l.Records), []string{idem.HashKey(key), idem.HashKey("evt:order-1002:ship")}; !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("list = %v, want the orders store's two records", got)
	}
	s := decodeJSON[statsView](t, run(exitOK, "stats", "--table", f.table, "--json").stdout)
	if s.States[stateFailedPermanent] != 1 || s.States[stateSucceeded] != 1 || s.Corrupt != 0 {
		t.Errorf("stats = %v (%d corrupt), want one failed and one succeeded record", s.States, s.Corrupt)
	}
	run(exitOK, "release", "--table", f.table, "--key", key, "--yes")
	run(exitNotFound, "inspect", "--table", f.table, "--key", key)
	if rec, err := payments.Get(t.Context(), key, now); err != nil || rec.LeaseToken != "tok-payments" {
		t.Errorf("the payments store's record after the release = %v, %v; want it kept", rec, err)
	}

	// Without the sort key, the table's key schema is not the store's.
	r := mustCmd(t, exitSchema, now, nil, "list", "--table", f.table, "--key-attr", "PK")
	if !strings.Contains(r.stderr, "pass --key-attr (and --sort-key) as the store is configured") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	// Names that clash are a usage error.
	r = run(exitUsage, "list", "--table", f.table, "--attr", "error=state")
	if !strings.Contains(r.stderr, `attributes are both named "state"`) {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}

// TestSortKeyFromKey: --sort-key-value with {key} finds the records of a
// store whose sort key value is computed from the key.
func TestSortKeyFromKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ddbstore.WithSortKeyFunc("sk", func(k string) string { return "idem#" + k + "#v1" }))
	const key = "evt:order-7:ship"
	f.put(t, key, spec{status: core.StatusSucceeded, result: []byte(`{"ok":1}`), done: time.Minute, token: "tok-7"})
	now := t0.Add(time.Hour)
	v := decodeJSON[inspectView](t, mustCmd(t, exitOK, now, nil, "inspect", "--table", f.table, "--sort-key", "sk",
		"--sort-key-value", "idem#{key}#v1", "--key", key, "--json").stdout)
	if v.Record == nil || v.Fence != "succeeded/1/tok-7" {
		t.Errorf("inspect = %+v, want the succeeded record", v)
	}
	l := decodeJSON[listView](t, mustCmd(t, exitOK, now, nil, "list", "--table", f.table, "--sort-key", "sk",
		"--sort-key-value", "idem#{key}#v1", "--json").stdout)
	if len(l.Records) != 1 || l.Records[0].KeyHash != idem.HashKey(key) {
		t.Errorf("list = %+v, want the record", l.Records)
	}
	mustCmd(t, exitNotFound, now, nil, "inspect", "--table", f.table, "--sort-key", "sk", "--sort-key-value", "idem#{key}", "--key", key)
}

func TestLayoutFlagErrors(t *testing.T) {
	t.Setenv("IDEM_TABLE", "")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"sort key without value", []string{"list", "--table", "t1x", "--sort-key", "SK"}, "--sort-key needs --sort-key-value"},
		{"sort key value without key", []string{"list", "--table", "t1x", "--sort-key-value", "v"}, "--sort-key-value needs --sort-key"},
		{"attr without =", []string{"list", "--table", "t1x", "--attr", "status"}, "want default=name"},
		{"attr of an unknown attribute", []string{"list", "--table", "t1x", "--attr", "state=s"}, `"state" is not a record attribute's default name`},
		{"attr renamed twice", []string{"list", "--table", "t1x", "--attr", "status=a", "--attr", "status=b"}, "status renamed twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := cmd(t, t0, nil, tc.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", r.code, r.stderr, exitUsage, tc.want)
			}
		})
	}
}
