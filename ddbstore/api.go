package ddbstore

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// API is the part of the DynamoDB client that the store's data path calls:
// every call an idem.Runner's work makes through the store (its
// reservations, completions, reads, steps, renewals, staged commits and
// releases), and DescribeTable, which explains a request refused as invalid
// (see SchemaError). A *dynamodb.Client satisfies it; a test's fake or
// another client implements these methods and no others. Each operation has
// one path, the same whatever the client: docs/dynamodb.md has the requests
// of each, in order, and the IAM actions they need. A request refused for
// a permission fails with an error that names the missing action (see
// ErrAccessDenied); the store never tries another request instead.
//
// Endpoints, credentials and retries come from the client's configuration;
// the store passes per call only options that make a call cheaper in CPU
// without changing what is sent or how answers are classified (see
// FastClientOptions).
type API interface {
	// GetItem reads an item (always with ConsistentRead).
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	// PutItem writes an item (conditionally, for every write the store makes).
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	// UpdateItem updates some attributes of an item, conditionally.
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	// DeleteItem deletes an item, conditionally (Release).
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	// BatchGetItem reads up to 100 step items (always with ConsistentRead).
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	// TransactWriteItems writes a record and its staged items atomically
	// (CompleteStaged).
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	// DescribeTable reads the table's key schema (Store.CheckTable, and the
	// explanation of a request refused as invalid).
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// AdminAPI is the part of the DynamoDB client that the operator's List
// calls beyond API: Scan. A *dynamodb.Client satisfies it. The store asks
// its client for it when List runs, so a client with API's methods alone
// serves everything else; List then fails with an error wrapping
// errors.ErrUnsupported.
type AdminAPI interface {
	API
	// Scan reads the table page by page (List).
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var (
	_ API      = (*dynamodb.Client)(nil)
	_ AdminAPI = (*dynamodb.Client)(nil)
	_ TableAPI = (*dynamodb.Client)(nil)
)
