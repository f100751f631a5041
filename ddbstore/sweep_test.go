package ddbstore_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
)

// sweepTable is a table for a sweep: the store's records and step items,
// each past its retention at now or not, and an item of another store
// (another key prefix) past its own.
type sweepTable struct {
	f         *fixture
	base, now time.Time
}

const sweepPrefix = "svc#"

// reserve writes key's reservation at at, its lease ending at leaseUntil,
// with a retention of an hour.
func (st *sweepTable) reserve(t *testing.T, key, tok string, at, leaseUntil time.Time) core.Record {
	t.Helper()
	rec := core.Reserve(key, fp, tok, nil, at, leaseUntil, time.Hour)
	if err := st.f.store.Reserve(context.Background(), rec, nil, at); err != nil {
		t.Fatalf("Reserve %s: %v", key, err)
	}
	return rec
}

// succeed writes key's reservation and success, both at at.
func (st *sweepTable) succeed(t *testing.T, key string, at time.Time) {
	t.Helper()
	st.succeedWith(t, key, []byte(`{"ok":true}`), at)
}

// succeedWith writes key's reservation and its success with result, both
// at at.
func (st *sweepTable) succeedWith(t *testing.T, key string, result []byte, at time.Time) {
	t.Helper()
	rec := st.reserve(t, key, "tok-"+key, at, at.Add(time.Minute))
	if _, err := st.f.store.Complete(context.Background(), core.Succeed(rec, result, at, time.Hour)); err != nil {
		t.Fatalf("Complete %s: %v", key, err)
	}
}

// step records key's step "charge" at at, under tok.
func (st *sweepTable) step(t *testing.T, key, tok string, at time.Time) {
	t.Helper()
	if err := st.f.store.RecordStep(context.Background(), key, tok, core.Step{Name: "charge", Result: []byte(`"ch_1"`)}, at); err != nil {
		t.Fatalf("RecordStep %s: %v", key, err)
	}
}

func newSweepTable(t *testing.T) *sweepTable {
	t.Helper()
	f := newFixture(t, ddbstore.WithKeyPrefix(sweepPrefix))
	now := time.Now().Truncate(time.Second)
	// Step items end two spans of retention after they are written (a
	// day each until the store has seen a reservation's): base is three
	// days back.
	st := &sweepTable{f: f, base: now.Add(-72 * time.Hour), now: now}
	b := st.base
	st.succeed(t, "evt:done", b)
	// A result too large for the record's one write unit is kept in a
	// result item of its own, which retention ends with its record's.
	st.succeedWith(t, "evt:big", randomBytes(4096), b)
	failed := st.reserve(t, "evt:failed", "tok-failed", b, b.Add(time.Minute))
	if _, err := f.store.Complete(context.Background(), core.Fail(failed, errors.New("declined"), false, b, time.Hour)); err != nil {
		t.Fatal(err)
	}
	st.reserve(t, "evt:stuck", "tok-stuck", b, b.Add(time.Minute))
	st.succeed(t, "evt:live", now.Add(-10*time.Minute))
	st.succeed(t, "evt:renewed", b)
	for _, key := range []string{"evt:stepped", "evt:rewritten"} {
		st.reserve(t, key, "tok-"+key, b, b.Add(time.Minute))
		st.step(t, key, "tok-"+key, b.Add(time.Second))
	}
	st.reserve(t, "evt:livestep", "tok-livestep", now.Add(-10*time.Minute), now.Add(time.Minute))
	st.step(t, "evt:livestep", "tok-livestep", now.Add(-9*time.Minute))
	// Past its retention, under a lease that still lives: not expired.
	// (Written after the steps: a store writes step items to outlive the
	// longest retention it has seen, and this one's is long.)
	leased := core.Reserve("evt:leased", fp, "tok-leased", nil, b, now.Add(time.Hour), time.Hour)
	leased.ExpiresAt = b.Add(time.Hour)
	if err := f.store.Reserve(context.Background(), leased, nil, b); err != nil {
		t.Fatal(err)
	}
	_, err := f.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "other#evt:done"}, "expires_at": &types.AttributeValueMemberN{Value: "1000"}}})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// kind names e for the tests: its record's key, and "step" or "result"
// for a step or result item.
func kind(e ddbstore.Expired) string {
	switch {
	case e.Step:
		return e.Key + " step"
	case e.Result:
		return e.Key + " result"
	}
	return e.Key
}

// items returns the primary keys of every item of the table.
func (st *sweepTable) items(t *testing.T) []string {
	t.Helper()
	out, err := st.f.client.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(st.f.table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, it := range out.Items {
		keys = append(keys, it["pk"].(*types.AttributeValueMemberS).Value)
	}
	slices.Sort(keys)
	return keys
}

// A sweep deletes exactly the items past their retention: the records
// that core.Record.Expired says are (not one under a live lease, however
// old its retention) and the step items whose own retention has passed;
// never another store's item, never a live one. An item renewed or
// rewritten between the scan that read it and its delete (a new
// reservation over the expired record; a new lifetime of a key that
// records the same step, which extends the step item) is left, with
// idem.ErrRecordChanged. A dry run (the scan alone) deletes nothing.
func TestSweepDeletesExactlyTheExpired(t *testing.T) {
	integration(t)
	st := newSweepTable(t)
	ctx := context.Background()
	before := st.items(t)

	var found []ddbstore.Expired
	next, live := "", 0
	for pages := 0; ; pages++ {
		page, err := st.f.store.ScanExpired(ctx, ddbstore.ListInput{Limit: 3, Next: next}, st.now)
		if err != nil {
			t.Fatal(err)
		}
		found, live, next = append(found, page.Items...), live+page.Live, page.Next
		if next == "" {
			break
		}
		if pages > 20 {
			t.Fatal("the scan does not end")
		}
	}
	if got := st.items(t); !slices.Equal(got, before) {
		t.Fatalf("the scan changed the table: %v, was %v", got, before)
	}
	// The items found, by record key and kind: the leased record and the
	// live ones are not among them; the foreign item is no item of the
	// store.
	got := map[string]bool{}
	for _, e := range found {
		got[kind(e)] = true
	}
	want := []string{"evt:big", "evt:big result", "evt:done", "evt:failed", "evt:renewed", "evt:rewritten", "evt:rewritten step", "evt:stepped", "evt:stepped step", "evt:stuck"}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, want) || len(found) != len(want) {
		t.Fatalf("found %v (%d items), want %v", keys, len(found), want)
	}
	if live == 0 {
		t.Error("no live item counted among the store's items the filter returned (evt:leased)")
	}

	left, again := map[string]bool{}, map[string]bool{}
	for _, e := range found {
		// Interleaved into the sweep, deterministically: just before the
		// first delete of one of its items (in the table's order), the
		// key is written anew, and records its step again.
		if (e.Key == "evt:renewed" || e.Key == "evt:rewritten") && !again[e.Key] {
			again[e.Key] = true
			st.reserve(t, e.Key, "tok-again", st.now, st.now.Add(time.Minute))
			if e.Key == "evt:rewritten" {
				st.step(t, e.Key, "tok-again", st.now)
			}
		}
		err := st.f.store.DeleteExpired(ctx, e, st.now)
		switch {
		case errors.Is(err, idem.ErrRecordChanged):
			left[kind(e)] = true
		case err != nil:
			t.Fatalf("DeleteExpired(%s, step %v) = %v", e.Key, e.Step, err)
		}
	}
	if keys := slices.Sorted(maps.Keys(left)); !slices.Equal(keys, []string{"evt:renewed", "evt:rewritten", "evt:rewritten step"}) {
		t.Errorf("left %v, want the renewed record and the rewritten record and step item", keys)
	}
	remaining := st.items(t)
	var stepItems int
	for _, k := range remaining {
		if len(k) > 22 && k[len(k)-22:len(k)-16] == "#step#" {
			stepItems++
		}
	}
	wantLeft := []string{"other#evt:done", sweepPrefix + "evt:leased", sweepPrefix + "evt:live", sweepPrefix + "evt:livestep", sweepPrefix + "evt:renewed", sweepPrefix + "evt:rewritten"}
	var records []string
	for _, k := range remaining {
		if len(k) <= 22 || k[len(k)-22:len(k)-16] != "#step#" {
			records = append(records, k)
		}
	}
	if !slices.Equal(records, wantLeft) || stepItems != 2 {
		t.Errorf("the table holds %v, want the records %v and 2 step items (evt:livestep's, evt:rewritten's)", remaining, wantLeft)
	}
	for _, key := range []string{"evt:renewed", "evt:rewritten", "evt:livestep", "evt:live"} {
		if _, err := st.f.store.Get(ctx, key, st.now); err != nil {
			t.Errorf("Get %s after the sweep = %v", key, err)
		}
	}
}

// DeleteExpired takes only what ScanExpired returned; ScanExpired reads
// every status.
func TestSweepInputs(t *testing.T) {
	t.Parallel()
	store, err := ddbstore.New(dynamodb.New(dynamodb.Options{Region: "us-east-1"}), "idem")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.DeleteExpired(context.Background(), ddbstore.Expired{Key: "evt:1"}, time.Now()); err == nil {
		t.Error("DeleteExpired of a made-up Expired: no error")
	}
	if _, err := store.ScanExpired(context.Background(), ddbstore.ListInput{Status: core.StatusFailed}, time.Now()); err == nil {
		t.Error("ScanExpired with a status: no error")
	}
}

// In a table shared with other items (single-table layouts: a fixed sort
// key value, a sort key computed from the key), each store's sweep finds
// its own records and step items past retention, and never an item of the
// application's whose TTL attribute has passed in the same partition.
func TestSweepSharedTable(t *testing.T) {
	integration(t)
	f := newFixture(t, singleTable("orders#", "idempotency#")...)
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	base := now.Add(-72 * time.Hour)
	for name, opts := range map[string][]ddbstore.Option{"fixed sort key": singleTable("orders#", "idempotency#"), "sort by key": sortByKey()} {
		t.Run(name, func(t *testing.T) {
			s, err := ddbstore.New(f.client, f.table, opts...)
			if err != nil {
				t.Fatal(err)
			}
			key := "evt:" + strings.ReplaceAll(name, " ", "-")
			rec := core.Reserve(key, fp, "tok", nil, base, base.Add(time.Minute), time.Hour)
			if err := s.Reserve(ctx, rec, nil, base); err != nil {
				t.Fatal(err)
			}
			if err := s.RecordStep(ctx, key, "tok", core.Step{Name: "charge", Result: []byte(`1`)}, base.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			big := core.Reserve(key+":big", fp, "tok", nil, base, base.Add(time.Minute), time.Hour)
			if err := s.Reserve(ctx, big, nil, base); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Complete(ctx, core.Succeed(big, randomBytes(4096), base, time.Hour)); err != nil {
				t.Fatal(err)
			}
			pk := "orders#" + key
			if name == "sort by key" {
				pk = key
			}
			for _, sk := range []string{"order#meta", "idempotency#other"} {
				_, err := f.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: map[string]types.AttributeValue{
					"PK": str(pk), "SK": str(sk), "ttl": numAttr(1000)}})
				if err != nil {
					t.Fatal(err)
				}
			}
			var mine []string
			for next := ""; ; {
				page, err := s.ScanExpired(ctx, ddbstore.ListInput{Next: next}, now)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range page.Items {
					if e.Key != key && e.Key != key+":big" {
						continue // the other layout's
					}
					mine = append(mine, kind(e))
					if err := s.DeleteExpired(ctx, e, now); err != nil {
						t.Errorf("DeleteExpired(%s) = %v", kind(e), err)
					}
				}
				if next = page.Next; next == "" {
					break
				}
			}
			slices.Sort(mine)
			if want := []string{key, key + " step", key + ":big", key + ":big result"}; !slices.Equal(mine, want) {
				t.Errorf("swept %v, want %v", mine, want)
			}
			for _, sk := range []string{"order#meta", "idempotency#other"} {
				out, err := f.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
					Key: map[string]types.AttributeValue{"PK": str(pk), "SK": str(sk)}})
				if err != nil || len(out.Item) == 0 {
					t.Errorf("the application's item %s/%s is gone (%v)", pk, sk, err)
				}
			}
		})
	}
}
