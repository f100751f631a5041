package ddbstore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// ErrBadToken is the error, checked with errors.Is, of List given a
// continuation token that no List returned. Permanent.
var ErrBadToken = errors.New("ddbstore: invalid continuation token")

var _ idem.Releaser = (*Store)(nil)

// admin returns the store's client as an AdminAPI (the operator's Scan),
// or an error wrapping errors.ErrUnsupported.
func (s *Store) admin(op string) (AdminAPI, error) {
	a, ok := s.client.(AdminAPI)
	if !ok {
		return nil, &Error{Op: op, Table: s.table,
			Err: fmt.Errorf("client %T has no Scan (ddbstore.AdminAPI): %w", s.client, errors.ErrUnsupported)}
	}
	return a, nil
}

// releaseCondition is core.SameWrite: the stored item holds the record's
// lease token, status and attempt (the key is the item's).
const releaseCondition = "#tok = :tok AND #st = :st AND #att = :att"

// Release implements idem.Releaser with one DeleteItem conditioned on the
// record's lease token, status and attempt (releaseCondition), asking for
// the stored item on failure (ALL_OLD; where the server does not return it,
// one consistent GetItem reads it). The error wraps idem.ErrRecordChanged
// when another record is stored and idem.ErrNotFound when none is. Other
// failures are translated as the store's other calls' are; after one that
// may have been applied (a timeout, a 5xx), a second Release reports
// idem.ErrNotFound if the first deleted the record.
func (s *Store) Release(ctx context.Context, rec core.Record) error {
	const op = "release"
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.checkKey(op, rec.Key); err != nil {
		return err
	}
	if rec.LeaseToken == "" || !rec.Status.Valid() {
		return errors.New("ddbstore: release needs the record as read: its lease token, status and attempt")
	}
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                aws.String(s.table),
		Key:                      s.keyOf(rec.Key),
		ConditionExpression:      aws.String(releaseCondition),
		ExpressionAttributeNames: map[string]string{"#tok": s.names.LeaseToken, "#st": s.names.Status, "#att": s.names.Attempts},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":tok": &types.AttributeValueMemberS{Value: rec.LeaseToken},
			":st":  &types.AttributeValueMemberS{Value: string(rec.Status)},
			":att": num(int64(rec.Attempts)),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return s.translate(ctx, op, err).err
	}
	_, stored, found, err := s.blockingFor(ctx, op, ccf, rec.Key, nil)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("ddbstore: release on table %q, key hash %s: %w", s.table, idem.HashKey(rec.Key), idem.ErrNotFound)
	}
	return fmt.Errorf("ddbstore: release on table %q, key hash %s: %w: the table holds status %s, attempt %d",
		s.table, idem.HashKey(rec.Key), idem.ErrRecordChanged, stored.Status, stored.Attempts)
}

// ListInput says which part of the table List reads. The zero value reads
// the first page of every record.
type ListInput struct {
	// Limit is the most items DynamoDB evaluates in this call (Scan's
	// Limit), matching Status or not; 0 lets it read up to 1 MB of items.
	Limit int32
	// Next continues a scan where a page ended (ListPage.Next); empty
	// starts at the beginning of the table.
	Next string
	// Status, when set, keeps only records of that status. It is a
	// FilterExpression: DynamoDB reads, and charges for, every item it
	// evaluates, and only the matches cross the network. The store's key
	// prefix (WithKeyPrefix) and fixed sort key value (WithSortKey) filter
	// the same way, so that items of other stores or entities in a shared
	// table are left out.
	Status core.Status
}

// ListPage is one page of List.
type ListPage struct {
	// Records are the page's records in the table's order (not sorted),
	// results decoded. Records past retention that DynamoDB has not
	// deleted yet are included: core.Record.Expired tells them apart. A
	// record whose steps are kept in step items has Steps nil (Store.Get
	// reads them).
	Records []core.Record
	// Next continues the scan (ListInput.Next); empty once the table has
	// been read to its end. A page may be empty and still have a Next.
	Next string
	// Scanned is the number of items DynamoDB evaluated (ScannedCount).
	Scanned int
	// Corrupt is the number of the store's items that did not decode as
	// records (ErrCorruptRecord); they are left out of Records.
	Corrupt int
	// StepItems is the number of step items returned (the steps of records
	// kept in items of their own; see AttrSteps); they are left out of
	// Records and not counted as Corrupt.
	StepItems int
	// ResultItems is the number of result items returned (the results of
	// succeeded records kept in items of their own; see AttrResultItem);
	// they are left out of Records and not counted as Corrupt.
	ResultItems int
	// ResultsApart describes, by key, the records of Records whose result
	// is kept outside the record (in a result item, or in the blob store
	// with WithLargeResults), which List does not read: such a record has
	// Result nil and ResultOmitted false. Nil where there is none.
	ResultsApart map[string]ResultApart
	// Foreign is the number of items returned that are not the store's by
	// their key (another sort key value than WithSortKeyFunc gives the key:
	// another store or entity sharing the table); they are left out of
	// Records and not counted as Corrupt. Items the filter left out
	// (another prefix, another fixed sort key value) are counted only in
	// Scanned.
	Foreign int
	// ConsumedRCU is the read capacity the call consumed, as DynamoDB
	// reported it (ReturnConsumedCapacity TOTAL); 0 where the server
	// reports none.
	ConsumedRCU float64
}

// tokenPrefix versions the continuation token, which is the last evaluated
// key, base64url-encoded: opaque to callers, but not encrypted.
const tokenPrefix = "v1."

// List reads one page of the table with one Scan (eventually consistent:
// half the capacity of a consistent read; a record written a moment ago may
// be missing or old). It decodes every item and reports the capacity the
// Scan consumed. The client must implement AdminAPI; otherwise the error
// wraps errors.ErrUnsupported. A token that List did not return is an error
// wrapping ErrBadToken.
func (s *Store) List(ctx context.Context, in ListInput) (ListPage, error) {
	const op = "list"
	if err := ctx.Err(); err != nil {
		return ListPage{}, err
	}
	scan, err := s.scanInput(in)
	if err != nil {
		return ListPage{}, &Error{Op: op, Table: s.table, Err: err}
	}
	out, sp, err := s.scan(ctx, op, scan)
	if err != nil {
		return ListPage{}, err
	}
	page := ListPage{Scanned: sp.scanned, ConsumedRCU: sp.rcu, Next: sp.next, Records: make([]core.Record, 0, len(out.Items))}
	s.collect(&page, out.Items)
	return page, nil
}

// scanPage is what every page of a scan reports: its continuation token
// (empty at the table's end), the items evaluated and the read capacity
// consumed.
type scanPage struct {
	next    string
	scanned int
	rcu     float64
}

// scan makes one Scan through the store's AdminAPI.
func (s *Store) scan(ctx context.Context, op string, in *dynamodb.ScanInput) (*dynamodb.ScanOutput, scanPage, error) {
	client, err := s.admin(op)
	if err != nil {
		return nil, scanPage{}, err
	}
	out, err := client.Scan(ctx, in)
	if err != nil {
		return nil, scanPage{}, translateErr(op, s.table, err).err
	}
	sp := scanPage{scanned: int(out.ScannedCount)}
	if c := out.ConsumedCapacity; c != nil {
		sp.rcu = aws.ToFloat64(c.CapacityUnits)
	}
	if len(out.LastEvaluatedKey) > 0 {
		if sp.next, err = s.token(out.LastEvaluatedKey); err != nil {
			return nil, scanPage{}, core.MarkPermanent(&Error{Op: op, Table: s.table, Err: err})
		}
	}
	return out, sp, nil
}

// ResultApart describes a succeeded record's result kept outside the
// record (ListPage.ResultsApart).
type ResultApart struct {
	// Size is the result's size as stored, in bytes: gzip-compressed
	// where Encoding is "gzip".
	Size int64
	// Encoding is "gzip", or empty for a raw result.
	Encoding string
	// InBlobStore is true for a result kept in the blob store
	// (WithLargeResults), false for one kept in a result item.
	InBlobStore bool
}

// collect decodes the store's own items into page's records, counting the
// others, the step and result items and those that do not decode.
func (s *Store) collect(page *ListPage, items []map[string]types.AttributeValue) {
	for _, item := range items {
		if s.isStepItem(item) {
			page.StepItems++
			continue
		}
		if s.isResultItem(item) {
			page.ResultItems++
			continue
		}
		if !s.owns(item) {
			page.Foreign++
			continue
		}
		rec, err := s.decode(item)
		var ref largeRef
		var apart bool
		if err == nil {
			ref, apart, err = s.refOf(item, rec.Status)
		}
		if err != nil {
			page.Corrupt++
			continue
		}
		if apart {
			if page.ResultsApart == nil {
				page.ResultsApart = map[string]ResultApart{}
			}
			page.ResultsApart[rec.Key] = ResultApart{Size: ref.size, Encoding: ref.encoding, InBlobStore: !ref.inItem}
			rec.ResultOmitted = false // its flag is for releases that do not read result items
		}
		page.Records = append(page.Records, rec)
	}
}

// token returns the continuation token of a Scan's last evaluated key:
// tokenPrefix and its partition key value and, with a sort key, a dot and
// the sort key value, each base64url-encoded.
func (s *Store) token(last map[string]types.AttributeValue) (string, error) {
	var b strings.Builder
	b.WriteString(tokenPrefix)
	for i, name := range s.keyNames() {
		v, ok := last[name].(*types.AttributeValueMemberS)
		if !ok {
			return "", fmt.Errorf("%w: last evaluated key has no string %q", ErrCorruptRecord, name)
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(base64.RawURLEncoding.EncodeToString([]byte(v.Value)))
	}
	return b.String(), nil
}

// startKey returns the Scan's start key of a token (see token), or
// ErrBadToken.
func (s *Store) startKey(tok string) (map[string]types.AttributeValue, error) {
	rest, ok := strings.CutPrefix(tok, tokenPrefix)
	names := s.keyNames()
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != len(names) {
		return nil, ErrBadToken
	}
	limits := []int{maxKeyBytes, maxSortKeyBytes}
	key := make(map[string]types.AttributeValue, len(names))
	for i, p := range parts {
		raw, err := base64.RawURLEncoding.DecodeString(p)
		if err != nil || len(raw) == 0 || len(raw) > limits[i] {
			return nil, ErrBadToken
		}
		key[names[i]] = &types.AttributeValueMemberS{Value: string(raw)}
	}
	return key, nil
}

// keyNames returns the names of the table's key attributes: the partition
// key and, if there is one, the sort key.
func (l *layout) keyNames() []string {
	if l.sortAttr == "" {
		return []string{l.keyAttr}
	}
	return []string{l.keyAttr, l.sortAttr}
}

// scanInput builds the Scan of in.
func (s *Store) scanInput(in ListInput) (*dynamodb.ScanInput, error) {
	scan := &dynamodb.ScanInput{
		TableName:              aws.String(s.table),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}
	if in.Limit < 0 {
		return nil, fmt.Errorf("ddbstore: list limit %d must be at least 0", in.Limit)
	}
	if in.Limit > 0 {
		scan.Limit = aws.Int32(in.Limit)
	}
	if in.Next != "" {
		key, err := s.startKey(in.Next)
		if err != nil {
			return nil, err
		}
		scan.ExclusiveStartKey = key
	}
	if in.Status != "" && !in.Status.Valid() {
		return nil, fmt.Errorf("ddbstore: list status %q is not a record status", in.Status)
	}
	if expr, names, values := s.scanFilter(in.Status); expr != "" {
		scan.FilterExpression = aws.String(expr)
		scan.ExpressionAttributeNames = names
		scan.ExpressionAttributeValues = values
	}
	return scan, nil
}

// CheckTable checks, with one DescribeTable call, that table exists, is
// usable (not being created or deleted) and has the key schema a Store
// configured with opts expects: a string partition key named as configured
// and, with WithSortKey or WithSortKeyFunc, a string sort key named as
// configured, else no sort key. It also reads the table's replicas and
// consistency mode: a global table in multi-Region eventual consistency
// (MREC) is refused (ErrEventualGlobalTable) unless opts has
// WithHomeRegion or WithReplicationWindowAccepted, and with WithHomeRegion
// the replica the client reaches must be the home Region's
// (ErrNotHomeRegion); docs/multi-region.md explains both. It returns nil,
// or an *Error wrapping a *SchemaError (ErrSchemaMismatch, with the
// options that fix it), a *GlobalTableError, ErrTableNotFound or, for the
// call's own failures, the sentinel it translates to (ErrAccessDenied,
// ErrThrottled, ...). Tools call it before they use a table they did not
// create; a store checks its own with Store.CheckTable. The TTL attribute
// cannot be checked this way (DescribeTable does not report it).
func CheckTable(ctx context.Context, client dynamodb.DescribeTableAPIClient, table string, opts ...Option) error {
	if client == nil {
		return errors.New("ddbstore: nil client")
	}
	o, err := buildOptions(opts)
	if err != nil {
		return err
	}
	_, _, err = checkTable(ctx, client, table, &o)
	return err
}

// checkTable describes table and checks it for o: it returns the table's
// description, whether it is a global table in strong consistency
// (MRSC), and the error CheckTable describes.
func checkTable(ctx context.Context, client dynamodb.DescribeTableAPIClient, table string, o *options, optFns ...func(*dynamodb.Options)) (*types.TableDescription, bool, error) {
	const op = "check table"
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, optFns...)
	if err != nil {
		return nil, false, translateErr(op, table, err).err
	}
	if out.Table == nil {
		return nil, false, core.MarkPermanent(&Error{Op: op, Table: table, Err: fmt.Errorf("%w: DescribeTable returned no table", ErrTableNotFound)})
	}
	switch st := out.Table.TableStatus; st {
	case types.TableStatusCreating, types.TableStatusDeleting, types.TableStatusArchiving, types.TableStatusArchived:
		return out.Table, false, core.MarkPermanent(&Error{Op: op, Table: table, Err: fmt.Errorf("%w: table is %s", ErrTableNotFound, st)})
	}
	if m := o.mismatch(table, out.Table); m != nil {
		return out.Table, false, core.MarkPermanent(&Error{Op: op, Table: table, Err: m})
	}
	strong, g := o.repl.check(table, out.Table)
	if g != nil {
		return out.Table, false, core.MarkPermanent(&Error{Op: op, Table: table, Err: g})
	}
	return out.Table, strong, nil
}

// describeSchema names a table's key attributes, roles and types, as in
// "id (HASH, S), sk (RANGE, N)".
func describeSchema(t *types.TableDescription) string {
	attrTypes := map[string]string{}
	for _, a := range t.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = string(a.AttributeType)
	}
	parts := make([]string, 0, len(t.KeySchema))
	for _, k := range t.KeySchema {
		name := aws.ToString(k.AttributeName)
		parts = append(parts, fmt.Sprintf("%s (%s, %s)", name, k.KeyType, attrTypes[name]))
	}
	if len(parts) == 0 {
		return "no key schema"
	}
	return strings.Join(parts, ", ")
}
