package ddbstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/blob"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/fakeclock"
)

// memTable is a DynamoDB table in memory, enough for a runner over the store
// without a server: a reservation or an acquisition is applied when the key
// is absent, a completion when the stored record is in progress with the
// completion's token; a refused write fails with the stored item (ALL_OLD).
// Safe for concurrent use.
type memTable struct {
	ddbstore.API // the calls a test does not answer (nil: a call panics)
	mu           sync.Mutex
	items        map[string]map[string]types.AttributeValue // by pk; guarded by mu
	puts         int                                        // guarded by mu
}

func newMemTable() *memTable { return &memTable{items: map[string]map[string]types.AttributeValue{}} }

func (m *memTable) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.puts++
	pk := in.Item[ddbstore.DefaultKeyAttribute].(*types.AttributeValueMemberS).Value
	old, found := m.items[pk]
	cond := aws.ToString(in.ConditionExpression)
	ok := !found
	if found && strings.HasPrefix(cond, "#st = :in_progress") {
		tok := in.ExpressionAttributeValues[":tok"].(*types.AttributeValueMemberS).Value
		ok = strAttr(old, ddbstore.AttrStatus) == string(core.StatusInProgress) && strAttr(old, ddbstore.AttrLeaseToken) == tok
	}
	if !ok {
		return nil, ccf(old)
	}
	m.items[pk] = in.Item
	return &dynamodb.PutItemOutput{}, nil
}

// UpdateItem answers an acquisition (the runner's one-write reservation)
// of an absent key: it writes the item the update's SET clauses give (the
// counts computed on the server count 1). Any other is refused with the
// stored item, as a completed record refuses it.
func (m *memTable) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pk := in.Key[ddbstore.DefaultKeyAttribute].(*types.AttributeValueMemberS).Value
	if old, found := m.items[pk]; found {
		return nil, ccf(old)
	}
	item := map[string]types.AttributeValue{ddbstore.DefaultKeyAttribute: in.Key[ddbstore.DefaultKeyAttribute]}
	set, _, _ := strings.Cut(strings.TrimPrefix(aws.ToString(in.UpdateExpression), "SET "), " REMOVE ")
	for _, clause := range strings.Split(set, ", ") {
		name, value, _ := strings.Cut(clause, " = ")
		if v, ok := in.ExpressionAttributeValues[value]; ok {
			item[in.ExpressionAttributeNames[name]] = v
		} else {
			item[in.ExpressionAttributeNames[name]] = &types.AttributeValueMemberN{Value: "1"}
		}
	}
	m.items[pk] = item
	return &dynamodb.UpdateItemOutput{}, nil
}

func (m *memTable) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pk := in.Key[ddbstore.DefaultKeyAttribute].(*types.AttributeValueMemberS).Value
	return &dynamodb.GetItemOutput{Item: m.items[pk]}, nil
}

// item returns the stored item of key.
func (m *memTable) item(key string) map[string]types.AttributeValue {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.items[key]
}

func (m *memTable) putCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.puts
}

func strAttr(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// countingBlob is a blob.Memory that counts calls and fails Puts as putErr
// says (nil: never). Safe for concurrent use.
type countingBlob struct {
	blob.Memory
	mu         sync.Mutex
	puts, gets int               // guarded by mu
	putErr     func(n int) error // set before use
}

func (c *countingBlob) Put(ctx context.Context, name string, data []byte) error {
	c.mu.Lock()
	c.puts++
	n := c.puts
	c.mu.Unlock()
	if c.putErr != nil {
		if err := c.putErr(n); err != nil {
			return err
		}
	}
	return c.Memory.Put(ctx, name, data)
}

func (c *countingBlob) Get(ctx context.Context, name string) ([]byte, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Memory.Get(ctx, name)
}

func (c *countingBlob) GetLimited(ctx context.Context, name string, max int64) ([]byte, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Memory.GetLimited(ctx, name, max)
}

func (c *countingBlob) calls() (puts, gets int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.puts, c.gets
}

// The unit tests' stores take items of at most smallItem bytes (the least
// WithMaxItemSize allows), so that a result of large bytes is too large for
// the item: the code paths are those of a 400 KB limit, at a fraction of the
// cost (the end-to-end test in s3blob replays 2 MB through S3).
const (
	smallItem = 4096
	large     = 16 << 10
)

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// largeFixture is a runner over a store on a memTable with a countingBlob.
type largeFixture struct {
	table  *memTable
	blobs  *countingBlob
	store  *ddbstore.Store
	runner *idem.Runner
	clock  *fakeclock.Clock
}

func newLargeFixture(t *testing.T, opts ...idem.Option) *largeFixture {
	t.Helper()
	f := &largeFixture{table: newMemTable(), blobs: &countingBlob{}, clock: fakeclock.New(t0)}
	var err error
	f.store, err = ddbstore.New(f.table, "idem-unit", ddbstore.WithLargeResults(f.blobs), ddbstore.WithMaxItemSize(smallItem))
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]idem.Option{idem.WithClock(f.clock.Now), idem.WithSleep(f.clock.Sleep)}, opts...)
	f.runner, err = idem.New(f.store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// do runs key through the runner with a handler that returns result and
// counts its executions in *runs.
func (f *largeFixture) do(key string, payload, result []byte, runs *int) (idem.Outcome, error) {
	return f.runner.Do(context.Background(), key, payload, func(context.Context) ([]byte, error) {
		*runs++
		return result, nil
	})
}

func TestLargeResultPlacement(t *testing.T) {
	t.Parallel()
	hexText := []byte(hex.EncodeToString(randomBytes(16 << 10))) // 32 KB that gzip halves: still too large
	cases := []struct {
		name     string
		result   []byte
		inBlob   bool
		encoding string
	}{
		{"small result stays in the item", []byte(`{"ok":true}`), false, ""},
		{"compressible result stays in the item", bytes.Repeat([]byte(`{"a":"bcdefgh"}`), 4_000), false, "gzip"},
		{"incompressible result goes to the blob store raw", randomBytes(4 * large), true, ""},
		{"compressible result goes to the blob store gzipped", hexText, true, "gzip"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newLargeFixture(t)
			runs := 0
			out, err := f.do("evt:large:1", []byte(`{"n":1}`), tc.result, &runs)
			if err != nil || out.Verdict != idem.Executed || out.ResultOmitted || !bytes.Equal(out.Result, tc.result) {
				t.Fatalf("first call: verdict %v, omitted %v, %d bytes, %v", out.Verdict, out.ResultOmitted, len(out.Result), err)
			}
			item := f.table.item("evt:large:1")
			_, hasResult := item[ddbstore.AttrResult]
			_, hasOmitted := item[ddbstore.AttrResultOmitted]
			ref := strAttr(item, ddbstore.AttrResultRef)
			if hasResult == tc.inBlob || (ref != "") != tc.inBlob || hasOmitted || strAttr(item, ddbstore.AttrResultEncoding) != tc.encoding {
				t.Fatalf("item: result %v, ref %q, omitted %v, encoding %q; want in blob %v, encoding %q",
					hasResult, ref, hasOmitted, strAttr(item, ddbstore.AttrResultEncoding), tc.inBlob, tc.encoding)
			}
			wantCalls := map[bool]int{false: 0, true: 1}[tc.inBlob]
			if puts, gets := f.blobs.calls(); puts != wantCalls || gets != 0 {
				t.Fatalf("after the first call: %d blob puts, %d gets; want %d, 0", puts, gets, wantCalls)
			}
			if tc.inBlob {
				obj, err := f.blobs.Memory.Get(context.Background(), ref)
				if err != nil || blob.Verify(obj, strAttr(item, ddbstore.AttrResultSHA256)) != nil || !strings.HasPrefix(ref, idem.HashKey("evt:large:1")+"/") {
					t.Fatalf("object %q: %d bytes, %v; want the recorded SHA-256 under the key's hash", ref, len(obj), err)
				}
			}

			// A duplicate replays the exact bytes with one blob read, or
			// none when the result is in the item.
			out, err = f.do("evt:large:1", []byte(`{"n":1}`), nil, &runs)
			if err != nil || out.Verdict != idem.Replayed || out.ResultOmitted || !bytes.Equal(out.Result, tc.result) || runs != 1 {
				t.Fatalf("duplicate: verdict %v, omitted %v, %d bytes (equal %v), runs %d, %v",
					out.Verdict, out.ResultOmitted, len(out.Result), bytes.Equal(out.Result, tc.result), runs, err)
			}
			if puts, gets := f.blobs.calls(); puts != wantCalls || gets != wantCalls {
				t.Fatalf("after the duplicate: %d blob puts, %d gets; want %d, %d", puts, gets, wantCalls, wantCalls)
			}

			// A key reused with another payload needs no body: no blob read.
			if _, err := f.do("evt:large:1", []byte(`{"n":2}`), nil, &runs); !errors.Is(err, core.ErrKeyReused) {
				t.Fatalf("reused key: %v, want ErrKeyReused", err)
			}
			if _, gets := f.blobs.calls(); gets != wantCalls {
				t.Fatalf("after the reused key: %d blob gets, want %d", gets, wantCalls)
			}
		})
	}
}

func TestLargeResultReplayFailures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		damage func(m *blob.Memory, name string)
		want   error
	}{
		{"object replaced", func(m *blob.Memory, name string) {
			_ = m.Put(context.Background(), name, randomBytes(large))
		}, blob.ErrMismatch},
		{"object cut short", func(m *blob.Memory, name string) {
			obj, _ := m.Get(context.Background(), name)
			_ = m.Put(context.Background(), name, obj[:len(obj)-1])
		}, blob.ErrMismatch},
		{"one byte flipped", func(m *blob.Memory, name string) {
			obj, _ := m.Get(context.Background(), name)
			obj[len(obj)/2] ^= 1
			_ = m.Put(context.Background(), name, obj)
		}, blob.ErrMismatch},
		{"object missing", func(m *blob.Memory, name string) { m.Delete(name) }, blob.ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newLargeFixture(t)
			runs := 0
			if _, err := f.do("evt:large:2", nil, randomBytes(large), &runs); err != nil {
				t.Fatal(err)
			}
			tc.damage(&f.blobs.Memory, strAttr(f.table.item("evt:large:2"), ddbstore.AttrResultRef))
			out, err := f.do("evt:large:2", nil, nil, &runs)
			if !errors.Is(err, tc.want) || !errors.Is(err, ddbstore.ErrLargeResult) || out.Result != nil || runs != 1 {
				t.Fatalf("replay: %d bytes, runs %d, err %v; want no bytes, no run, %v", len(out.Result), runs, err, tc.want)
			}
			if c := core.Classify(err, core.DefaultClassifiers...); c != core.Permanent {
				t.Errorf("class %v, want permanent", c)
			}
			var se *ddbstore.Error
			if !errors.As(err, &se) || se.Op != "acquire" {
				t.Errorf("error %v is not an acquire *ddbstore.Error", err)
			}
			// Get reports the same failure.
			if _, err := f.store.Get(context.Background(), "evt:large:2", t0); !errors.Is(err, tc.want) {
				t.Errorf("Get: %v, want %v", err, tc.want)
			}
		})
	}
}

// transientErr is an error its producer marked transient, as s3blob does
// with a throttled PutObject.
var transientErr = core.MarkTransient(errors.New("SlowDown: please reduce your request rate"))

func TestLargeResultPutFailure(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		putErr   func(n int) error
		class    core.Class // of Complete's error
		recorded bool       // through the runner, which retries transient completions
	}{
		{"transient once", func(n int) error {
			if n == 1 {
				return transientErr
			}
			return nil
		}, core.Transient, true},
		{"transient always", func(int) error { return transientErr }, core.Transient, false},
		{"permanent", func(int) error { return errors.New("AccessDenied") }, core.Permanent, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The store alone: the completion fails and writes no record.
			table, blobs := newMemTable(), &countingBlob{putErr: tc.putErr}
			s, err := ddbstore.New(table, "idem-unit", ddbstore.WithLargeResults(blobs), ddbstore.WithMaxItemSize(smallItem))
			if err != nil {
				t.Fatal(err)
			}
			rec := succeeded("tok-1", randomBytes(large))
			_, err = s.Complete(context.Background(), rec)
			if !errors.Is(err, ddbstore.ErrLargeResult) || !errors.Is(err, idem.ErrCommitRefused) || core.Classify(err) != tc.class || table.putCount() != 0 {
				t.Fatalf("Complete: %v (class %v), %d puts; want ErrLargeResult and ErrCommitRefused, %v, no put", err, core.Classify(err), table.putCount(), tc.class)
			}

			// Through a runner: the handler runs once; the record is
			// completed only once the object is written, else the success
			// is refused (commit_refused): a retryable failure, pointing at
			// nothing, takes its place, and the next delivery runs again.
			f := newLargeFixture(t, idem.WithCompletionAttempts(3))
			f.blobs.putErr = tc.putErr
			runs := 0
			result := randomBytes(large)
			_, err = f.do("evt:large:3", nil, result, &runs)
			item := f.table.item("evt:large:3")
			status, ref := strAttr(item, ddbstore.AttrStatus), strAttr(item, ddbstore.AttrResultRef)
			if tc.recorded {
				if err != nil || status != string(core.StatusSucceeded) || ref == "" {
					t.Fatalf("runner: %v, status %s, ref %q; want succeeded with a reference", err, status, ref)
				}
				return
			}
			if idem.VerdictOf(err) != idem.CommitRefused || status != string(core.StatusFailed) || ref != "" || runs != 1 {
				t.Fatalf("runner: %v, status %s, ref %q, runs %d; want commit_refused, failed, no reference, 1 run", err, status, ref, runs)
			}
			if len(f.blobs.Names()) != 0 {
				t.Errorf("objects %v written by failed puts", f.blobs.Names())
			}
			if rec, err := f.store.Get(context.Background(), "evt:large:3", f.clock.Now()); err != nil || !rec.Retryable {
				t.Fatalf("record = %v, %v; want a retryable failure (the next delivery runs again: TestCommitRefusedLargeResult)", rec, err)
			}
		})
	}
}

func TestLargeResultRetriedCompletion(t *testing.T) {
	t.Parallel()
	table, blobs := newMemTable(), &countingBlob{}
	s, err := ddbstore.New(table, "idem-unit", ddbstore.WithLargeResults(blobs), ddbstore.WithMaxItemSize(smallItem))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Reserve(ctx, reservation("tok-1"), nil, t0); err != nil {
		t.Fatal(err)
	}
	rec := succeeded("tok-1", randomBytes(large))
	for try := 1; try <= 2; try++ {
		got, err := s.Complete(ctx, rec)
		if err != nil || got.ResultOmitted || !bytes.Equal(got.Result, rec.Result) {
			t.Fatalf("try %d: %d bytes, omitted %v, %v; want the result", try, len(got.Result), got.ResultOmitted, err)
		}
	}
	// The retry rewrote the same object.
	if puts, _ := blobs.calls(); puts != 2 || len(blobs.Names()) != 1 {
		t.Fatalf("%d puts, objects %v; want 2 puts of one object", puts, blobs.Names())
	}
}

func TestLargeResultWithoutBlobStore(t *testing.T) {
	t.Parallel()
	// A record written with a blob store, read by a store without one: the
	// outcome is known, the body is not here.
	table := newMemTable()
	with, err := ddbstore.New(table, "idem-unit", ddbstore.WithLargeResults(blob.NewMemory()), ddbstore.WithMaxItemSize(smallItem))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := with.Reserve(ctx, reservation("tok-1"), nil, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := with.Complete(ctx, succeeded("tok-1", randomBytes(large))); err != nil {
		t.Fatal(err)
	}
	without, err := ddbstore.New(table, "idem-unit", ddbstore.WithMaxItemSize(smallItem))
	if err != nil {
		t.Fatal(err)
	}
	got, err := without.Get(ctx, "unit:key:1", t0)
	if err != nil || !got.ResultOmitted || got.Result != nil || got.Status != core.StatusSucceeded {
		t.Fatalf("Get without blob store: %v, omitted %v, %d bytes, %v; want succeeded, omitted, no bytes", got.Status, got.ResultOmitted, len(got.Result), err)
	}
	err = without.Reserve(ctx, reservation("tok-2"), nil, t0)
	var ce *idem.ConflictError
	if !errors.As(err, &ce) || !ce.Existing.ResultOmitted || ce.Existing.Result != nil {
		t.Fatalf("Reserve without blob store: %v; want a conflict with an omitted result", err)
	}
}

func TestLargeResultCorruptReference(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(item map[string]types.AttributeValue)
	}{
		{"no SHA-256", func(item map[string]types.AttributeValue) { delete(item, ddbstore.AttrResultSHA256) }},
		{"no size", func(item map[string]types.AttributeValue) { delete(item, ddbstore.AttrResultSize) }},
		{"size not a number", func(item map[string]types.AttributeValue) {
			item[ddbstore.AttrResultSize] = &types.AttributeValueMemberS{Value: "big"}
		}},
		{"on a failed record", func(item map[string]types.AttributeValue) {
			item[ddbstore.AttrStatus] = &types.AttributeValueMemberS{Value: string(core.StatusFailed)}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			table := newMemTable()
			s, err := ddbstore.New(table, "idem-unit", ddbstore.WithLargeResults(blob.NewMemory()), ddbstore.WithMaxItemSize(smallItem))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := s.Reserve(ctx, reservation("tok-1"), nil, t0); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Complete(ctx, succeeded("tok-1", randomBytes(large))); err != nil {
				t.Fatal(err)
			}
			tc.edit(table.item("unit:key:1"))
			if _, err := s.Get(ctx, "unit:key:1", t0); !errors.Is(err, ddbstore.ErrCorruptRecord) {
				t.Fatalf("Get: %v, want ErrCorruptRecord", err)
			}
		})
	}
}

func TestWithLargeResultsNil(t *testing.T) {
	t.Parallel()
	if _, err := ddbstore.New(&fakeAPI{}, "idem-unit", ddbstore.WithLargeResults(nil)); err == nil {
		t.Fatal("WithLargeResults(nil) accepted")
	}
}

// The blob store is never asked for records that need no body: in-progress
// and failed records, and Get of an expired record.
func TestLargeResultNoBlobCalls(t *testing.T) {
	t.Parallel()
	table, blobs := newMemTable(), &countingBlob{}
	s, err := ddbstore.New(table, "idem-unit", ddbstore.WithLargeResults(blobs), ddbstore.WithMaxItemSize(smallItem))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Reserve(ctx, reservation("tok-1"), nil, t0); err != nil {
		t.Fatal(err)
	}
	rec := succeeded("tok-1", randomBytes(large))
	if _, err := s.Complete(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "unit:key:1", rec.ExpiresAt.Add(time.Second)); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Get after retention: %v, want ErrNotFound", err)
	}
	if puts, gets := blobs.calls(); puts != 1 || gets != 0 {
		t.Fatalf("%d blob puts, %d gets; want 1, 0", puts, gets)
	}
}

// A record with no room left even for the reference (a long key and lease
// token at the item limit) is stored as before the option: outcome kept,
// body omitted, and nothing written to the blob store.
func TestLargeResultNoRoomForReference(t *testing.T) {
	t.Parallel()
	table, blobs := newMemTable(), &countingBlob{}
	s, err := ddbstore.New(table, "idem-unit", ddbstore.WithLargeResults(blobs), ddbstore.WithMaxItemSize(smallItem))
	if err != nil {
		t.Fatal(err)
	}
	key, token := "unit:"+strings.Repeat("k", 2000), strings.Repeat("t", 1850)
	res := core.Reserve(key, fp, token, nil, t0, t0.Add(time.Minute), time.Hour)
	ctx := context.Background()
	if err := s.Reserve(ctx, res, nil, t0); err != nil {
		t.Fatal(err)
	}
	got, err := s.Complete(ctx, core.Succeed(res, randomBytes(large), t0.Add(time.Second), time.Hour))
	if err != nil || !got.ResultOmitted || got.Result != nil {
		t.Fatalf("Complete: omitted %v, %d bytes, %v; want omitted, no bytes", got.ResultOmitted, len(got.Result), err)
	}
	item := table.item(key)
	if _, ok := item[ddbstore.AttrResultRef]; ok || strAttr(item, ddbstore.AttrStatus) != string(core.StatusSucceeded) {
		t.Fatalf("item: status %s, reference %v; want succeeded without a reference", strAttr(item, ddbstore.AttrStatus), ok)
	}
	if puts, _ := blobs.calls(); puts != 0 {
		t.Fatalf("%d blob puts, want 0", puts)
	}
}
