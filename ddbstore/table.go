package ddbstore

import (
	"context"
	"errors"
	"sync"
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
	if m := o.mismatch(table, desc.Table); !created && m != nil {
		return false, core.MarkPermanent(&Error{Op: op, Table: table, Err: m})
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

// CheckTable checks the store's table, with one DescribeTable call through
// the store's client, as the package's CheckTable does for the store's
// options (its key schema; on a global table, its consistency mode and
// the options that fit it), and keeps what it found for the store's life:
// a store call DynamoDB later refuses as invalid is then explained without
// another DescribeTable (see SchemaError); on a global table in
// multi-Region strong consistency (MRSC), which has no transactions, each
// idem.Stage then fails with a *GlobalTableError (ErrNoTransactions,
// idem.ErrMisconfigured), and the check itself passes. Call it once where
// a misconfigured table should stop the program before any work: a Lambda
// function's initialisation, whose failure Lambda reports
// (Runtime.InitError) before any event is taken. It needs the caller's
// credentials the dynamodb:DescribeTable permission. The store never calls
// it itself: a store whose table is never checked makes no call for it,
// and stages on any table (docs/multi-region.md says what that risks on a
// global table).
func (s *Store) CheckTable(ctx context.Context) error {
	desc, strong, err := checkTable(ctx, s.client, s.table, &s.options, s.calls.fns...)
	if desc != nil {
		s.schema.keep(s.mismatch(s.table, desc))
	}
	if strong {
		g := describeGlobal(s.table, desc)
		g.Err = ErrNoTransactions
		s.noStaging.Store(g)
	} else if desc != nil {
		s.noStaging.Store(nil)
	}
	return err
}

// schemaCheck is what a store knows of its table's key schema: nothing
// until one DescribeTable (Store.CheckTable, or translate after a
// ValidationException) answered, then whether it is the store's. Its zero
// value knows nothing; safe for concurrent use (mu guards the rest, and is
// held during the DescribeTable, so that one call is made).
type schemaCheck struct {
	mu       sync.Mutex
	done     bool
	mismatch *SchemaError // the table's mismatch, or nil: it matches or could not be read
	why      string       // why the table could not be read, or ""
}

// known returns the table's mismatch (a copy, nil if none) or why the key
// schema could not be read, describing the table first if no answer is
// kept. An answer is kept unless the DescribeTable failed transiently.
func (c *schemaCheck) known(ctx context.Context, s *Store) (*SchemaError, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done {
		c.describe(ctx, s)
	}
	if c.mismatch == nil {
		return nil, c.why
	}
	m := *c.mismatch
	return &m, c.why
}

// describe makes the DescribeTable, with mu held.
func (c *schemaCheck) describe(ctx context.Context, s *Store) {
	out, err := s.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.table)}, s.calls.fns...)
	if err == nil && out.Table == nil {
		err = errors.New("DescribeTable returned no table")
	}
	if err != nil {
		t := translateErr("check table", s.table, err)
		c.done, c.why = core.Classify(t.err) != core.Transient, t.err.Error()
		return
	}
	c.done, c.mismatch, c.why = true, s.mismatch(s.table, out.Table), ""
}

// keep records the answer of a DescribeTable made by Store.CheckTable: the
// table's mismatch, or nil.
func (c *schemaCheck) keep(m *SchemaError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done, c.mismatch, c.why = true, m, ""
}
