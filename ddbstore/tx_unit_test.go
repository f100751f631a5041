package ddbstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/fakeaws"
)

// fakeStore is a store whose real SDK client talks to a fakeaws server that
// fails the test on any request not queued.
func fakeStore(t *testing.T) (*ddbstore.Store, *fakeaws.Server) {
	t.Helper()
	srv := fakeaws.New(t, nil)
	return fakeStoreAt(t, srv), srv
}

// fakeStoreAt is a store on table "idem" whose real SDK client, without
// retries, talks to srv.
func fakeStoreAt(t *testing.T, srv *fakeaws.Server, opts ...ddbstore.Option) *ddbstore.Store {
	t.Helper()
	client := dynamodb.NewFromConfig(aws.Config{
		Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
		BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1,
	})
	s, err := ddbstore.New(client, "idem", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func put(table string, size int) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "k"}, "v": &types.AttributeValueMemberS{Value: strings.Repeat("x", size-len("pk")-len("k")-len("v"))}}}}
}

func many(n int, size int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = put("ledger", size)
	}
	return out
}

func TestCheckStaged(t *testing.T) {
	t.Parallel()
	s, _ := fakeStore(t)
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}}
	tests := []struct {
		name      string
		staged    []any
		wantIndex int  // -2: no error
		wantLimit bool // the error wraps idem.ErrStagedLimit
	}{
		{"one put", many(1, 100), -2, false},
		{"99 items with the record make 100", many(ddbstore.MaxTransactItems-1, 100), -2, false},
		{"100 items with the record make 101", many(ddbstore.MaxTransactItems, 100), -1, true},
		{"an item of 400 KB", many(1, ddbstore.MaxItemSize), -2, false},
		{"an item of 400 KB and a byte", append(many(1, 10), many(1, ddbstore.MaxItemSize+1)...), 1, true},
		{"items over 4 MB in all", many(11, 400_000), 10, true},
		{"no operation", []any{types.TransactWriteItem{}}, 0, false},
		{"two operations", []any{types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String("t"), Key: key},
			ConditionCheck: &types.ConditionCheck{TableName: aws.String("t"), Key: key, ConditionExpression: aws.String("attribute_exists(pk)")}}}, 0, false},
		{"no table name", []any{types.TransactWriteItem{Delete: &types.Delete{Key: key}}}, 0, false},
		{"not a TransactWriteItem", []any{"SET x = 1"}, 0, false},
		{"one item deleted twice", []any{types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String("t"), Key: key}},
			types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String("t"), Key: key}}}, 1, false},
		{"an item of the store's table put and updated", []any{put("idem", 100),
			types.TransactWriteItem{Update: &types.Update{TableName: aws.String("idem"), Key: key, UpdateExpression: aws.String("SET v = :v")}}}, 1, false},
		{"the same key in two tables", []any{types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String("t1"), Key: key}},
			types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String("t2"), Key: key}}}, -2, false},
	}
	for _, tt := range tests {
		err := s.CheckStaged(tt.staged)
		if tt.wantIndex == -2 {
			if err != nil {
				t.Errorf("%s: CheckStaged = %v, want nil", tt.name, err)
			}
			continue
		}
		var sw *idem.StagedWriteError
		if !errors.As(err, &sw) || sw.Index != tt.wantIndex || errors.Is(err, idem.ErrStagedLimit) != tt.wantLimit {
			t.Errorf("%s: CheckStaged = %v, want a *StagedWriteError at %d (limit %v)", tt.name, err, tt.wantIndex, tt.wantLimit)
		}
	}
}

func reserved(t *testing.T, key string) core.Record {
	now := time.Now().Truncate(time.Second)
	rec := core.Reserve(key, "fp", "tok-a", nil, now, now.Add(time.Minute), time.Hour)
	return core.Succeed(rec, []byte(`{"ok":true}`), now.Add(time.Second), time.Hour)
}

func TestCompleteStagedOverLimitWithTheRecordMakesNoCall(t *testing.T) {
	t.Parallel()
	s, srv := fakeStore(t)
	rec := reserved(t, "evt:tx-big:1")
	rec.Result = make([]byte, 150_000)
	_, _ = rand.Read(rec.Result)                                    // incompressible: kept in a result item, the record within 1 KB
	staged := append(many(10, 409_000), put("ledger", 104_304-200)) // within the limit alone by 200 bytes
	if err := s.CheckStaged(staged); err != nil {
		t.Fatalf("CheckStaged = %v, want nil", err)
	}
	_, err := s.CompleteStaged(context.Background(), rec, staged)
	var sw *idem.StagedWriteError
	if !errors.As(err, &sw) || sw.Index != -1 || !errors.Is(err, idem.ErrStagedLimit) {
		t.Fatalf("CompleteStaged over 4 MB with the record = %v, want a *StagedWriteError wrapping ErrStagedLimit", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("requests = %d, want none", n)
	}
}

func TestCompleteStagedRefusesAWriteOfTheRecordsItem(t *testing.T) {
	t.Parallel()
	s, srv := fakeStore(t)
	rec := reserved(t, "evt:tx-self:1")
	self := types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String("idem"),
		Key: map[string]types.AttributeValue{ddbstore.DefaultKeyAttribute: &types.AttributeValueMemberS{Value: rec.Key}}}}
	_, err := s.CompleteStaged(context.Background(), rec, []any{put("ledger", 100), self})
	var sw *idem.StagedWriteError
	if !errors.As(err, &sw) || sw.Index != 1 {
		t.Fatalf("CompleteStaged with a staged delete of the record's item = %v, want a *StagedWriteError at 1", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("requests = %d, want none", n)
	}
}

// The TransactionCanceledException of DynamoDB's wire shape, read by the
// real SDK client: each cancellation is mapped once, at the store's edge.
func TestCompleteStagedCancellations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		answers []fakeaws.Response
		check   func(err error) bool
		want    string
	}{
		{"staged condition failed", []fakeaws.Response{fakeaws.DynamoDBTransactionCanceled("None", "None", "ConditionalCheckFailed")},
			func(err error) bool {
				var sw *idem.StagedWriteError
				return errors.As(err, &sw) && sw.Index == 1 && errors.Is(err, idem.ErrStagedConditionFailed) && core.Classify(err) != core.Transient
			}, "*StagedWriteError at 1, ErrStagedConditionFailed, not transient (the runner makes it the handler's permanent failure)"},
		{"staged item invalid", []fakeaws.Response{fakeaws.DynamoDBTransactionCanceled("None", "ValidationError", "None")},
			func(err error) bool {
				var sw *idem.StagedWriteError
				return errors.As(err, &sw) && sw.Index == 0 && errors.Is(err, ddbstore.ErrInvalidRequest)
			}, "*StagedWriteError at 0 wrapping ErrInvalidRequest"},
		{"record's condition failed, another record stored", []fakeaws.Response{
			fakeaws.DynamoDBTransactionCanceled("ConditionalCheckFailed", "None", "None"), fakeaws.JSONResponse(200, []byte(`{}`))},
			func(err error) bool { return errors.Is(err, idem.ErrLeaseLost) }, "ErrLeaseLost (after one GetItem)"},
		{"conflicting transaction", []fakeaws.Response{fakeaws.DynamoDBTransactionCanceled("None", "TransactionConflict", "None")},
			func(err error) bool {
				return errors.Is(err, ddbstore.ErrThrottled) && core.Classify(err) == core.Transient
			},
			"ErrThrottled, transient"},
		{"same commit in progress", []fakeaws.Response{fakeaws.DynamoDBError(400, "TransactionInProgressException", "in progress")},
			func(err error) bool { return core.Classify(err) == core.Transient }, "transient"},
		{"throttled", []fakeaws.Response{fakeaws.DynamoDBError(400, "ProvisionedThroughputExceededException", "slow down")},
			func(err error) bool {
				return errors.Is(err, ddbstore.ErrThrottled) && core.Classify(err) == core.Transient
			}, "ErrThrottled, transient"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, srv := fakeStore(t)
			for _, a := range tt.answers {
				srv.Queue(a)
			}
			_, err := s.CompleteStaged(context.Background(), reserved(t, "evt:tx-cancel:1"), many(2, 100))
			if !tt.check(err) {
				t.Fatalf("CompleteStaged = %v, want %s", err, tt.want)
			}
			reqs := srv.Requests()
			if len(reqs) != len(tt.answers) || !strings.HasSuffix(reqs[0].Target, ".TransactWriteItems") {
				t.Fatalf("requests = %+v, want TransactWriteItems and %d more", reqs, len(tt.answers)-1)
			}
		})
	}
}

// Through a Runner over the real SDK client: a staged condition's failure
// is the handler's permanent failure, recorded with a plain PutItem.
func TestRunnerRecordsAStagedConditionFailure(t *testing.T) {
	t.Parallel()
	s, srv := fakeStore(t)
	srv.Queue(fakeaws.JSONResponse(200, []byte(`{}`)), // reserve
		fakeaws.DynamoDBTransactionCanceled("None", "ConditionalCheckFailed"),
		fakeaws.JSONResponse(200, []byte(`{}`))) // the failure recorded
	r, err := idem.New(s)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Do(context.Background(), "evt:tx-runner:1", []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		return []byte(`{"ok":true}`), ddbstore.Stage(ctx, put("ledger", 100))
	})
	if out.Verdict != idem.FailedPermanently || !errors.Is(err, idem.ErrStagedConditionFailed) {
		t.Fatalf("Do = %+v, %v; want failed_permanently for the staged condition", out, err)
	}
	var targets []string
	for _, r := range srv.Requests() {
		targets = append(targets, r.Target[strings.IndexByte(r.Target, '.')+1:])
	}
	if got := strings.Join(targets, " "); got != "UpdateItem TransactWriteItems PutItem" {
		t.Fatalf("calls = %s, want UpdateItem TransactWriteItems PutItem", got)
	}
}
