package httpidem_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/memstore"
)

// stores are the stores the middleware's behaviour tests run against: the
// in-memory store, and the DynamoDB store on the DynamoDB API the AWS SDK's
// configuration names (AWS_ENDPOINT_URL_DYNAMODB; dynalite under
// internal/cmd/testenv), a table of its own per test.
var stores = []struct {
	name string
	new  func(t testing.TB) idem.Store
}{
	{"memstore", func(testing.TB) idem.Store { return memstore.New() }},
	{"ddbstore", dynamoStore},
}

// dynamoStore skips t when IDEM_SKIP_INTEGRATION=1 and fails it when no
// DynamoDB endpoint is configured: never a silent skip.
func dynamoStore(t testing.TB) idem.Store {
	t.Helper()
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1: DynamoDB integration test skipped")
	}
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Fatal("no DynamoDB endpoint: run `go run ./internal/cmd/testenv -server dynalite -- go test ./httpidem/...` " +
			"(or set AWS_ENDPOINT_URL_DYNAMODB to a DynamoDB API), or set IDEM_SKIP_INTEGRATION=1 to skip the integration tests")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatalf("load AWS config: %v", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	db := dynamodb.NewFromConfig(cfg)
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := regexp.MustCompile(`[^a-zA-Z0-9_.-]+`).ReplaceAllString(t.Name(), "-")
	if len(name) > 80 {
		name = name[:80]
	}
	table := "httpidem-" + name + "-" + hex.EncodeToString(b[:])
	if _, err := ddbstore.CreateTable(ctx, db, table); err != nil {
		t.Fatalf("CreateTable(%s): %v", table, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	s, err := ddbstore.New(db, table)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
