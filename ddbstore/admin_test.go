package ddbstore_test

import (
	"context"
	"errors"
	"fmt"
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

// Release passes through the serialized wrapper, so that the conformance
// suite's release cases also run on servers that are not atomic.
func (s *serialized) Release(ctx context.Context, rec core.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.s.(idem.Releaser)
	if !ok {
		return fmt.Errorf("%T is not an idem.Releaser", s.s)
	}
	return r.Release(ctx, rec)
}

// apiOnly is a client with the data path's calls only (ddbstore.API).
type apiOnly struct{ ddbstore.API }

func TestListNeedsAdminAPI(t *testing.T) {
	t.Parallel()
	s, err := ddbstore.New(apiOnly{}, "idem")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(context.Background(), ddbstore.ListInput{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("List with a client without Scan = %v, want errors.ErrUnsupported", err)
	}
}

func TestReleaseCalls(t *testing.T) {
	integration(t)
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now()
	rec := core.Reserve("release:key:1", fp, "tok-a", nil, now, now.Add(time.Minute), time.Hour)
	if err := f.store.Reserve(ctx, rec, nil, now); err != nil {
		t.Fatal(err)
	}
	failed, err := f.store.Complete(ctx, core.Fail(rec, errors.New("card declined"), false, now, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	stale := rec // the in-progress record, read before the completion
	f.rec.reset()
	if err := f.store.Release(ctx, stale); !errors.Is(err, idem.ErrRecordChanged) {
		t.Fatalf("Release of the stale in-progress record = %v, want ErrRecordChanged", err)
	}
	wantGets := 0
	if !returnsAllOld() {
		wantGets = 1 // the blocking record is read where the server does not return it
	}
	if d, g := f.rec.count("DeleteItem"), f.rec.count("GetItem"); d != 1 || g != wantGets {
		t.Errorf("refused Release made %d DeleteItem and %d GetItem, want 1 and %d", d, g, wantGets)
	}
	if err := f.store.Release(ctx, failed); err != nil {
		t.Fatalf("Release of the stored record = %v", err)
	}
	if item := rawItem(t, f, rec.Key); item != nil {
		t.Errorf("item after Release = %v, want none", item)
	}
	if err := f.store.Release(ctx, failed); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("second Release = %v, want ErrNotFound", err)
	}
}

// putRecords stores n records (every third failed, every third succeeded
// with a result, the rest in progress) and returns their keys.
func putRecords(t *testing.T, f *fixture, prefix string, n int) []string {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	keys := make([]string, 0, n)
	for i := range n {
		key := fmt.Sprintf("%s:%03d", prefix, i)
		rec := core.Reserve(key, fp, fmt.Sprintf("tok-%d", i), nil, now, now.Add(time.Minute), time.Hour)
		if err := f.store.Reserve(ctx, rec, nil, now); err != nil {
			t.Fatal(err)
		}
		var err error
		switch i % 3 {
		case 1:
			_, err = f.store.Complete(ctx, core.Fail(rec, errors.New("boom"), false, now, time.Hour))
		case 2:
			_, err = f.store.Complete(ctx, core.Succeed(rec, []byte(`{"n":1}`), now, time.Hour))
		}
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	return keys
}

func TestListPages(t *testing.T) {
	integration(t)
	f := newFixture(t)
	want := putRecords(t, f, "list", 25)
	tests := []struct {
		name   string
		status core.Status
		want   []string
	}{
		{"all", "", want},
		{"failed only", core.StatusFailed, filterKeys(want, 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			in := ddbstore.ListInput{Limit: 10, Status: tc.status}
			scanned, pages := 0, 0
			for {
				page, err := f.store.List(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				if page.Scanned > 10 || page.ConsumedRCU <= 0 || page.Corrupt != 0 {
					t.Errorf("page %d: scanned %d, consumed %v RCU, corrupt %d; want at most 10 scanned, some capacity, none corrupt",
						pages, page.Scanned, page.ConsumedRCU, page.Corrupt)
				}
				scanned += page.Scanned
				for _, r := range page.Records {
					if tc.status != "" && r.Status != tc.status {
						t.Errorf("record %s has status %s, want %s", r.Key, r.Status, tc.status)
					}
					got = append(got, r.Key)
				}
				if page.Next == "" {
					break
				}
				in.Next = page.Next
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) || scanned != len(want) || pages < 3 {
				t.Errorf("listed %v in %d pages, %d scanned; want %v, %d scanned, at least 3 pages", got, pages, scanned, tc.want, len(want))
			}
		})
	}
}

func filterKeys(keys []string, rem int) []string {
	var out []string
	for i, k := range keys {
		if i%3 == rem {
			out = append(out, k)
		}
	}
	return out
}

func TestListDecodes(t *testing.T) {
	integration(t)
	f := newFixture(t)
	putRecords(t, f, "decode", 3)
	_, err := f.client.PutItem(context.Background(), &dynamodb.PutItemInput{
		TableName: aws.String(f.table),
		Item:      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "decode:corrupt"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	page, err := f.store.List(context.Background(), ddbstore.ListInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 3 || page.Corrupt != 1 || page.Next != "" || page.Scanned != 4 {
		t.Fatalf("page = %d records, %d corrupt, next %q, %d scanned; want 3, 1, none, 4", len(page.Records), page.Corrupt, page.Next, page.Scanned)
	}
	for _, r := range page.Records {
		if r.Status == core.StatusSucceeded && string(r.Result) != `{"n":1}` {
			t.Errorf("listed result = %q, want the stored one", r.Result)
		}
	}
	for _, tok := range []string{"garbage", "v1.!!", "v2.ZGVjb2RlOjAwMQ"} {
		if _, err := f.store.List(context.Background(), ddbstore.ListInput{Next: tok}); !errors.Is(err, ddbstore.ErrBadToken) {
			t.Errorf("List with token %q = %v, want ErrBadToken", tok, err)
		}
	}
}

func TestCheckTable(t *testing.T) {
	integration(t)
	f := newFixture(t)
	ctx := context.Background()
	if err := ddbstore.CheckTable(ctx, f.client, f.table); err != nil {
		t.Errorf("CheckTable of the store's table = %v", err)
	}
	if err := ddbstore.CheckTable(ctx, f.client, f.table+"-missing"); !errors.Is(err, ddbstore.ErrTableNotFound) {
		t.Errorf("CheckTable of a missing table = %v, want ErrTableNotFound", err)
	}
	other, _ := newTable(t, f.client, ddbstore.WithKeyAttribute("id"))
	err := ddbstore.CheckTable(ctx, f.client, other)
	var se *ddbstore.Error
	if !errors.Is(err, ddbstore.ErrSchemaMismatch) || !errors.As(err, &se) || se.Op != "check table" || !strings.Contains(err.Error(), `"pk", table has id (HASH, S)`) {
		t.Errorf("CheckTable of a table keyed by id = %v, want ErrSchemaMismatch naming both schemas", err)
	}
	if err := ddbstore.CheckTable(ctx, f.client, other, ddbstore.WithKeyAttribute("id")); err != nil {
		t.Errorf("CheckTable with the table's key attribute = %v", err)
	}
}
