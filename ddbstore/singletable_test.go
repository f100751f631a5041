package ddbstore_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/storetest"
)

// sortByKey is a single-table layout whose sort key value is computed from
// the key, with no prefix.
func sortByKey() []ddbstore.Option {
	return []ddbstore.Option{
		ddbstore.WithKeyAttribute("PK"),
		ddbstore.WithSortKeyFunc("SK", func(key string) string { return "idem#" + key }),
		ddbstore.WithTTLAttribute("ttl"),
		ddbstore.WithAttributeNames(renamed),
	}
}

func TestConformanceSingleTable(t *testing.T) {
	integration(t)
	for name, opts := range map[string][]ddbstore.Option{
		"fixed sort key and prefix": singleTable("orders#", "idempotency#"),
		"sort key from the key":     sortByKey(),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, opts...)
			store := conformanceStore(t, f)
			storetest.Run(t, func(t *testing.T) idem.Store { return store })
		})
	}
}

func TestConformanceFaultsSingleTable(t *testing.T) {
	integration(t)
	runFaults(t, singleTable("orders#", "idempotency#")...)
}

// rawItemAt reads the item at key (the table's whole primary key).
func rawItemAt(t *testing.T, f *fixture, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	out, err := f.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.table), ConsistentRead: aws.Bool(true), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func numAttr(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// TestRecordLayoutSingleTable checks the items written with the
// single-table layout attribute by attribute: the prefixed key, the sort
// key, and every attribute under its configured name.
func TestRecordLayoutSingleTable(t *testing.T) {
	integration(t)
	f := newFixture(t, singleTable("orders#", "idempotency#")...)
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 10, 0, 0, 250_000_000, time.UTC)
	at := map[string]types.AttributeValue{"PK": str("orders#layout:key:1"), "SK": str("idempotency#")}
	rec := core.Reserve("layout:key:1", fp, "tok-layout", nil, now, now.Add(90*time.Second+1), time.Hour)
	if err := f.store.Reserve(ctx, rec, nil, now); err != nil {
		t.Fatal(err)
	}
	sameItem(t, "reserved item", rawItemAt(t, f, at), map[string]types.AttributeValue{
		"PK": str("orders#layout:key:1"), "SK": str("idempotency#"),
		"idem_status": str("in_progress"), "validation": str(fp), "token": str("tok-layout"), "count": numAttr(1),
		"counter":                numAttr(1),
		"in_progress_expiration": numAttr(now.Add(90*time.Second).UnixMilli() + 1),
		"ttl":                    numAttr(now.Add(time.Hour).Unix() + 1),
		"timestamp":              numAttr(now.UnixMilli()),
	})

	failed := core.Fail(rec, errors.New("upstream 503"), true, now.Add(time.Second), time.Hour)
	if _, err := f.store.Complete(ctx, failed); err != nil {
		t.Fatal(err)
	}
	sameItem(t, "failed item", rawItemAt(t, f, at), map[string]types.AttributeValue{
		"PK": str("orders#layout:key:1"), "SK": str("idempotency#"),
		"idem_status": str("failed"), "validation": str(fp), "token": str("tok-layout"), "count": numAttr(1), "counter": numAttr(1),
		"retry": &types.AttributeValueMemberBOOL{Value: true}, "cause": str("upstream 503"),
		"ttl":       numAttr(now.Add(time.Hour+time.Second).Unix() + 1),
		"timestamp": numAttr(now.Add(time.Second).UnixMilli()),
	})

	// A succeeded record with a compressed result, read back whole.
	rec2 := core.Reserve("layout:key:2", fp, "tok-layout-2", nil, now, now.Add(time.Minute), time.Hour)
	if err := f.store.Reserve(ctx, rec2, nil, now); err != nil {
		t.Fatal(err)
	}
	result := []byte(strings.Repeat(`{"id":42}`, 1000))
	if _, err := f.store.Complete(ctx, core.Succeed(rec2, result, now, time.Hour)); err != nil {
		t.Fatal(err)
	}
	item := rawItemAt(t, f, map[string]types.AttributeValue{"PK": str("orders#layout:key:2"), "SK": str("idempotency#")})
	data, ok := item["data"].(*types.AttributeValueMemberB)
	if !ok || len(data.Value) >= len(result) {
		t.Fatalf("data = %#v, want the compressed result", item["data"])
	}
	delete(item, "data")
	sameItem(t, "succeeded item", item, map[string]types.AttributeValue{
		"PK": str("orders#layout:key:2"), "SK": str("idempotency#"),
		"idem_status": str("succeeded"), "validation": str(fp), "token": str("tok-layout-2"), "count": numAttr(1),
		"data_encoding": str("gzip"),
		"ttl":           numAttr(now.Add(time.Hour).Unix() + 1),
		"timestamp":     numAttr(now.UnixMilli()),
	})
	got, err := f.store.Get(ctx, "layout:key:2", now)
	if err != nil || got.Key != "layout:key:2" || string(got.Result) != string(result) {
		t.Fatalf("Get = key %q, %d bytes, %v; want the key without its prefix and the whole result", got.Key, len(got.Result), err)
	}
}

// TestSharedTable runs stores of several layouts on one table, beside
// items of other entities, and checks that none sees another's records:
// each reserves the same key, and Get, List and Release find only its own.
func TestSharedTable(t *testing.T) {
	integration(t)
	f := newFixture(t, singleTable("orders#", "idempotency#")...)
	ctx := context.Background()
	// Stores share the table where their sort key values differ, or their
	// prefixes do (none beginning with another's).
	layouts := map[string][]ddbstore.Option{
		"orders":      singleTable("orders#", "idempotency#"),
		"payments":    singleTable("payments#", "idempotency#"),
		"orders, v2":  singleTable("orders#", "idempotency#v2"),
		"no prefix":   singleTable("", "idempotency#noprefix"),
		"sort by key": sortByKey(),
	}
	// Items of the application's own entities, in the same partitions.
	for _, sk := range []string{"order#meta", "idempotency#other"} {
		_, err := f.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table),
			Item: map[string]types.AttributeValue{"PK": str("orders#evt:1:a"), "SK": str(sk), "total": numAttr(1200)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().Truncate(time.Second)
	stores := map[string]*ddbstore.Store{}
	for name, opts := range layouts {
		s, err := ddbstore.New(f.client, f.table, opts...)
		if err != nil {
			t.Fatal(err)
		}
		stores[name] = s
		rec := core.Reserve("evt:1:a", fp, "tok-"+name, nil, now, now.Add(time.Minute), time.Hour)
		if err := s.Reserve(ctx, rec, nil, now); err != nil {
			t.Fatalf("%s: Reserve = %v, want its own record", name, err)
		}
		if _, err := s.Complete(ctx, core.Succeed(rec, []byte(name), now, time.Hour)); err != nil {
			t.Fatalf("%s: Complete = %v", name, err)
		}
	}
	for name, s := range stores {
		got, err := s.Get(ctx, "evt:1:a", now)
		if err != nil || string(got.Result) != name || got.LeaseToken != "tok-"+name {
			t.Errorf("%s: Get = %q (token %s), %v; want its own record", name, got.Result, got.LeaseToken, err)
		}
		page, err := s.List(ctx, ddbstore.ListInput{})
		if err != nil || len(page.Records) != 1 || string(page.Records[0].Result) != name || page.Records[0].Key != "evt:1:a" || page.Corrupt != 0 {
			t.Errorf("%s: List = %d records, %d corrupt, %d foreign, %v; want its own record only", name, len(page.Records), page.Corrupt, page.Foreign, err)
		}
		// Only the layout whose sort key comes from a function cannot
		// filter by it: it reads every item and counts the others as
		// foreign.
		wantForeign := 0
		if name == "sort by key" {
			wantForeign = len(layouts) + 2 - 1
		}
		if page.Scanned != len(layouts)+2 || page.Foreign != wantForeign {
			t.Errorf("%s: List scanned %d items, %d foreign; want all %d, %d foreign", name, page.Scanned, page.Foreign, len(layouts)+2, wantForeign)
		}
	}
	// Releasing one store's record leaves the others'.
	orders := stores["orders"]
	rec, err := orders.Get(ctx, "evt:1:a", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := orders.Release(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := orders.Get(ctx, "evt:1:a", now); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("orders: Get after Release = %v, want ErrNotFound", err)
	}
	for name, s := range stores {
		if name == "orders" {
			continue
		}
		if _, err := s.Get(ctx, "evt:1:a", now); err != nil {
			t.Errorf("%s: Get after another store's Release = %v, want its record", name, err)
		}
	}
	if item := rawItemAt(t, f, map[string]types.AttributeValue{"PK": str("orders#evt:1:a"), "SK": str("order#meta")}); item == nil {
		t.Errorf("the application's item is gone")
	}
}

// TestSingleTableSchema: CreateTable makes the single-table key schema, and
// CreateTable and CheckTable refuse a table whose key schema is not the
// options'.
func TestSingleTableSchema(t *testing.T) {
	integration(t)
	f := newFixture(t, singleTable("orders#", "idempotency#")...)
	ctx := context.Background()
	d, err := f.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(f.table)})
	if err != nil {
		t.Fatal(err)
	}
	var schema []string
	for _, k := range d.Table.KeySchema {
		schema = append(schema, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
	}
	if want := []string{"PK HASH", "SK RANGE"}; !slices.Equal(schema, want) {
		t.Errorf("key schema = %v, want %v", schema, want)
	}
	hashOnly, _ := newTable(t, f.client)
	tests := []struct {
		name  string
		table string
		opts  []ddbstore.Option
		ok    bool
	}{
		{"single table, same options", f.table, singleTable("payments#", "other#"), true},
		{"single table, default options", f.table, nil, false},
		{"single table, no sort key", f.table, []ddbstore.Option{ddbstore.WithKeyAttribute("PK")}, false},
		{"single table, another sort key", f.table, []ddbstore.Option{ddbstore.WithKeyAttribute("PK"), ddbstore.WithSortKey("sk", "v")}, false},
		{"hash-only table, sort key", hashOnly, []ddbstore.Option{ddbstore.WithSortKey("SK", "v")}, false},
		{"hash-only table, default options", hashOnly, nil, true},
	}
	for _, tc := range tests {
		err := ddbstore.CheckTable(ctx, f.client, tc.table, tc.opts...)
		if (err == nil) != tc.ok || (!tc.ok && !errors.Is(err, ddbstore.ErrSchemaMismatch)) {
			t.Errorf("%s: CheckTable = %v, want ok %v or ErrSchemaMismatch", tc.name, err, tc.ok)
		}
		info, err := ddbstore.CreateTable(ctx, f.client, tc.table, tc.opts...)
		if (err == nil) != tc.ok || (!tc.ok && !errors.Is(err, ddbstore.ErrSchemaMismatch)) || info.Created {
			t.Errorf("%s: CreateTable = %+v, %v; want ok %v or ErrSchemaMismatch, not created", tc.name, info, err, tc.ok)
		}
	}
	err = ddbstore.CheckTable(ctx, f.client, hashOnly, singleTable("orders#", "idempotency#")...)
	if want := `want a string partition key "PK" and a string sort key "SK", table has pk (HASH, S)`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckTable = %v, want a message with %q", err, want)
	}
}
