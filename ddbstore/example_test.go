package ddbstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
)

// A runner over a DynamoDB table. The endpoint, region, credentials and
// retries come from the SDK's configuration (AWS_ENDPOINT_URL_DYNAMODB points
// it at dynalite, moto or LocalStack).
func ExampleNew() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRetryMaxAttempts(5))
	if err != nil {
		log.Fatal(err)
	}
	store, err := ddbstore.New(dynamodb.NewFromConfig(cfg), "idem")
	if err != nil {
		log.Fatal(err)
	}
	runner, err := idem.New(store)
	if err != nil {
		log.Fatal(err)
	}
	out, err := runner.Do(ctx, "evt:0f8e2d:charge", []byte(`{"amount":1200}`), func(ctx context.Context) ([]byte, error) {
		return []byte(`{"charge":"ch_1"}`), nil
	})
	fmt.Println(string(out.Result), out.Replayed, err)
}

// CreateTable makes a table for tests and tools (production tables come from
// the SAM template): on-demand, string key "pk", TTL on "expires_at".
func ExampleCreateTable() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	info, err := ddbstore.CreateTable(ctx, dynamodb.NewFromConfig(cfg), "idem")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("created %v, TTL enabled %v\n", info.Created, info.TTLEnabled)
}

// Store errors are typed: a missing table is permanent, throttling is
// transient. Here a fake client answers every call as DynamoDB does for a
// table that does not exist.
func ExampleError() {
	client := &fakeAPI{
		put: func(int, *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
			return nil, apiErr(400, &types.ResourceNotFoundException{})
		},
	}
	store, _ := ddbstore.New(client, "orders-idem")
	rec := core.Reserve("evt:0f8e2d:charge", "fp", "token-1", nil, t0, t0.Add(30*time.Second), time.Hour)
	err := store.Reserve(context.Background(), rec, nil, t0)

	var se *ddbstore.Error
	if errors.As(err, &se) {
		fmt.Println("op:", se.Op, "table:", se.Table)
	}
	fmt.Println("table not found:", errors.Is(err, ddbstore.ErrTableNotFound))
	fmt.Println("class:", core.Classify(err, core.DefaultClassifiers...))
	// Output:
	// op: reserve table: orders-idem
	// table not found: true
	// class: permanent
}

// ItemSize counts an item as DynamoDB does against its 400 KB limit:
// attribute names plus values.
func ExampleItemSize() {
	item := map[string]types.AttributeValue{
		"pk":     &types.AttributeValueMemberS{Value: "evt:0f8e2d:charge"},
		"result": &types.AttributeValueMemberB{Value: make([]byte, 1000)},
	}
	fmt.Println(ddbstore.ItemSize(item))
	// Output: 1025
}

// A store on a single-table layout: the table's own key and TTL names, a
// sort key, a prefix per service, and renamed attributes. Here a fake
// client shows the item a reservation writes.
func ExampleWithSortKey() {
	client := &fakeAPI{}
	store, err := ddbstore.New(client, "app",
		ddbstore.WithKeyAttribute("PK"),
		ddbstore.WithSortKey("SK", "idempotency#"),
		ddbstore.WithKeyPrefix("orders#"),
		ddbstore.WithTTLAttribute("ttl"),
		ddbstore.WithAttributeNames(ddbstore.AttributeNames{Status: "idem_status", Result: "data"}),
	)
	if err != nil {
		log.Fatal(err)
	}
	rec := core.Reserve("evt:0f8e2d:charge", "fp", "token-1", nil, t0, t0.Add(30*time.Second), time.Hour)
	if err := store.Reserve(context.Background(), rec, nil, t0); err != nil {
		log.Fatal(err)
	}
	item := client.puts[0].Item
	for _, name := range []string{"PK", "SK", "idem_status"} {
		fmt.Printf("%s = %s\n", name, item[name].(*types.AttributeValueMemberS).Value)
	}
	fmt.Println("attributes:", slices.Sorted(maps.Keys(item)))
	// Output:
	// PK = orders#evt:0f8e2d:charge
	// SK = idempotency#
	// idem_status = in_progress
	// attributes: [PK SK attempts attempts_carried fingerprint idem_status lease_token lease_until_ms ttl updated_at_ms]
}
