// Command bare is the benchmark's baseline for cold starts: an SQS consumer
// built directly on aws-lambda-go and the AWS SDK, without idem, doing the
// same work per message as the example's orders-consumer
// (examples/orders/cmd/orders-consumer): decode the OrderPlaced body and
// write one ledger entry with one conditional PutItem. It keeps no
// idempotency records, so a redelivered message writes a second entry.
//
// Build it as a Lambda bootstrap:
//
//	CGO_ENABLED=0 go build -tags lambda.norpc -o bootstrap ./examples/bare
//
// It reads LEDGER_TABLE (the ledger table, partition key entry_id) and the
// SDK's default configuration (region, credentials, AWS_ENDPOINT_URL_DYNAMODB).
// It imports nothing from idem, so that its binary and its start-up are
// what a function without idem would have.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// orderPlaced is the part of the example's OrderPlaced message it reads.
type orderPlaced struct {
	EventID     string `json:"event_id"`
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
}

type consumer struct {
	db    *dynamodb.Client
	table string
}

func main() {
	table := os.Getenv("LEDGER_TABLE")
	if table == "" {
		fmt.Fprintln(os.Stderr, "bare: environment variable LEDGER_TABLE is required")
		os.Exit(1)
	}
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "bare: AWS configuration:", err)
		os.Exit(1)
	}
	c := &consumer{db: dynamodb.NewFromConfig(cfg), table: table}
	lambda.Start(c.handle)
}

// handle writes one ledger entry per message and reports the messages that
// failed, for SQS to redeliver.
func (c *consumer) handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	for _, msg := range ev.Records {
		if err := c.appendLedger(ctx, msg); err != nil {
			fmt.Fprintf(os.Stderr, "bare: message %s: %v\n", msg.MessageId, err)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
		}
	}
	return resp, nil
}

func (c *consumer) appendLedger(ctx context.Context, msg events.SQSMessage) error {
	var ev orderPlaced
	if err := json.Unmarshal([]byte(msg.Body), &ev); err != nil {
		return fmt.Errorf("body is not an OrderPlaced event: %w", err)
	}
	if ev.OrderID == "" {
		return errors.New("OrderPlaced without order_id")
	}
	var id [8]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails on supported platforms
	_, err := c.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(c.table),
		Item: map[string]types.AttributeValue{
			"entry_id":     &types.AttributeValueMemberS{Value: "ent_" + hex.EncodeToString(id[:])},
			"event_id":     &types.AttributeValueMemberS{Value: ev.EventID},
			"order_id":     &types.AttributeValueMemberS{Value: ev.OrderID},
			"amount_cents": &types.AttributeValueMemberN{Value: strconv.FormatInt(ev.AmountCents, 10)},
			"recorded_at":  &types.AttributeValueMemberS{Value: time.Now().UTC().Format(time.RFC3339Nano)},
		},
		ConditionExpression:      aws.String("attribute_not_exists(#k)"),
		ExpressionAttributeNames: map[string]string{"#k": "entry_id"},
	})
	return err
}
