package ddbstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeaws"
)

// A handler that returns an AWS error as it is, as the example's consumer
// does: over ddbstore, what the SDK says is retryable must be recorded as a
// retryable failure, never as a permanent one (which a queue would then
// acknowledge, losing the event).
func TestRunnerOverDDBStoreRetriesAWSErrors(t *testing.T) {
	integration(t)
	for _, tc := range []struct {
		name      string
		answer    fakeaws.Response
		transient bool
	}{
		{"throughput exceeded (HTTP 400)", fakeaws.DynamoDBError(400, "ProvisionedThroughputExceededException", "rate exceeded"), true},
		{"throttling (HTTP 400)", fakeaws.DynamoDBError(400, "ThrottlingException", "slow down"), true},
		{"request limit (HTTP 400)", fakeaws.DynamoDBError(400, "RequestLimitExceeded", "limit"), true},
		{"internal error (HTTP 500)", fakeaws.DynamoDBError(500, "InternalServerError", "oops"), true},
		{"validation (HTTP 400)", fakeaws.DynamoDBError(400, "ValidationException", "bad"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			r, err := idem.New(f.store, idem.WithRetry(1, time.Millisecond, time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			downstream := fakeaws.New(t, nil)
			downstream.Queue(tc.answer)
			client := dynamodb.NewFromConfig(aws.Config{
				Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
				BaseEndpoint: aws.String(downstream.URL), RetryMaxAttempts: 1,
			})
			key := "evt:aws-1:ledger"
			_, err = r.Do(context.Background(), key, []byte(`{}`), func(ctx context.Context) ([]byte, error) {
				_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("ledger"),
					Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "e1"}}})
				return nil, err // returned as it is, unmarked
			})
			rec, gerr := f.store.Get(context.Background(), key, time.Now())
			if gerr != nil {
				t.Fatal(gerr)
			}
			if tc.transient && (!errors.Is(err, idem.ErrTransientFailure) || !rec.Retryable) {
				t.Fatalf("Do = %v, stored %v; want a retryable failure", err, rec)
			}
			if !tc.transient && (!errors.Is(err, core.ErrPermanentFailure) || rec.Retryable || rec.Status != core.StatusFailed) {
				t.Fatalf("Do = %v, stored %v; want a permanent failure", err, rec)
			}
		})
	}
}
