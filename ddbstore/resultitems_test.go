package ddbstore_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/fakeclock"
)

// resultItemKey is the key of key's result item, as its record references
// it (found false if the record references none).
func resultItemKey(t *testing.T, f *fixture, key string) (string, bool) {
	t.Helper()
	ref, ok := rawItem(t, f, key)[ddbstore.AttrResultItem].(*types.AttributeValueMemberB)
	if !ok {
		return "", false
	}
	return key + "#result#" + hex.EncodeToString(ref.Value), true
}

// putRaw writes item as it is, bypassing the store.
func putRaw(t *testing.T, f *fixture, item map[string]types.AttributeValue) {
	t.Helper()
	if _, err := f.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// TestResultSizesKeepTheRecordWithinOneUnit: results of 100 B, 4 KB, 64 KB
// and 300 KB (incompressible) each leave the succeeded record within one
// write unit (the last three in a result item that ends with its record),
// and a duplicate replays them byte for byte without running the handler.
func TestResultSizesKeepTheRecordWithinOneUnit(t *testing.T) {
	integration(t)
	f := newFixture(t)
	clock := fakeclock.New(time.Now().Truncate(time.Second))
	r := newRunner(t, f.store, clock)
	ctx := context.Background()
	for _, size := range []int{100, 4 << 10, 64 << 10, 300 << 10} {
		key := fmt.Sprintf("apart:%d", size)
		result := randomBytes(size)
		runs := 0
		handler := func(context.Context) ([]byte, error) { runs++; return result, nil }
		mustDo(t, ctx, r, key, handler)
		record := rawItem(t, f, key)
		if n := ddbstore.ItemSize(record); n > ddbstore.RecordUnit {
			t.Errorf("%d-byte result: the record is %d bytes, want at most %d (one write unit)", size, n, ddbstore.RecordUnit)
		}
		itemKey, apart := resultItemKey(t, f, key)
		if apart != (size > 100) {
			t.Errorf("%d-byte result: kept in a result item %v, want %v", size, apart, size > 100)
		}
		if apart {
			item := rawItem(t, f, itemKey)
			if body, _ := item[ddbstore.AttrResult].(*types.AttributeValueMemberB); body == nil || !bytes.Equal(body.Value, result) {
				t.Errorf("%d-byte result: the result item does not hold it", size)
			}
			if got, want := describe(map[string]types.AttributeValue{"ttl": item[ddbstore.DefaultTTLAttribute]}),
				describe(map[string]types.AttributeValue{"ttl": record[ddbstore.DefaultTTLAttribute]}); got != want {
				t.Errorf("%d-byte result: the result item ends at %s, its record at %s; want the same second", size, got, want)
			}
		}
		out := mustDo(t, ctx, r, key, handler)
		if !out.Replayed || out.ResultOmitted || !bytes.Equal(out.Result, result) || runs != 1 {
			t.Errorf("%d-byte result: duplicate replayed %v, omitted %v, %d bytes, handler runs %d; want the bytes replayed, one run",
				size, out.Replayed, out.ResultOmitted, len(out.Result), runs)
		}
	}
}

// TestResultItemNeverReplaysOtherBytes: a result item whose bytes differ
// from what its record recorded (same size, other bytes), that is missing,
// or that ends before its record, is never replayed: the duplicate fails
// with ErrCorruptRecord and the handler does not run.
func TestResultItemNeverReplaysOtherBytes(t *testing.T) {
	integration(t)
	f := newFixture(t)
	clock := fakeclock.New(time.Now().Truncate(time.Second))
	r := newRunner(t, f.store, clock)
	ctx := context.Background()
	for _, damage := range []struct {
		name string
		do   func(item map[string]types.AttributeValue) map[string]types.AttributeValue
	}{
		{"other bytes", func(item map[string]types.AttributeValue) map[string]types.AttributeValue {
			b := bytes.Clone(item[ddbstore.AttrResult].(*types.AttributeValueMemberB).Value)
			b[100] ^= 1
			item[ddbstore.AttrResult] = &types.AttributeValueMemberB{Value: b}
			return item
		}},
		{"missing", func(map[string]types.AttributeValue) map[string]types.AttributeValue { return nil }},
		{"expired before its record", func(item map[string]types.AttributeValue) map[string]types.AttributeValue {
			item[ddbstore.DefaultTTLAttribute] = &types.AttributeValueMemberN{Value: fmt.Sprint(clock.Now().Add(-time.Second).Unix())}
			return item
		}},
	} {
		key := "damaged:" + strings.ReplaceAll(damage.name, " ", "-")
		result := randomBytes(4096)
		runs := 0
		handler := func(context.Context) ([]byte, error) { runs++; return result, nil }
		mustDo(t, ctx, r, key, handler)
		itemKey, ok := resultItemKey(t, f, key)
		if !ok {
			t.Fatalf("%s: no result item", damage.name)
		}
		if item := damage.do(rawItem(t, f, itemKey)); item != nil {
			putRaw(t, f, item)
		} else if _, err := f.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table),
			Key: map[string]types.AttributeValue{ddbstore.DefaultKeyAttribute: &types.AttributeValueMemberS{Value: itemKey}}}); err != nil {
			t.Fatal(err)
		}
		out, err := r.Do(ctx, key, []byte(`{}`), handler)
		if !errors.Is(err, ddbstore.ErrCorruptRecord) || out.Result != nil || runs != 1 {
			t.Errorf("%s: duplicate = %s, %d bytes, %v, handler runs %d; want ErrCorruptRecord, no bytes, one run", damage.name, out.Verdict, len(out.Result), err, runs)
		}
		if _, err := f.store.Get(ctx, key, clock.Now()); !errors.Is(err, ddbstore.ErrCorruptRecord) {
			t.Errorf("%s: Get = %v, want ErrCorruptRecord", damage.name, err)
		}
	}
}

// TestResultItemPastRetention: once the record's retention ends, so does
// its result item's: the key runs again, writes a result item of its own,
// and its duplicate replays the new result, not the old one.
func TestResultItemPastRetention(t *testing.T) {
	integration(t)
	f := newFixture(t)
	clock := fakeclock.New(time.Now().Truncate(time.Second))
	r := newRunnerOpts(t, f.store, clock, idem.WithRetention(time.Minute))
	ctx := context.Background()
	first, second := randomBytes(4096), randomBytes(4096)
	mustDo(t, ctx, r, "expiring", func(context.Context) ([]byte, error) { return first, nil })
	oldItem, _ := resultItemKey(t, f, "expiring")
	clock.Advance(2 * time.Minute)
	out := mustDo(t, ctx, r, "expiring", func(context.Context) ([]byte, error) { return second, nil })
	if out.Replayed || !bytes.Equal(out.Result, second) {
		t.Fatalf("call past retention: replayed %v; want the handler run again", out.Replayed)
	}
	newItem, _ := resultItemKey(t, f, "expiring")
	if newItem == oldItem {
		t.Errorf("the new execution's result item is the old one's (%s)", newItem)
	}
	out = mustDo(t, ctx, r, "expiring", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
	if !out.Replayed || !bytes.Equal(out.Result, second) {
		t.Errorf("duplicate: replayed %v, want the new result", out.Replayed)
	}
}

// failRecordPut is a client whose completions (the record's PutItem, not a
// result item's) fail before they are sent while fail is set: a holder that
// dies after writing its result item.
type failRecordPut struct {
	ddbstore.API
	fail bool
}

func (c *failRecordPut) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if c.fail && in.ConditionExpression != nil {
		return nil, context.Canceled
	}
	return c.API.PutItem(ctx, in, opts...)
}

// TestTakeoverAfterAHolderDiedWithItsResultItemWritten: a holder that wrote
// its result item and died before its completion leaves the key in
// progress; the takeover runs the handler, completes with its own result
// item, and duplicates replay the takeover's result, also after the stale
// holder's completion is refused.
func TestTakeoverAfterAHolderDiedWithItsResultItemWritten(t *testing.T) {
	integration(t)
	f := newFixture(t)
	dying := &failRecordPut{API: f.client, fail: true}
	stale, err := ddbstore.New(dying, f.table)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	fp := emptyFPOf(t, []byte(`{}`))
	holder, _, err := stale.Acquire(ctx, core.Reserve("taken", fp, "tok-dead", nil, now, now.Add(10*time.Second), time.Hour), now, acquirePolicy)
	if err != nil {
		t.Fatal(err)
	}
	old, fresh := randomBytes(4096), randomBytes(4096)
	if _, err := stale.Complete(ctx, core.Succeed(holder, old, now.Add(time.Second), time.Hour)); !errors.Is(err, context.Canceled) {
		t.Fatalf("dying Complete = %v, want its failure", err)
	}
	if _, apart := resultItemKey(t, f, "taken"); apart {
		t.Fatalf("the record references a result item before its completion")
	}
	later := now.Add(20 * time.Second)
	taker, prev, err := f.store.Acquire(ctx, core.Reserve("taken", fp, "tok-taker", nil, later, later.Add(10*time.Second), time.Hour), later, acquirePolicy)
	if err != nil || prev == nil || prev.Status != core.StatusInProgress || prev.Result != nil {
		t.Fatalf("takeover = %v, replacing %v; want it to replace the holder's in-progress record, without a result", err, prev)
	}
	if _, err := f.store.Complete(ctx, core.Succeed(taker, fresh, later.Add(time.Second), time.Hour)); err != nil {
		t.Fatal(err)
	}
	dying.fail = false
	if _, err := stale.Complete(ctx, core.Succeed(holder, old, later.Add(2*time.Second), time.Hour)); !errors.Is(err, idem.ErrLeaseLost) {
		t.Errorf("the stale holder's completion = %v, want ErrLeaseLost", err)
	}
	var ce *idem.ConflictError
	_, _, err = f.store.Acquire(ctx, core.Reserve("taken", fp, "tok-dup", nil, later.Add(3*time.Second), later.Add(time.Minute), time.Hour), later.Add(3*time.Second), acquirePolicy)
	if !errors.As(err, &ce) || !bytes.Equal(ce.Existing.Result, fresh) {
		t.Fatalf("duplicate = %v; want the takeover's result replayed", err)
	}
}

// maxKeyWithinOneUnit is the longest key (prefix and sort key value
// included) whose succeeded record, with its result in a result item,
// stays within one write unit, with the default attribute names and the
// runner's 32-character lease tokens: docs/dynamodb.md states it.
const maxKeyWithinOneUnit = 694

// TestRecordWithinOneUnitUpToTheKeyBound finds the longest key whose
// record stays within one write unit whatever its result (compressed, in a
// result item), and whose reservation does too, and checks the bound the
// page states.
func TestRecordWithinOneUnitUpToTheKeyBound(t *testing.T) {
	t.Parallel()
	result := bytes.Repeat([]byte(`{"sku":"SKU-000001","qty":1,"note":"`+strings.Repeat("x", 40)+`"},`), 4000)
	token := strings.Repeat("t", 32)
	sizes := func(n int) (reserved, completed int) {
		f := &fakeAPI{}
		s := newUnitStore(t, f)
		rec := core.Reserve(strings.Repeat("k", n), fp, token, nil, t0, t0.Add(time.Minute), time.Hour)
		rec.Attempts = 99
		if err := s.Reserve(context.Background(), rec, nil, t0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Complete(context.Background(), core.Succeed(rec, result, t0.Add(time.Second), time.Hour)); err != nil {
			t.Fatal(err)
		}
		record := f.puts[len(f.puts)-1].Item
		if _, ok := record[ddbstore.AttrResultItem]; !ok {
			t.Fatalf("key of %d bytes: the result is not kept apart", n)
		}
		return ddbstore.ItemSize(f.puts[0].Item), ddbstore.ItemSize(record)
	}
	longest := 0
	for n := 1; n < 2000; n++ {
		reserved, completed := sizes(n)
		if max(reserved, completed) > ddbstore.RecordUnit {
			break
		}
		longest = n
	}
	if longest != maxKeyWithinOneUnit {
		t.Errorf("longest key within one write unit: %d bytes, the page says %d", longest, maxKeyWithinOneUnit)
	}
	doc, err := os.ReadFile("../docs/dynamodb.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), fmt.Sprintf("keys of up to %d bytes", maxKeyWithinOneUnit)) {
		t.Errorf("docs/dynamodb.md does not state the bound: keys of up to %d bytes", maxKeyWithinOneUnit)
	}
}

// TestResultKeptInTheRecordIsStillRead: a record whose large result is
// kept in the record itself, as the previous release kept every result that
// fits the item, is replayed byte for byte, and a new execution past its
// retention replaces it.
func TestResultKeptInTheRecordIsStillRead(t *testing.T) {
	integration(t)
	f := newFixture(t)
	clock := fakeclock.New(time.Now().Truncate(time.Second))
	r := newRunnerOpts(t, f.store, clock, idem.WithRetention(time.Minute))
	ctx := context.Background()
	result := randomBytes(64 << 10)
	mustDo(t, ctx, r, "inline:key", func(context.Context) ([]byte, error) { return result, nil })
	record := rawItem(t, f, "inline:key")
	for _, name := range []string{ddbstore.AttrResultItem, ddbstore.AttrResultSHA256, ddbstore.AttrResultSize, ddbstore.AttrResultOmitted, ddbstore.AttrResultEncoding} {
		delete(record, name)
	}
	record[ddbstore.AttrResult] = &types.AttributeValueMemberB{Value: result}
	putRaw(t, f, record) // as v0.1.0 wrote it
	out := mustDo(t, ctx, r, "inline:key", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
	if !out.Replayed || !bytes.Equal(out.Result, result) {
		t.Fatalf("duplicate of a record holding its result: replayed %v, %d bytes; want the %d bytes", out.Replayed, len(out.Result), len(result))
	}
	clock.Advance(2 * time.Minute)
	out = mustDo(t, ctx, r, "inline:key", func(context.Context) ([]byte, error) { return []byte(`"again"`), nil })
	if out.Replayed || string(out.Result) != `"again"` {
		t.Fatalf("call past retention = replayed %v; want a new execution", out.Replayed)
	}
	if _, ok := rawItem(t, f, "inline:key")[ddbstore.AttrResult].(*types.AttributeValueMemberB); !ok {
		t.Errorf("the new execution's small result is not in its record")
	}
}
