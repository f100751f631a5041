package ddbstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/fakeclock"
	"github.com/idemgo/idem/storetest"
)

const fp = "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"

func TestConformance(t *testing.T) {
	integration(t)
	f := newFixture(t)
	store := conformanceStore(t, f)
	storetest.Run(t, func(t *testing.T) idem.Store { return store })
}

func TestConformanceCustomAttributes(t *testing.T) {
	integration(t)
	f := newFixture(t, ddbstore.WithKeyAttribute("id"), ddbstore.WithTTLAttribute("ttl"), ddbstore.WithCompressionThreshold(0))
	store := conformanceStore(t, f)
	storetest.Run(t, func(t *testing.T) idem.Store { return store })
}

func TestCreateTable(t *testing.T) {
	integration(t)
	f := newFixture(t)
	if !f.info.Created {
		t.Errorf("Created = false for a new table")
	}
	wantTTL := server() != "dynalite"
	if f.info.TTLEnabled != wantTTL {
		t.Errorf("TTLEnabled = %v on %q, want %v", f.info.TTLEnabled, server(), wantTTL)
	}
	ctx := context.Background()
	d, err := f.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(f.table)})
	if err != nil {
		t.Fatal(err)
	}
	if d.Table.TableStatus != types.TableStatusActive {
		t.Errorf("status = %s, want ACTIVE", d.Table.TableStatus)
	}
	if bm := d.Table.BillingModeSummary; bm == nil || bm.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("billing mode summary = %+v, want PAY_PER_REQUEST", bm)
	}
	if len(d.Table.KeySchema) != 1 || aws.ToString(d.Table.KeySchema[0].AttributeName) != ddbstore.DefaultKeyAttribute {
		t.Errorf("key schema = %+v, want hash key %s", d.Table.KeySchema, ddbstore.DefaultKeyAttribute)
	}
	if wantTTL {
		ttl, err := f.client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(f.table)})
		if err != nil {
			t.Fatal(err)
		}
		if d := ttl.TimeToLiveDescription; d == nil || aws.ToString(d.AttributeName) != ddbstore.DefaultTTLAttribute {
			t.Errorf("TTL = %+v, want enabled on %s", d, ddbstore.DefaultTTLAttribute)
		}
	}

	// Again: harmless, and reports the table as existing.
	again, err := ddbstore.CreateTable(ctx, f.client, f.table)
	if err != nil || again.Created || again.TTLEnabled != wantTTL {
		t.Errorf("second CreateTable = %+v, %v; want not created, TTL %v", again, err, wantTTL)
	}
	// With another key attribute: a schema mismatch.
	if _, err := ddbstore.CreateTable(ctx, f.client, f.table, ddbstore.WithKeyAttribute("id")); !errors.Is(err, ddbstore.ErrSchemaMismatch) {
		t.Errorf("CreateTable with another key = %v, want ErrSchemaMismatch", err)
	}
}

func TestMissingTable(t *testing.T) {
	integration(t)
	f := newFixture(t)
	s, err := ddbstore.New(f.client, f.table+"-missing")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rec := core.Reserve("missing:key:1", fp, "tok", nil, now, now.Add(time.Minute), time.Hour)
	err = s.Reserve(context.Background(), rec, nil, now)
	var se *ddbstore.Error
	if !errors.Is(err, ddbstore.ErrTableNotFound) || !errors.As(err, &se) || se.Table != f.table+"-missing" || se.Op != "reserve" {
		t.Fatalf("Reserve on a missing table = %v, want *ddbstore.Error{reserve, table} wrapping ErrTableNotFound", err)
	}
	if c := core.Classify(err, core.DefaultClassifiers...); c != core.Permanent {
		t.Errorf("class = %v, want permanent", c)
	}
	if _, err := s.Get(context.Background(), "missing:key:1", now); !errors.Is(err, ddbstore.ErrTableNotFound) {
		t.Errorf("Get on a missing table = %v, want ErrTableNotFound", err)
	}
}

// TestRecordLayout checks the stored item attribute by attribute: names,
// types and units (TTL in epoch seconds, lease in epoch milliseconds).
func TestRecordLayout(t *testing.T) {
	integration(t)
	f := newFixture(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 10, 0, 0, 250_000_000, time.UTC) // a quarter second past
	rec := core.Reserve("layout:key:1", fp, "tok-layout", nil, now, now.Add(90*time.Second+1), time.Hour)
	if err := f.store.Reserve(ctx, rec, nil, now); err != nil {
		t.Fatal(err)
	}
	item := rawItem(t, f, "layout:key:1")
	want := map[string]types.AttributeValue{
		"pk":          &types.AttributeValueMemberS{Value: "layout:key:1"},
		"status":      &types.AttributeValueMemberS{Value: "in_progress"},
		"fingerprint": &types.AttributeValueMemberS{Value: fp},
		"lease_token": &types.AttributeValueMemberS{Value: "tok-layout"},
		"attempts":    &types.AttributeValueMemberN{Value: "1"},
		// An in-progress record carries its count for Acquire.
		"attempts_carried": &types.AttributeValueMemberN{Value: "1"},
		"lease_until_ms":   &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(90*time.Second).UnixMilli()+1, 10)}, // rounded up
		"expires_at":       &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Hour).Unix()+1, 10)},           // rounded up
		"updated_at_ms":    &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)},
	}
	sameItem(t, "reserved item", item, want)

	// The record read back is the one written, at the table's resolution.
	got, err := f.store.Get(ctx, "layout:key:1", now)
	if err != nil {
		t.Fatal(err)
	}
	if !got.ExpiresAt.Equal(time.Unix(now.Add(time.Hour).Unix()+1, 0)) || !got.LeaseUntil.Equal(time.UnixMilli(now.Add(90*time.Second).UnixMilli()+1)) {
		t.Errorf("read back expires %v lease %v", got.ExpiresAt, got.LeaseUntil)
	}
	// Retention ends at the rounded-up second: live just before it,
	// absent from it on.
	end := time.Unix(now.Add(time.Hour).Unix()+1, 0)
	if _, err := f.store.Get(ctx, "layout:key:1", end.Add(-time.Nanosecond)); err != nil {
		t.Errorf("Get a nanosecond before the stored expiry = %v, want the record", err)
	}
	if _, err := f.store.Get(ctx, "layout:key:1", end); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Get at the stored expiry = %v, want ErrNotFound", err)
	}

	// A failed, retryable completion.
	failed := core.Fail(rec, errors.New("upstream 503"), true, now.Add(time.Second), time.Hour)
	if _, err := f.store.Complete(ctx, failed); err != nil {
		t.Fatal(err)
	}
	item = rawItem(t, f, "layout:key:1")
	want = map[string]types.AttributeValue{
		"pk":          &types.AttributeValueMemberS{Value: "layout:key:1"},
		"status":      &types.AttributeValueMemberS{Value: "failed"},
		"fingerprint": &types.AttributeValueMemberS{Value: fp},
		"lease_token": &types.AttributeValueMemberS{Value: "tok-layout"},
		"attempts":    &types.AttributeValueMemberN{Value: "1"},
		// So does a retryable failure.
		"attempts_carried": &types.AttributeValueMemberN{Value: "1"},
		"retryable":        &types.AttributeValueMemberBOOL{Value: true},
		"error":            &types.AttributeValueMemberS{Value: "upstream 503"},
		"expires_at":       &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Hour+time.Second).Unix()+1, 10)},
		"updated_at_ms":    &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Second).UnixMilli(), 10)},
	}
	sameItem(t, "failed item", item, want)

	// A succeeded completion with a small result: stored raw.
	rec2 := core.Reserve("layout:key:2", fp, "tok-layout-2", nil, now, now.Add(time.Minute), time.Hour)
	if err := f.store.Reserve(ctx, rec2, nil, now); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Complete(ctx, core.Succeed(rec2, []byte(`{"id":42}`), now, time.Hour)); err != nil {
		t.Fatal(err)
	}
	item = rawItem(t, f, "layout:key:2")
	want = map[string]types.AttributeValue{
		"pk":            &types.AttributeValueMemberS{Value: "layout:key:2"},
		"status":        &types.AttributeValueMemberS{Value: "succeeded"},
		"fingerprint":   &types.AttributeValueMemberS{Value: fp},
		"lease_token":   &types.AttributeValueMemberS{Value: "tok-layout-2"},
		"attempts":      &types.AttributeValueMemberN{Value: "1"},
		"result":        &types.AttributeValueMemberB{Value: []byte(`{"id":42}`)},
		"expires_at":    &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Hour).Unix()+1, 10)},
		"updated_at_ms": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)},
	}
	sameItem(t, "succeeded item", item, want)
}

// TestTTLIsEpochSeconds checks that the TTL attribute holds epoch seconds (a
// value in milliseconds would make DynamoDB never expire the item), and that
// a record past it counts as absent although the server still holds it.
func TestTTLIsEpochSeconds(t *testing.T) {
	integration(t)
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	rec := core.Reserve("ttl:key:1", fp, "tok-ttl", nil, now, now.Add(time.Minute), 24*time.Hour)
	if err := f.store.Reserve(ctx, rec, nil, now); err != nil {
		t.Fatal(err)
	}
	item := rawItem(t, f, "ttl:key:1")
	n, ok := item[ddbstore.DefaultTTLAttribute].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("TTL attribute = %#v, want a number", item[ddbstore.DefaultTTLAttribute])
	}
	sec, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if want := now.Add(24 * time.Hour).Unix(); sec != want {
		t.Errorf("TTL = %d, want %d (epoch seconds)", sec, want)
	}
	if d := time.Until(time.Unix(sec, 0)); d < 23*time.Hour || d > 25*time.Hour {
		t.Errorf("TTL read as seconds is %v away, want about 24h", d)
	}

	// After retention the server still has the item, yet the store treats
	// it as absent, for Get and for Reserve.
	later := now.Add(24 * time.Hour)
	if _, err := f.store.Get(ctx, "ttl:key:1", later); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Get after retention = %v, want ErrNotFound", err)
	}
	if len(rawItem(t, f, "ttl:key:1")) == 0 {
		t.Fatal("item already gone")
	}
	fresh := core.Reserve("ttl:key:1", fp, "tok-ttl-2", nil, later, later.Add(time.Minute), time.Hour)
	if err := f.store.Reserve(ctx, fresh, nil, later); err != nil {
		t.Errorf("Reserve over an expired record = %v, want nil", err)
	}
}

// TestAllOldPath checks how the blocking record of a refused reservation is
// obtained: from the error (ALL_OLD) without a read where the server
// supports it, by exactly one consistent GetItem where it does not.
func TestAllOldPath(t *testing.T) {
	integration(t)
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	rec := core.Reserve("allold:key:1", fp, "tok-a", nil, now, now.Add(time.Minute), time.Hour)
	if err := f.store.Reserve(ctx, rec, nil, now); err != nil {
		t.Fatal(err)
	}
	done, err := f.store.Complete(ctx, core.Succeed(rec, []byte(`"first"`), now, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	f.rec.reset()
	dup := core.Reserve("allold:key:1", fp, "tok-b", nil, now, now.Add(time.Minute), time.Hour)
	err = f.store.Reserve(ctx, dup, nil, now)
	var ce *idem.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("Reserve of a completed key = %v, want *idem.ConflictError", err)
	}
	if ce.Existing.LeaseToken != "tok-a" || ce.Existing.Status != core.StatusSucceeded || !bytes.Equal(ce.Existing.Result, []byte(`"first"`)) || !ce.Existing.ExpiresAt.Equal(done.ExpiresAt) {
		t.Errorf("conflict record = %v result %q, want the succeeded record", ce.Existing, ce.Existing.Result)
	}
	wantGets := 1
	if returnsAllOld() {
		wantGets = 0
	}
	if puts, gets := f.rec.count("PutItem"), f.rec.count("GetItem"); puts != 1 || gets != wantGets {
		t.Errorf("on %q: %d PutItem, %d GetItem; want 1 PutItem, %d GetItem", server(), puts, gets, wantGets)
	}

	// A stale completion: the lease-lost path reads the record the same way.
	f.rec.reset()
	if _, err := f.store.Complete(ctx, core.Succeed(dup, []byte(`"second"`), now, time.Hour)); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("Complete without the lease = %v, want ErrLeaseLost", err)
	}
	if puts, gets := f.rec.count("PutItem"), f.rec.count("GetItem"); puts != 1 || gets != wantGets {
		t.Errorf("stale Complete on %q: %d PutItem, %d GetItem; want 1 PutItem, %d GetItem", server(), puts, gets, wantGets)
	}
}

// TestCallsPerPath measures the DynamoDB calls of each path through the
// runner, and logs them (the README quotes them). Every reservation is one
// UpdateItem (Store.Acquire), and a completion one PutItem: a retry and a
// takeover cost what a first run does.
func TestCallsPerPath(t *testing.T) {
	integration(t)
	f := newFixture(t)
	clock := fakeclock.New(time.Now().Truncate(time.Second))
	r := newRunner(t, f.store, clock)
	ctx := context.Background()
	extra := 0
	if !returnsAllOld() {
		extra = 1
	}
	type want struct{ updates, puts, gets int }
	var ran atomic.Int32
	ok := func(context.Context) ([]byte, error) { ran.Add(1); return []byte(`"ok"`), nil }
	step := func(name string, w want, fn func()) {
		t.Helper()
		f.rec.reset()
		fn()
		got := want{f.rec.count("UpdateItem"), f.rec.count("PutItem"), f.rec.count("GetItem")}
		t.Logf("%-34s UpdateItem %d PutItem %d GetItem %d", name, got.updates, got.puts, got.gets)
		if got != w {
			t.Errorf("%s on %q: %+v; want %+v", name, server(), got, w)
		}
	}
	step("first run", want{1, 1, 0}, func() { mustDo(t, ctx, r, "calls:key:1", ok) })
	step("duplicate of completed", want{1, 0, extra}, func() { mustDo(t, ctx, r, "calls:key:1", ok) })
	apart := func(context.Context) ([]byte, error) { return randomBytes(2048), nil } // passes the record's KB
	step("first run, result item", want{1, 2, 0}, func() { mustDo(t, ctx, r, "calls:key:apart", apart) })
	step("duplicate, result item", want{1, 0, extra + 1}, func() { mustDo(t, ctx, r, "calls:key:apart", apart) })

	// In progress: a lease held by another caller.
	now := clock.Now()
	held := core.Reserve("calls:key:2", emptyFP, "tok-other", nil, now, now.Add(time.Minute), time.Hour)
	if err := f.store.Reserve(ctx, held, nil, now); err != nil {
		t.Fatal(err)
	}
	step("in progress", want{1, 0, extra}, func() {
		if _, err := r.Do(ctx, "calls:key:2", []byte(`{}`), ok); !errors.Is(err, core.ErrInProgress) {
			t.Fatalf("Do = %v, want ErrInProgress", err)
		}
	})
	clock.Advance(2 * time.Minute)
	step("takeover of an expired lease", want{1, 1, 0}, func() { mustDo(t, ctx, r, "calls:key:2", ok) })

	// Retry of a retryable failure.
	tr := newRunnerOpts(t, f.store, clock, idem.WithRetry(1, 0, 0))
	step("transient failure", want{1, 1, 0}, func() {
		_, err := tr.Do(ctx, "calls:key:3", []byte(`{}`), func(context.Context) ([]byte, error) {
			return nil, core.MarkTransient(errors.New("try later"))
		})
		if !errors.Is(err, idem.ErrTransientFailure) {
			t.Fatalf("Do = %v, want ErrTransientFailure", err)
		}
	})
	step("retry of a retryable failure", want{1, 1, 0}, func() {
		if out := mustDo(t, ctx, r, "calls:key:3", ok); out.Attempts != 2 {
			t.Errorf("retry ran attempt %d, want 2", out.Attempts)
		}
	})
	clock.Advance(2 * idem.DefaultRetention)
	step("first run over an expired record", want{1, 1, 0}, func() {
		if out := mustDo(t, ctx, r, "calls:key:1", ok); out.Replayed || out.Attempts != 1 {
			t.Errorf("run after retention = %+v, want executed at attempt 1", out)
		}
	})
	step("Get", want{0, 0, 1}, func() {
		if _, err := f.store.Get(ctx, "calls:key:1", clock.Now()); err != nil {
			t.Fatal(err)
		}
	})
}

func mustDo(t *testing.T, ctx context.Context, r *idem.Runner, key string, fn idem.Handler) idem.Outcome {
	t.Helper()
	out, err := r.Do(ctx, key, []byte(`{}`), fn)
	if err != nil {
		t.Fatalf("Do(%s) = %v", key, err)
	}
	return out
}

// TestLargeResults: a compressible result of 300 KB is stored compressed and
// replayed intact; an incompressible one of 500 KB is stored without its
// body, flagged, and a duplicate does not run the handler again.
func TestLargeResults(t *testing.T) {
	integration(t)
	f := newFixture(t)
	clock := fakeclock.New(time.Now().Truncate(time.Second))
	r := newRunner(t, f.store, clock)
	ctx := context.Background()

	big := bytes.Repeat([]byte(`{"line":"the same words again and again","n":12345}`+"\n"), 300<<10/52)
	var runs atomic.Int32
	handler := func(result []byte) idem.Handler {
		return func(context.Context) ([]byte, error) { runs.Add(1); return result, nil }
	}
	out, err := r.Do(ctx, "large:compressible", []byte(`{}`), handler(big))
	if err != nil || out.ResultOmitted {
		t.Fatalf("Do = %+v, %v", out.ResultOmitted, err)
	}
	body, enc, apart := storedResult(t, f, "large:compressible")
	if enc != "gzip" || body == nil || len(body) >= len(big)/10 || !apart {
		t.Fatalf("stored result: encoding %q, %d bytes, in a result item %v; want gzip, far smaller than %d, and apart (the record passes 1 KB with it)",
			enc, len(body), apart, len(big))
	}
	t.Logf("%d-byte result stored as %d bytes of gzip", len(big), len(body))
	out, err = r.Do(ctx, "large:compressible", []byte(`{}`), handler(nil))
	if err != nil || !out.Replayed || !bytes.Equal(out.Result, big) {
		t.Fatalf("replay: replayed %v, %d bytes, %v; want the %d bytes", out.Replayed, len(out.Result), err, len(big))
	}

	random := make([]byte, 500<<10)
	_, _ = rand.Read(random)
	out, err = r.Do(ctx, "large:incompressible", []byte(`{}`), handler(random))
	if err != nil || !out.ResultOmitted || !bytes.Equal(out.Result, random) {
		t.Fatalf("Do = omitted %v, %d bytes, %v; want the result returned and flagged as omitted from the store", out.ResultOmitted, len(out.Result), err)
	}
	item := rawItem(t, f, "large:incompressible")
	if _, ok := item[ddbstore.AttrResult]; ok {
		t.Errorf("stored item has a result")
	}
	if om, _ := item[ddbstore.AttrResultOmitted].(*types.AttributeValueMemberBOOL); om == nil || !om.Value {
		t.Errorf("stored item has %s = %v, want true", ddbstore.AttrResultOmitted, item[ddbstore.AttrResultOmitted])
	}
	before := runs.Load()
	out, err = r.Do(ctx, "large:incompressible", []byte(`{}`), handler(random))
	if err != nil || !out.Replayed || !out.ResultOmitted || out.Result != nil || runs.Load() != before {
		t.Fatalf("duplicate = replayed %v omitted %v, %d bytes, %v, handler runs %d -> %d; want a replay without body and no run",
			out.Replayed, out.ResultOmitted, len(out.Result), err, before, runs.Load())
	}

	// A result just under the limit as the server counts it is kept whole.
	edge := make([]byte, ddbstore.DefaultMaxItemSize-400)
	_, _ = rand.Read(edge)
	out, err = r.Do(ctx, "large:edge", []byte(`{}`), handler(edge))
	if err != nil || out.ResultOmitted {
		t.Fatalf("Do = omitted %v, %v; want the result kept", out.ResultOmitted, err)
	}
	got, err := f.store.Get(ctx, "large:edge", clock.Now())
	if err != nil || !bytes.Equal(got.Result, edge) {
		t.Fatalf("Get = %d bytes, %v", len(got.Result), err)
	}
}

// TestOversizedReservation: a key beyond DynamoDB's limit is refused by the
// store before any call, with a typed permanent error.
func TestOversizedReservation(t *testing.T) {
	integration(t)
	f := newFixture(t)
	now := time.Now()
	rec := core.Reserve(string(bytes.Repeat([]byte("k"), 3000)), fp, "tok", nil, now, now.Add(time.Minute), time.Hour)
	err := f.store.Reserve(context.Background(), rec, nil, now)
	var se *ddbstore.Error
	if !errors.Is(err, ddbstore.ErrKeyTooLarge) || !errors.As(err, &se) || core.Classify(err) != core.Permanent {
		t.Fatalf("Reserve of a 3000-byte key = %v, want a permanent *Error wrapping ErrKeyTooLarge", err)
	}
	rec = core.Reserve("big:token:1", fp, string(bytes.Repeat([]byte("t"), 500_000)), nil, now, now.Add(time.Minute), time.Hour)
	if err := f.store.Reserve(context.Background(), rec, nil, now); !errors.Is(err, ddbstore.ErrItemTooLarge) {
		t.Fatalf("Reserve of a 500 KB record = %v, want ErrItemTooLarge", err)
	}
	if n := f.rec.count("PutItem"); n != 0 {
		t.Errorf("%d PutItem calls, want none", n)
	}
}

// storedResult returns the result of key's succeeded record as stored, in
// the record or in its result item (apart), and its encoding.
func storedResult(t *testing.T, f *fixture, key string) (body []byte, encoding string, apart bool) {
	t.Helper()
	item := rawItem(t, f, key)
	if enc, ok := item[ddbstore.AttrResultEncoding].(*types.AttributeValueMemberS); ok {
		encoding = enc.Value
	}
	if itemKey, ok := resultItemKey(t, f, key); ok {
		item, apart = rawItem(t, f, itemKey), true
	}
	if b, ok := item[ddbstore.AttrResult].(*types.AttributeValueMemberB); ok {
		body = b.Value
	}
	return body, encoding, apart
}

func rawItem(t *testing.T, f *fixture, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := f.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{ddbstore.DefaultKeyAttribute: &types.AttributeValueMemberS{Value: key}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func sameItem(t *testing.T, what string, got, want map[string]types.AttributeValue) {
	t.Helper()
	if fmt.Sprint(describe(got)) != fmt.Sprint(describe(want)) {
		t.Errorf("%s:\n got %v\nwant %v", what, describe(got), describe(want))
	}
}

// describe renders an item with sorted names, for comparisons and messages.
func describe(item map[string]types.AttributeValue) string {
	names := make([]string, 0, len(item))
	for n := range item {
		names = append(names, n)
	}
	slices.Sort(names)
	var b bytes.Buffer
	for _, n := range names {
		switch v := item[n].(type) {
		case *types.AttributeValueMemberS:
			fmt.Fprintf(&b, "%s:S=%q ", n, v.Value)
		case *types.AttributeValueMemberN:
			fmt.Fprintf(&b, "%s:N=%s ", n, v.Value)
		case *types.AttributeValueMemberB:
			fmt.Fprintf(&b, "%s:B=%q ", n, v.Value)
		case *types.AttributeValueMemberBOOL:
			fmt.Fprintf(&b, "%s:BOOL=%v ", n, v.Value)
		default:
			fmt.Fprintf(&b, "%s:%T ", n, v)
		}
	}
	return b.String()
}
