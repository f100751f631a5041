package ddbstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/fakeaws"
	"github.com/idemgo/idem/internal/fakeclock"
	"github.com/idemgo/idem/s3blob"
)

// TestCompleteStagedRefusals: the answers of DynamoDB to a
// TransactWriteItems that refuse it as a whole, and certainly apply
// nothing, are the commit refused (idem.ErrCommitRefused), transient where
// a retry may succeed; the answers that refuse a staged write for itself
// stay the handler's error (*idem.StagedWriteError), a lost lease stays
// ErrLeaseLost, and an answer after which the commit may have been applied
// is checked (one GetItem) and is never called refused. Real SDK clients
// against a server that answers as DynamoDB does.
func TestCompleteStagedRefusals(t *testing.T) {
	t.Parallel()
	ddb := fakeaws.DynamoDBError
	other := `{"pk":{"S":"evt:tx-refused:1"},"status":{"S":"in_progress"},"lease_token":{"S":"tok-other"},` +
		`"fingerprint":{"S":"fp"},"attempts":{"N":"2"},"expires_at":{"N":"9999999999"},"lease_until_ms":{"N":"9999999999000"}}`
	tests := []struct {
		name      string
		answer    http.Handler
		refused   bool       // wraps idem.ErrCommitRefused
		class     core.Class // of the error, by the store's classifier and the default chain
		sentinel  error      // another error it wraps
		checkRead bool       // a GetItem checks whether the commit was applied
	}{
		{"TransactionConflict on a staged item", fakeaws.DynamoDBTransactionCanceled("None", "TransactionConflict"), true, core.Transient, ddbstore.ErrThrottled, false},
		{"ThrottlingError on a staged item", fakeaws.DynamoDBTransactionCanceled("None", "ThrottlingError"), true, core.Transient, ddbstore.ErrThrottled, false},
		{"the whole request throttled", ddb(400, "com.amazon.coral.availability#ThrottlingException", "Rate of requests exceeds the allowed throughput."), true, core.Transient, ddbstore.ErrThrottled, false},
		{"a staged table that does not exist", ddb(400, "ResourceNotFoundException", "Requested resource not found"), true, core.Permanent, ddbstore.ErrTableNotFound, false},
		{"access denied to a staged item's action", ddb(400, "com.amazon.coral.service#AccessDeniedException",
			"User: arn:aws:sts::123456789012:assumed-role/orders/fn is not authorized to perform: dynamodb:PutItem on resource: arn:aws:dynamodb:eu-west-1:123456789012:table/ledger"),
			true, core.Permanent, ddbstore.ErrAccessDenied, false},
		{"an unknown cancellation reason", fakeaws.DynamoDBTransactionCanceled("None", "ItemCollectionSizeLimitExceeded"), true, core.Permanent, ddbstore.ErrInvalidRequest, false},
		{"a staged item's own condition", fakeaws.DynamoDBTransactionCanceled("None", "ConditionalCheckFailed"), false, core.Permanent, idem.ErrStagedConditionFailed, false},
		{"the record's condition: another holder", fakeaws.JSONResponse(400, []byte(`{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException",`+
			`"message":"Transaction cancelled","CancellationReasons":[{"Code":"ConditionalCheckFailed","Item":`+other+`},{"Code":"None"}]}`)), false, core.Permanent, idem.ErrLeaseLost, false},
		{"500: may have been applied", ddb(500, "InternalServerError", "Internal server error"), false, core.Transient, ddbstore.ErrUnavailable, true},
		{"a conflict reply cut short: may have been applied", fakeaws.Truncated(fakeaws.DynamoDBTransactionCanceled("None", "TransactionConflict"), 40), false, core.Transient, ddbstore.ErrUnavailable, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := fakeaws.New(t, absent(t))
			srv.Queue(tc.answer)
			s := fakeStoreAt(t, srv)
			_, err := s.CompleteStaged(context.Background(), reserved(t, "evt:tx-refused:1"), many(1, 100))
			if errors.Is(err, idem.ErrCommitRefused) != tc.refused || !errors.Is(err, tc.sentinel) || core.Classify(err, s.ClassifyError) != tc.class {
				t.Fatalf("CompleteStaged = %v (%s); want commit refused %v, %v, %v", err, core.Classify(err, s.ClassifyError), tc.refused, tc.sentinel, tc.class)
			}
			reqs := srv.Requests()
			if checked := reqs[len(reqs)-1].Target == "DynamoDB_20120810.GetItem"; checked != tc.checkRead {
				t.Errorf("requests %v: checked for having been applied %v, want %v", reqs, checked, tc.checkRead)
			}
		})
	}
}

// conflictTransport answers every TransactWriteItems, while on, as DynamoDB
// answers a transaction that another one holds an item of: HTTP 400,
// TransactionCanceledException, TransactionConflict on the staged item.
// Other requests go to the server. Safe for concurrent use after setup.
type conflictTransport struct {
	inner http.RoundTripper
	on    func() bool
	// answer is the refusal (nil: the conflict).
	answer fakeaws.Response
}

func (c conflictTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".TransactWriteItems") || !c.on() {
		return c.inner.RoundTrip(req)
	}
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	answer := c.answer
	if answer.Status == 0 {
		answer = fakeaws.DynamoDBTransactionCanceled("None", "TransactionConflict")
	}
	return response(req, answer), nil
}

// response is answer as the client receives it for req.
func response(req *http.Request, answer fakeaws.Response) *http.Response {
	return &http.Response{StatusCode: answer.Status, Status: fmt.Sprint(answer.Status), Header: answer.Header,
		Body: io.NopCloser(strings.NewReader(string(answer.Body))), ContentLength: int64(len(answer.Body)),
		Request: req, ProtoMajor: 1, ProtoMinor: 1}
}

// refusalCase is a way DynamoDB (or S3) refuses a staged success, and how
// the next delivery gets through.
type refusalCase struct {
	name string
	// setup makes the fixture and the handler's staged write, and returns
	// a func that ends the refusal before the next delivery.
	setup func(t *testing.T) (f *fixture, write func() types.TransactWriteItem, mend func())
	// large makes the handler's result too large for the item.
	large bool
}

// refusalCases reproduce each refusal on moto: a TransactionConflict on a
// hot staged item after the completion's retries (injected: moto never
// conflicts), a staged table that does not exist (moto's own answer),
// access denied to a staged item's action (injected: moto does not
// enforce IAM), and a large result that S3 refuses to keep (injected into
// moto's S3: 503 SlowDown, then 403 AccessDenied).
func refusalCases() []refusalCase {
	injected := func(answer fakeaws.Response) func(t *testing.T) (*fixture, func() types.TransactWriteItem, func()) {
		return func(t *testing.T) (*fixture, func() types.TransactWriteItem, func()) {
			f := newFixture(t)
			on := true
			f.rec.inner = conflictTransport{inner: f.rec.inner, on: func() bool { return on }, answer: answer}
			return f, func() types.TransactWriteItem { return f.bizPut("order-1") }, func() { on = false }
		}
	}
	return []refusalCase{
		{name: "TransactionConflict after the completion's retries", setup: injected(fakeaws.Response{})},
		{name: "access denied to a staged item", setup: injected(fakeaws.DynamoDBError(400, "com.amazon.coral.service#AccessDeniedException",
			"User: arn:aws:sts::000000000000:assumed-role/orders/fn is not authorized to perform: dynamodb:PutItem on resource: ledger"))},
		{name: "a staged table that does not exist", setup: func(t *testing.T) (*fixture, func() types.TransactWriteItem, func()) {
			f := newFixture(t)
			ledger := tableName(t) + "-ledger"
			write := func() types.TransactWriteItem {
				return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(ledger), Item: map[string]types.AttributeValue{
					"pk": &types.AttributeValueMemberS{Value: "biz#order-1"}}}}
			}
			return f, write, func() { // the operator creates it
				if _, err := ddbstore.CreateTable(context.Background(), f.client, ledger); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "a large result S3 refuses to keep", large: true, setup: func(t *testing.T) (*fixture, func() types.TransactWriteItem, func()) {
			blobs, s3Faults := faultyMotoBucket(t)
			f := newFixture(t, ddbstore.WithLargeResults(blobs), ddbstore.WithMaxItemSize(smallItem))
			return f, func() types.TransactWriteItem { return f.bizPut("order-1") }, s3Faults.clear
		}},
	}
}

// TestCommitRefusedRecordsARetryableFailure: a staged success whose commit
// DynamoDB (or S3) refuses as a whole is commit_refused, never
// outcome_not_recorded: nothing of it was written, a retryable failure
// takes its place under the call's lease, and the next delivery runs the
// handler again and commits.
func TestCommitRefusedRecordsARetryableFailure(t *testing.T) {
	transactions(t)
	for _, tc := range refusalCases() {
		t.Run(tc.name, func(t *testing.T) {
			f, write, mend := tc.setup(t)
			clock := fakeclock.New(time.Now().Truncate(time.Second))
			runs := 0
			result := []byte(`{"charged":100}`)
			if tc.large {
				result = randomBytes(4 * large)
			}
			handler := func(ctx context.Context) ([]byte, error) {
				runs++
				return result, ddbstore.Stage(ctx, write())
			}
			key := "evt:tx-refused:1"
			out, err := newRunner(t, f.store, clock).Do(context.Background(), key, []byte(`{}`), handler)
			if out.Verdict != idem.CommitRefused || !errors.Is(err, idem.ErrCommitRefused) || errors.Is(err, idem.ErrOutcomeNotRecorded) {
				t.Fatalf("Do = %s, %v; want commit_refused", out.Verdict, err)
			}
			rec, gerr := f.store.Get(context.Background(), key, clock.Now())
			if gerr != nil || rec.Status != core.StatusFailed || !rec.Retryable || rec.Attempts != 1 {
				t.Fatalf("record = %v, %v; want a retryable failure of attempt 1", rec, gerr)
			}
			mend()
			clock.Advance(time.Second) // well within the first lease
			out, err = newRunner(t, f.store, clock).Do(context.Background(), key, []byte(`{}`), handler)
			if err != nil || out.Verdict != idem.Executed || out.Attempts != 2 || runs != 2 {
				t.Fatalf("next delivery = %+v, %v, %d runs; want executed at attempt 2", out, err, runs)
			}
		})
	}
}

// s3Faults refuses every PutObject while on, as S3 does: 503 SlowDown,
// then 403 AccessDenied, in turn. Other requests go to the server. Safe for
// concurrent use (mu guards on and puts).
type s3Faults struct {
	inner http.RoundTripper

	mu   sync.Mutex
	on   bool
	puts int
}

func (f *s3Faults) clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on = false
}

func (f *s3Faults) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	refuse := f.on && req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/idem/")
	if refuse {
		f.puts++
	}
	n := f.puts
	f.mu.Unlock()
	if !refuse {
		return f.inner.RoundTrip(req)
	}
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	answer := fakeaws.S3Error(http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
	if n%2 == 0 {
		answer = fakeaws.S3Error(http.StatusForbidden, "AccessDenied", "Access Denied")
	}
	return response(req, answer), nil
}

// faultyMotoBucket is motoBucket's blob store, whose client (without the
// SDK's retries) goes through s3Faults, on.
func faultyMotoBucket(t *testing.T) (*s3blob.Store, *s3Faults) {
	t.Helper()
	faults := &s3Faults{inner: http.DefaultTransport, on: true}
	return motoBucketWith(t, func(o *s3.Options) {
		o.HTTPClient = &http.Client{Transport: faults}
		o.RetryMaxAttempts = 1
	}), faults
}
