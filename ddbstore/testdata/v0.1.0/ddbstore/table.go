package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemgo/idem/core"
)

// TableAPI is the part of the DynamoDB client that CreateTable calls. A
// *dynamodb.Client satisfies it.
type TableAPI interface {
	// CreateTable creates the table.
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	// DescribeTable reads the table's status and key schema (also used to
	// wait for it to become ACTIVE).
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	// DescribeTimeToLive reads the table's TTL setting.
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	// UpdateTimeToLive enables TTL on the TTL attribute.
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// DefaultTableWait bounds how long CreateTable waits for the table to become
// ACTIVE when ctx has no earlier deadline.
const DefaultTableWait = 5 * time.Minute

// TableInfo reports what CreateTable did.
type TableInfo struct {
	// Created reports that this call created the table; false means it
	// already existed with a matching key schema.
	Created bool
	// TTLEnabled reports that DynamoDB's Time to Live is enabled (or being
	// enabled) on the TTL attribute. It is false on servers without the TTL
	// API (dynalite) and when TTL is enabled on another attribute; the store
	// works the same without it, but expired records are then never deleted.
	TTLEnabled bool
}

// CreateTable makes table ready for a Store configured with the same opts:
// it creates it on-demand (PAY_PER_REQUEST) with a string partition key
// named as configured and, with WithSortKey or WithSortKeyFunc, a string
// sort key named as configured (else none), unless it already exists with
// that key schema; waits until it is ACTIVE; and enables Time to Live on
// the TTL attribute, tolerating servers that do not implement the TTL API
// (UnknownOperationException). A table that exists with another key schema
// is an error wrapping ErrSchemaMismatch (an existing table with TTL on
// another attribute is reported by TableInfo.TTLEnabled). Calling it again
// is harmless.
//
// Production tables are better made by infrastructure code (the SAM
// template, the LocalStack init script); CreateTable is for tests, demos and
// tools.
func CreateTable(ctx context.Context, client TableAPI, table string, opts ...Option) (TableInfo, error) {
	const op = "create table"
	if client == nil {
		return TableInfo{}, errors.New("ddbstore: nil client")
	}
	o, err := buildOptions(opts)
	if err != nil {
		return TableInfo{}, err
	}
	created, err := createAndWait(ctx, client, table, o)
	if err != nil {
		return TableInfo{}, err
	}
	enabled, err := enableTTL(ctx, client, table, o.ttlAttr)
	if err != nil {
		return TableInfo{}, translateErr(op, table, err).err
	}
	return TableInfo{Created: created, TTLEnabled: enabled}, nil
}

// createAndWait creates the table, or finds it, waits until it is active
// and checks that an existing table has the expected key schema.
func createAndWait(ctx context.Context, client TableAPI, table string, o options) (created bool, err error) {
	const op = "create table"
	defs, schema := o.keySchema()
	_, err = client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: defs,
		KeySchema:            schema,
	})
	var inUse *types.ResourceInUseException
	switch {
	case err == nil:
		created = true
	case errors.As(err, &inUse):
		// It exists (or is being created): check it below.
	default:
		return false, translateErr(op, table, err).err
	}
	wait := DefaultTableWait
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	w := dynamodb.NewTableExistsWaiter(client, func(wo *dynamodb.TableExistsWaiterOptions) {
		wo.MinDelay = 50 * time.Millisecond
		wo.MaxDelay = 2 * time.Second
	})
	desc, err := w.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, wait)
	if err != nil {
		return false, translateErr(op, table, err).err
	}
	if !created && !o.schemaMatches(desc.Table) {
		return false, core.MarkPermanent(&Error{Op: op, Table: table, Err: fmt.Errorf("%w: want %s, table has %s",
			ErrSchemaMismatch, o.describeLayoutSchema(), describeSchema(desc.Table))})
	}
	return created, nil
}

// enableTTL turns on TTL on ttlAttr unless it is on already, and reports
// whether it is on; a server without the TTL API (dynalite) answers false.
func enableTTL(ctx context.Context, client TableAPI, table, ttlAttr string) (bool, error) {
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	switch {
	case unknownOperation(err):
		return false, nil
	case err != nil:
		return false, err
	}
	if d := ttl.TimeToLiveDescription; d != nil && (d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return aws.ToString(d.AttributeName) == ttlAttr, nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(ttlAttr), Enabled: aws.Bool(true)},
	})
	switch {
	case unknownOperation(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// unknownOperation reports a server that does not implement the operation.
func unknownOperation(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "UnknownOperationException"
}
