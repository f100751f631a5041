package orders_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/examples/orders"
)

// idem-sweep deletes every function's records past retention, and no other,
// and logs what it did.
func TestSweeperDeletesEveryFunctionsExpiredRecords(t *testing.T) {
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1: DynamoDB integration test skipped")
	}
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" {
		t.Fatal("no DynamoDB endpoint: run under internal/cmd/testenv, or set IDEM_SKIP_INTEGRATION=1")
	}
	c := ctx(t)
	cfg, err := config.LoadDefaultConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	db := dynamodb.NewFromConfig(cfg)
	var b [4]byte
	_, _ = rand.Read(b[:])
	table := "idem-sweep-" + hex.EncodeToString(b[:])
	if _, err := ddbstore.CreateTable(c, db, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})

	now := time.Now().Truncate(time.Second)
	write := func(function, key string, at time.Time) {
		store, err := ddbstore.New(db, table, ddbstore.WithKeyPrefix(orders.KeyPrefix(function)))
		if err != nil {
			t.Fatal(err)
		}
		rec := core.Reserve(key, strings.Repeat("a", 64), "tok", nil, at, at.Add(time.Minute), time.Hour)
		if err := store.Reserve(c, rec, nil, at); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Complete(c, core.Succeed(rec, []byte(`{}`), at, time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	write("orders-api", "evt:old", now.Add(-3*time.Hour))
	write("orders-consumer", "evt:old", now.Add(-3*time.Hour))
	write("orders-consumer", "evt:new", now.Add(-time.Minute))

	store, err := ddbstore.New(db, table)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s := orders.Sweeper{Store: store, Now: func() time.Time { return now }, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	r, err := s.Run(c, events.EventBridgeEvent{})
	if err != nil || r.Found != 2 || r.Deleted != 2 || r.Left != 0 || r.Next != "" {
		t.Fatalf("Run = %+v, %v; want the two expired records deleted", r, err)
	}
	out, err := db.Scan(c, &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil || out.Count != 1 {
		t.Fatalf("the table holds %d items (%v), want the live record", out.Count, err)
	}
	if !strings.Contains(logs.String(), `"msg":"idem sweep"`) || !strings.Contains(logs.String(), `"deleted":2`) {
		t.Errorf("log: %s", logs.String())
	}
}
