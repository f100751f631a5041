package ddbstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/fakeclock"
	"github.com/idemgo/idem/s3blob"
	"github.com/idemgo/idem/storetest"
)

// transactions fails the test without a DynamoDB endpoint (see
// integration) and skips it, saying so, where testenv says that the server
// has no TransactWriteItems (dynalite): the make test run under moto runs
// it.
func transactions(t *testing.T) {
	t.Helper()
	integration(t)
	if os.Getenv("IDEM_DDB_NO_TRANSACTIONS") == "1" {
		t.Skipf("IDEM_DDB_NO_TRANSACTIONS=1: %s has no TransactWriteItems; the transaction tests run under moto", server())
	}
}

// bizPut is an unconditional Put of a business item of the fixture's
// table (the store's records and the business items share it, as in a
// single-table design), named name.
func (f *fixture) bizPut(name string) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(f.table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "biz#" + name}, "amount": &types.AttributeValueMemberN{Value: "100"}}}}
}

// bizExists reports whether the business item name is stored.
func (f *fixture) bizExists(t *testing.T, name string) bool {
	t.Helper()
	out, err := f.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.table),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "biz#" + name}}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("GetItem of business item %s: %v", name, err)
	}
	return len(out.Item) > 0
}

func TestConformanceStaged(t *testing.T) {
	transactions(t)
	f := newFixture(t)
	storetest.RunStaged(t, func(t *testing.T) idem.Store { return f.store },
		func(t *testing.T, key string) (any, func() bool) {
			return f.bizPut(key), func() bool { return f.bizExists(t, key) }
		})
}

// diesBeforeCommit is the store of a process that dies after its handler
// returned and before the commit reached DynamoDB.
type diesBeforeCommit struct{ *ddbstore.Store }

func (d diesBeforeCommit) CompleteStaged(context.Context, core.Record, []any) (core.Record, error) {
	return core.Record{}, errors.New("the process died before the commit")
}

func TestStagedCrashBeforeCommitLeavesNoBusinessWrite(t *testing.T) {
	transactions(t)
	for _, tc := range []struct {
		name  string
		store func(f *fixture) idem.Store
		// verdict is the first delivery's; wait, whether the next one
		// waits for the lease to end (and takes the key over).
		verdict idem.Verdict
		wait    bool
	}{
		// The process died: the key is in progress until its lease ends.
		{"process dies before the commit", func(f *fixture) idem.Store { return diesBeforeCommit{f.store} }, idem.OutcomeNotRecorded, true},
		// Never sent (a refused connection): certainly nothing written,
		// so a retryable failure is recorded and the next delivery runs
		// at once.
		{"every commit refused on the wire", func(f *fixture) idem.Store {
			f.rec.inject(fault{Op: "TransactWriteItems", Kind: refused, Times: -1})
			return f.store
		}, idem.CommitRefused, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			clock := fakeclock.New(time.Now().Truncate(time.Second))
			key := "evt:tx-crash:1"
			handler := func(ctx context.Context) ([]byte, error) {
				return []byte(`{"charged":100}`), ddbstore.Stage(ctx, f.bizPut("order-1"))
			}
			out, err := newRunner(t, tc.store(f), clock).Do(context.Background(), key, []byte(`{}`), handler)
			if out.Verdict != tc.verdict {
				t.Fatalf("Do whose commit never lands = %s, %v; want %s", out.Verdict, err, tc.verdict)
			}
			if f.bizExists(t, "order-1") {
				t.Fatal("the business write exists although its commit never landed")
			}
			f.rec.clearFaults()
			if tc.wait {
				clock.Advance(testLease + time.Second)
			}
			out, err = newRunner(t, f.store, clock).Do(context.Background(), key, []byte(`{}`), handler)
			if err != nil || out.Verdict != idem.Executed || out.TookOver != tc.wait || out.Attempts != 2 {
				t.Fatalf("next delivery = %+v, %v; want executed, taken over %v, attempt 2", out, err, tc.wait)
			}
			if !f.bizExists(t, "order-1") {
				t.Fatal("the next delivery's commit did not write the business item")
			}
			if rec, err := f.store.Get(context.Background(), key, clock.Now()); err != nil || rec.Status != core.StatusSucceeded {
				t.Fatalf("record = %v, %v; want succeeded", rec, err)
			}
		})
	}
}

func TestStagedCommitWhoseAnswerWasLostIsRecognised(t *testing.T) {
	transactions(t)
	f := newFixture(t)
	clock := fakeclock.New(time.Now().Truncate(time.Second))
	f.rec.inject(fault{Op: "TransactWriteItems", After: true, Kind: timeout, Times: 1})
	out, err := newRunner(t, f.store, clock).Do(context.Background(), "evt:tx-lost:1", []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		return []byte(`{"ok":true}`), ddbstore.Stage(ctx, f.bizPut("lost-1"))
	})
	if err != nil || out.Verdict != idem.Executed {
		t.Fatalf("Do = %+v, %v; want executed (the retried commit recognised)", out, err)
	}
	if n, reads := f.rec.count("TransactWriteItems"), f.rec.count("GetItem"); n != 1 || reads != 1 {
		t.Fatalf("TransactWriteItems calls = %d, GetItem %d; want 1 (applied, its answer lost) and 1 (the check that finds it)", n, reads)
	}
	if !f.bizExists(t, "lost-1") {
		t.Fatal("business item absent")
	}
}

func TestStagedStaleHolderRefusedAsAWhole(t *testing.T) {
	transactions(t)
	f := newFixture(t)
	clock := fakeclock.New(time.Now().Truncate(time.Second))
	key := "evt:tx-stale:1"
	var second idem.Outcome
	var secondErr error
	out, err := newRunner(t, f.store, clock).Do(context.Background(), key, []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		// This holder stalls past its lease; another delivery takes over
		// and commits first.
		clock.Advance(testLease + time.Second)
		second, secondErr = newRunner(t, f.store, clock).Do(context.Background(), key, []byte(`{}`), func(ctx context.Context) ([]byte, error) {
			return []byte(`{"by":"second"}`), ddbstore.Stage(ctx, f.bizPut("second"))
		})
		return []byte(`{"by":"stale"}`), ddbstore.Stage(ctx, f.bizPut("stale"))
	})
	if secondErr != nil || second.Verdict != idem.Executed {
		t.Fatalf("delivery that took over = %+v, %v; want executed", second, secondErr)
	}
	if !errors.Is(err, idem.ErrLeaseLost) || out.Verdict != idem.OutcomeNotRecorded {
		t.Fatalf("stale holder's Do = %+v (verdict %s), %v; want ErrLeaseLost", out, out.Verdict, err)
	}
	if f.bizExists(t, "stale") || !f.bizExists(t, "second") {
		t.Fatalf("business items: stale %v, second %v; want only the second's", f.bizExists(t, "stale"), f.bizExists(t, "second"))
	}
}

func TestStagedConditionFailureFailsPermanently(t *testing.T) {
	transactions(t)
	f := newFixture(t)
	clock := fakeclock.New(time.Now().Truncate(time.Second))
	key := "evt:tx-cond:1"
	out, err := newRunner(t, f.store, clock).Do(context.Background(), key, []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		debit := types.TransactWriteItem{Update: &types.Update{TableName: aws.String(f.table),
			Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "biz#account-1"}},
			UpdateExpression:          aws.String("SET balance = balance - :amt"),
			ConditionExpression:       aws.String("balance >= :amt"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":amt": &types.AttributeValueMemberN{Value: "100"}}}}
		return []byte(`{"ok":true}`), ddbstore.Stage(ctx, f.bizPut("receipt-1"), debit)
	})
	var sw *idem.StagedWriteError
	if out.Verdict != idem.FailedPermanently || !errors.As(err, &sw) || sw.Index != 1 || !errors.Is(err, idem.ErrStagedConditionFailed) {
		t.Fatalf("Do = %+v, %v; want failed_permanently for staged write 1's condition", out, err)
	}
	if f.bizExists(t, "receipt-1") || f.bizExists(t, "account-1") {
		t.Fatal("a business write exists although the transaction was refused")
	}
	if rec, err := f.store.Get(context.Background(), key, clock.Now()); err != nil || rec.Status != core.StatusFailed || rec.Retryable {
		t.Fatalf("record = %v, %v; want a permanent failure", rec, err)
	}
}

// motoBucket returns a blob store on a new bucket of the S3 API the SDK's
// configuration names (AWS_ENDPOINT_URL_S3: moto under testenv), or fails
// the test when there is none.
func motoBucket(t *testing.T) *s3blob.Store { return motoBucketWith(t) }

// motoBucketWith is motoBucket with the S3 client's options changed by
// opts.
func motoBucketWith(t *testing.T, opts ...func(*s3.Options)) *s3blob.Store {
	t.Helper()
	if os.Getenv("AWS_ENDPOINT_URL_S3") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Fatal("no S3 endpoint: run the test under `testenv -server moto` (or set AWS_ENDPOINT_URL_S3), or set IDEM_SKIP_INTEGRATION=1")
	}
	cfg, err := config.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	client := s3.NewFromConfig(cfg, append([]func(*s3.Options){func(o *s3.Options) { o.UsePathStyle = true }}, opts...)...)
	bucket := "idem-tx-" + strings.ToLower(rand.Text()[:12])
	if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	blobs, err := s3blob.New(client, bucket, "idem/")
	if err != nil {
		t.Fatal(err)
	}
	return blobs
}

// TestStagedLargeResult: a success with staged writes whose result does
// not fit the item (incompressible, over an item limit lowered to
// smallItem so that the path is a 400 KB limit's at a fraction of moto's
// cost) keeps the result in S3,
// commits the staged write with the record, and a duplicate replays the
// exact bytes, as a success without staged writes does.
func TestStagedLargeResult(t *testing.T) {
	transactions(t)
	f := newFixture(t, ddbstore.WithLargeResults(motoBucket(t)), ddbstore.WithMaxItemSize(smallItem))
	clock := fakeclock.New(time.Now().Truncate(time.Second))
	big := randomBytes(4 * large)
	runs := 0
	handler := func(ctx context.Context) ([]byte, error) {
		runs++
		return big, ddbstore.Stage(ctx, f.bizPut("order-large"))
	}
	r := newRunner(t, f.store, clock)
	out, err := r.Do(context.Background(), "evt:tx-large:1", []byte(`{}`), handler)
	if err != nil || out.Verdict != idem.Executed || out.ResultOmitted || !f.bizExists(t, "order-large") {
		t.Fatalf("Do = %s, omitted %v, %v; business write stored %v; want executed, kept, stored", out.Verdict, out.ResultOmitted, err, f.bizExists(t, "order-large"))
	}
	clock.Advance(time.Second)
	again, err := r.Do(context.Background(), "evt:tx-large:1", []byte(`{}`), handler)
	if err != nil || again.Verdict != idem.Replayed || again.ResultOmitted || !bytes.Equal(again.Result, big) || runs != 1 {
		t.Fatalf("duplicate = %s, omitted %v, %d of %d bytes equal %v, %v after %d runs; want the exact result replayed, one run",
			again.Verdict, again.ResultOmitted, len(again.Result), len(big), bytes.Equal(again.Result, big), err, runs)
	}
}

// TestStagedCallsPerPath measures the calls of a staged success's paths
// through idem.Runner and checks them against the cost table of
// docs/effectively-once.md (transactional completion, "What it costs").
func TestStagedCallsPerPath(t *testing.T) {
	transactions(t)
	rows := docTable(t, "../docs/effectively-once.md", "| path | calls | write capacity |")
	f := newFixture(t)
	clock := fakeclock.New(time.Now().Truncate(time.Second))
	r := newRunner(t, f.store, clock)
	ctx := context.Background()
	measure := func(path, key string, fn idem.Handler) {
		t.Helper()
		f.rec.reset()
		_, _ = r.Do(ctx, key, []byte(`{}`), fn)
		var calls []string
		for _, op := range []string{"UpdateItem", "PutItem", "TransactWriteItems", "GetItem"} {
			if n := f.rec.count(op); n > 0 {
				calls = append(calls, fmt.Sprintf("%d `%s`", n, op))
			}
		}
		got, want := strings.Join(calls, " + "), rows[path]
		t.Logf("%-32s %s", path, got)
		if got != want {
			t.Errorf("%s: %s, the table says %q", path, got, want)
		}
		delete(rows, path)
	}
	measure("success without staged writes", "evt:tx-calls:1", func(context.Context) ([]byte, error) { return []byte(`1`), nil })
	measure("success with staged writes", "evt:tx-calls:2", func(ctx context.Context) ([]byte, error) {
		return []byte(`2`), ddbstore.Stage(ctx, f.bizPut("calls-2"))
	})
	measure("staged condition failed", "evt:tx-calls:3", func(ctx context.Context) ([]byte, error) {
		check := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(f.table),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "biz#absent"}}, ConditionExpression: aws.String("attribute_exists(pk)")}}
		return []byte(`3`), ddbstore.Stage(ctx, check)
	})
	f.rec.inject(fault{Op: "TransactWriteItems", After: true, Kind: timeout, Times: 1})
	measure("commit applied, its answer lost", "evt:tx-calls:4", func(ctx context.Context) ([]byte, error) {
		return []byte(`4`), ddbstore.Stage(ctx, f.bizPut("calls-4"))
	})
	f.rec.inject(fault{Op: "TransactWriteItems", After: true, Kind: timeout, Times: 1})
	f.rec.inject(fault{Op: "GetItem", Kind: unavailable, Times: 1})
	measure("commit applied, its answer and the check lost", "evt:tx-calls:5", func(ctx context.Context) ([]byte, error) {
		return []byte(`5`), ddbstore.Stage(ctx, f.bizPut("calls-5"))
	})
	conflicts := true
	f.rec.inner = conflictTransport{inner: f.rec.inner, on: func() bool { return conflicts }}
	measure("commit refused: `commit_refused`", "evt:tx-calls:6", func(ctx context.Context) ([]byte, error) {
		return []byte(`6`), ddbstore.Stage(ctx, f.bizPut("calls-6"))
	})
	conflicts = false
	for path := range rows {
		t.Errorf("the table's path %q is not measured", path)
	}
}

// docTable returns the rows of the Markdown table of page whose header is
// header: each row's second cell by its first.
func docTable(t *testing.T, page, header string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(raw), header+"\n")
	if !ok {
		t.Fatalf("%s has no table %q", page, header)
	}
	rows := map[string]string{}
	for i, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if i == 0 || len(cells) < 2 { // the separator
			continue
		}
		rows[cells[0]] = cells[1]
	}
	return rows
}

// TestCapabilitiesTogetherOnDynamoDB runs every capability of the runner
// and the store at once on moto (transactions and S3): a call waits for a
// crashed holder that completed a step, takes the key over with the
// one-write Acquire, resumes after the step (its downstream key), runs
// through lease renewals, records a step after its first lease's end, stages
// a business write named by a downstream key and returns a result too large
// for the item (over an item limit lowered to smallItem). A call of another runner
// that waits meanwhile replays the result from S3 byte for byte; the
// runner's cache answers a duplicate.
func TestCapabilitiesTogetherOnDynamoDB(t *testing.T) {
	transactions(t)
	f := newFixture(t, ddbstore.WithLargeResults(motoBucket(t)), ddbstore.WithMaxItemSize(smallItem))
	ctx := context.Background()
	clock := fakeclock.New(time.Now().Truncate(time.Second))
	key, payload := "evt:together:1", []byte(`{"order":7}`)
	fpOrder, err := core.Fingerprint(payload)
	if err != nil {
		t.Fatal(err)
	}
	dk := []byte(core.DownstreamKey(key, "charge"))
	crashed := core.Reserve(key, fpOrder, "tok-crashed", nil, clock.Now(), clock.Now().Add(15*time.Second), time.Hour)
	if err := f.store.Reserve(ctx, crashed, nil, clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := f.store.RecordStep(ctx, key, "tok-crashed", core.Step{Name: "charge", Result: dk}, clock.Now()); err != nil {
		t.Fatal(err)
	}
	waiting := func(opts ...idem.Option) *idem.Runner {
		return newRunnerOpts(t, f.store, clock, append([]idem.Option{idem.WithSleep(clock.Block), idem.WithLease(2*time.Second, time.Hour),
			idem.WithLeaseRenewal(10 * time.Second), idem.WithWait(time.Minute)}, opts...)...)
	}
	r, other := waiting(idem.WithCache(8)), waiting()
	big := randomBytes(4 * large)
	setWaiters, stop := clock.Drive(time.Second, 1) // the waiting call
	defer stop()
	var otherOut idem.Outcome
	var otherErr error
	otherDone := make(chan struct{})
	charges := 0
	out, err := r.Do(ctx, key, payload, func(ctx context.Context) ([]byte, error) {
		charge, err := idem.Step(ctx, "charge", func(context.Context) ([]byte, error) { charges++; return []byte("ch_again"), nil })
		if err != nil || !bytes.Equal(charge, dk) {
			return nil, fmt.Errorf("the charge step = %q, %v; want the crashed holder's %q", charge, err, dk)
		}
		setWaiters(3) // this handler, its renewals, and the other runner's waiting call
		go func() {
			defer close(otherDone)
			otherOut, otherErr = other.Do(context.Background(), key, payload, func(context.Context) ([]byte, error) { return nil, errors.New("ran beside the holder") })
		}()
		if err := clock.Block(ctx, 30*time.Second); err != nil { // past the first lease, renewed three times
			return nil, err
		}
		if _, err := idem.Step(ctx, "receipt", func(context.Context) ([]byte, error) { return nil, nil }); err != nil {
			return nil, err
		}
		order, err := idem.DownstreamKey(ctx, "order") // the order's id: the same in every execution
		if err != nil {
			return nil, err
		}
		return big, ddbstore.Stage(ctx, f.bizPut(order))
	})
	setWaiters(1) // the other runner's waiting call: the clock stood still while the outcome was written
	order := core.DownstreamKey(key, "order")
	if err != nil || out.Verdict != idem.Executed || !out.TookOver || !out.Waited || out.ResultOmitted || charges != 0 || !f.bizExists(t, order) {
		t.Fatalf("Do = %s (took over %v, waited %v, omitted %v), %v after %d charges; business write %v; want executed after waiting and taking over, the charge resumed, the write staged",
			out.Verdict, out.TookOver, out.Waited, out.ResultOmitted, err, charges, f.bizExists(t, order))
	}
	<-otherDone
	if otherErr != nil || otherOut.Verdict != idem.Replayed || !otherOut.Waited || !bytes.Equal(otherOut.Result, big) {
		t.Fatalf("the other runner's waiting call = %s (waited %v) %d bytes equal %v, %v; want the large result replayed after waiting",
			otherOut.Verdict, otherOut.Waited, len(otherOut.Result), bytes.Equal(otherOut.Result, big), otherErr)
	}
	again, err := r.Do(ctx, key, payload, func(context.Context) ([]byte, error) { return nil, errors.New("ran again") })
	if err != nil || !again.Cached || !bytes.Equal(again.Result, big) {
		t.Fatalf("a duplicate = %s cached %v, equal %v, %v; want the result from the cache", again.Verdict, again.Cached, bytes.Equal(again.Result, big), err)
	}
}
