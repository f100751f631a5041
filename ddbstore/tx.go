package ddbstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// DynamoDB's limits on one TransactWriteItems, which CheckStaged and
// CompleteStaged check.
const (
	// MaxTransactItems is the number of items one transaction may write;
	// the record is one of them, so a handler stages at most
	// MaxTransactItems-1.
	MaxTransactItems = 100
	// MaxTransactSize is the aggregate size of a transaction's items: 4 MB.
	MaxTransactSize = 4 << 20
)

var _ idem.StagedCompleter = (*Store)(nil)

// Stage stages items in the handler's execution ctx, to be written by
// CompleteStaged in one TransactWriteItems with the handler's success:
// idem.Stage with DynamoDB's type. Each item sets exactly one of Put,
// Update, Delete and ConditionCheck, with its table name, on any table of
// the store's account and region. The checks that can be made before the
// commit are made here (see CheckStaged): on an error, a
// *idem.StagedWriteError, none of items is staged. Safe for concurrent use
// by the handler's goroutines.
func Stage(ctx context.Context, items ...types.TransactWriteItem) error {
	all := make([]any, len(items))
	for i, it := range items {
		all[i] = it
	}
	return idem.Stage(ctx, all...)
}

// CheckStaged implements idem.StagedCompleter. Each staged write must be a
// types.TransactWriteItem with exactly one of Put, Update, Delete and
// ConditionCheck and a table name; at most MaxTransactItems-1 are staged;
// a Put's item is at most MaxItemSize bytes as ItemSize counts it; and the
// items' sizes (a Put's item; the key and expression values of the
// others) add up to at most MaxTransactSize. The size of an item after an
// Update is known to DynamoDB alone. After Store.CheckTable found a global
// table in multi-Region strong consistency (MRSC), which has no
// transactions, every call fails with an *Error wrapping a
// *GlobalTableError (ErrNoTransactions, idem.ErrMisconfigured,
// idem.ErrNoStaging).
func (s *Store) CheckStaged(staged []any) error {
	if g := s.noStaging.Load(); g != nil {
		return &Error{Op: "stage", Table: s.table, Err: g}
	}
	_, _, err := s.stagedItems(staged, "")
	return err
}

// stagedItems returns the staged writes as items, and their total size.
// record, if not empty, is the target of the record's item, which no
// staged item may address.
func (s *Store) stagedItems(staged []any, record string) ([]types.TransactWriteItem, int, error) {
	if len(staged) > MaxTransactItems-1 {
		return nil, 0, &idem.StagedWriteError{Index: -1, Err: fmt.Errorf("%w: %d writes staged, at most %d (the record is the transaction's item %d)",
			idem.ErrStagedLimit, len(staged), MaxTransactItems-1, MaxTransactItems)}
	}
	items := make([]types.TransactWriteItem, len(staged))
	total := 0
	seen := map[string]bool{record: record != ""}
	for i, v := range staged {
		it, ok := v.(types.TransactWriteItem)
		if !ok {
			return nil, 0, &idem.StagedWriteError{Index: i, Err: fmt.Errorf("ddbstore: a staged write is a types.TransactWriteItem, got %T", v)}
		}
		size, err := checkItem(it)
		if err != nil {
			return nil, 0, &idem.StagedWriteError{Index: i, Err: err}
		}
		if t, ok := s.target(it); ok && seen[t] {
			return nil, 0, &idem.StagedWriteError{Index: i, Err: errors.New("ddbstore: a staged item addresses an item that the transaction already writes (another staged item, or the record)")}
		} else if ok {
			seen[t] = true
		}
		if total += size; total > MaxTransactSize {
			return nil, 0, &idem.StagedWriteError{Index: i, Err: fmt.Errorf("%w: staged items add up to %d bytes or more, at most %d", idem.ErrStagedLimit, total, MaxTransactSize)}
		}
		items[i] = it
	}
	return items, total, nil
}

// checkItem checks one staged item's shape and size and returns its size.
func checkItem(it types.TransactWriteItem) (int, error) {
	var table *string
	size, set := 0, 0
	if p := it.Put; p != nil {
		table, size, set = p.TableName, ItemSize(p.Item), set+1
		if size > MaxItemSize {
			return 0, fmt.Errorf("%w: Put item is %d bytes, at most %d", idem.ErrStagedLimit, size, MaxItemSize)
		}
	}
	if u := it.Update; u != nil {
		table, size, set = u.TableName, ItemSize(u.Key)+ItemSize(u.ExpressionAttributeValues), set+1
	}
	if d := it.Delete; d != nil {
		table, size, set = d.TableName, ItemSize(d.Key)+ItemSize(d.ExpressionAttributeValues), set+1
	}
	if c := it.ConditionCheck; c != nil {
		table, size, set = c.TableName, ItemSize(c.Key)+ItemSize(c.ExpressionAttributeValues), set+1
	}
	if set != 1 {
		return 0, fmt.Errorf("ddbstore: a staged item sets %d of Put, Update, Delete and ConditionCheck, want exactly one", set)
	}
	if aws.ToString(table) == "" {
		return 0, errors.New("ddbstore: a staged item has no table name")
	}
	return size, nil
}

// target identifies the item a staged item addresses (its table and
// primary key) where that is known: the key of an Update, a Delete or a
// ConditionCheck, and a Put's on the store's own table, whose key
// attributes the store knows.
func (s *Store) target(it types.TransactWriteItem) (string, bool) {
	switch {
	case it.Update != nil:
		return targetOf(aws.ToString(it.Update.TableName), it.Update.Key), true
	case it.Delete != nil:
		return targetOf(aws.ToString(it.Delete.TableName), it.Delete.Key), true
	case it.ConditionCheck != nil:
		return targetOf(aws.ToString(it.ConditionCheck.TableName), it.ConditionCheck.Key), true
	case it.Put != nil && aws.ToString(it.Put.TableName) == s.table:
		key := map[string]types.AttributeValue{s.keyAttr: it.Put.Item[s.keyAttr]}
		if s.sortAttr != "" {
			key[s.sortAttr] = it.Put.Item[s.sortAttr]
		}
		return targetOf(s.table, key), true
	}
	return "", false
}

// targetOf is the identity of the item of key in table: the table and the
// key's attributes, sorted, with their types and values.
func targetOf(table string, key map[string]types.AttributeValue) string {
	names := make([]string, 0, len(key))
	for n := range key {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(table)
	for _, n := range names {
		b.WriteString("\x00" + n + "\x00")
		switch v := key[n].(type) {
		case *types.AttributeValueMemberS:
			b.WriteString("S" + v.Value)
		case *types.AttributeValueMemberN:
			b.WriteString("N" + v.Value)
		case *types.AttributeValueMemberB:
			b.WriteString("B" + hex.EncodeToString(v.Value))
		default:
			b.WriteString(fmt.Sprintf("?%T", v))
		}
	}
	return b.String()
}

// CompleteStaged implements idem.StagedCompleter with one TransactWriteItems:
// the record's Put, conditioned as Complete's is (completeCondition, with
// ReturnValuesOnConditionCheckFailure ALL_OLD), first, then the staged
// items in order. Its ClientRequestToken is derived from the lease token,
// the attempt and the outcome's time, so DynamoDB answers a commit retried
// within ten minutes as it answered the first, without applying it again. A result too large for
// the record is handled as Complete handles it (fitComplete): kept in a
// result item of its own, or past the item size limit in the blob store
// with WithLargeResults (omitted otherwise), written before the
// transaction and outside it; the record's item counts towards
// MaxTransactSize.
//
// If the transaction is cancelled (TransactionCanceledException), its
// reasons are read once, here: the record's condition failed and the
// stored record (from the reason, or one consistent GetItem) is this very
// outcome → it is returned with nil (a retried commit, applied by the
// first); the record's condition failed otherwise → an error wrapping
// idem.ErrLeaseLost; a staged item's condition failed, or DynamoDB found it
// invalid → a *idem.StagedWriteError naming it (wrapping
// idem.ErrStagedConditionFailed, or ErrInvalidRequest); a conflicting
// transaction or throttling → transient (ErrThrottled); any other reason →
// permanent (ErrInvalidRequest). Those last two, and every failure that
// certainly wrote nothing (the request refused as a whole: throttled, a
// staged table not found, access denied to a staged write; never sent; a
// large result the blob store refused), wrap idem.ErrCommitRefused: the
// runner retries the transient ones, then records a retryable failure in
// the success's place. A failure after which the commit may have been
// applied (a timeout, a reset, a 5xx, a reply cut short) is checked as
// Complete checks it (one consistent GetItem) before it is returned.
//
// A transactional write costs two write capacity units per KB of each item
// (twice a PutItem), the record's included.
func (s *Store) CompleteStaged(ctx context.Context, rec core.Record, staged []any) (core.Record, error) {
	const op = "complete staged"
	if err := ctx.Err(); err != nil {
		return core.Record{}, err
	}
	if rec.Status != core.StatusSucceeded {
		return core.Record{}, s.fail(op, ErrInvalidRequest, "needs a succeeded record, got %q", rec.Status)
	}
	if err := s.checkKey(op, rec.Key); err != nil {
		return core.Record{}, err
	}
	items, total, err := s.stagedItems(staged, targetOf(s.table, s.keyOf(rec.Key)))
	if err != nil {
		return core.Record{}, err
	}
	c, err := s.fitComplete(op, normalize(rec))
	if err != nil {
		return core.Record{}, refusedCommit(rec, err) // no record written
	}
	item, stored := c.item, c.stored
	if size := ItemSize(item); total+size > MaxTransactSize {
		return core.Record{}, &idem.StagedWriteError{Index: -1, Err: fmt.Errorf("%w: staged items (%d bytes) and the record (%d) exceed %d bytes",
			idem.ErrStagedLimit, total, size, MaxTransactSize)}
	}
	if err := s.writeApart(ctx, op, c); err != nil {
		return core.Record{}, refusedCommit(rec, err) // no record written
	}
	_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems:      append([]types.TransactWriteItem{{Put: s.completePut(item, rec)}}, items...),
		ClientRequestToken: aws.String(requestToken(rec)),
	}, s.calls.fns...)
	if err == nil {
		return stored, nil
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		return s.cancelled(ctx, rec, stored, tce.CancellationReasons)
	}
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "TransactionInProgressException" {
		// The same commit (same token) is still running: its outcome
		// will be known to a retry.
		return core.Record{}, core.MarkTransient(&Error{Op: op, Table: s.table, Err: fmt.Errorf("%w: %w", ErrUnavailable, err)})
	}
	if t := s.translate(ctx, op, err); !t.maybeApplied {
		// Refused as a whole (throttled, a staged table not found, access
		// denied to a staged write, invalid) or never sent.
		return core.Record{}, refusedCommit(rec, t.err)
	}
	return s.unconfirmed(ctx, op, rec, stored, err)
}

// completePut is the write of a completion, with Complete's condition:
// Complete's PutItem, and the record's Put in a transaction.
func (s *Store) completePut(item map[string]types.AttributeValue, rec core.Record) *types.Put {
	return &types.Put{
		TableName:                           s.parts.table,
		Item:                                item,
		ConditionExpression:                 s.parts.completeCondition,
		ExpressionAttributeNames:            s.parts.completeNames,
		ExpressionAttributeValues:           s.completeValues(rec),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// completeValues are the values of completeCondition's placeholders for a
// completion of rec: the caller's lease token and the completion's time.
func (s *Store) completeValues(rec core.Record) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		":in_progress": s.parts.inProgress,
		":tok":         &types.AttributeValueMemberS{Value: rec.LeaseToken},
		":now_s":       num(rec.UpdatedAt.Unix()), ":now_ms": num(rec.UpdatedAt.UnixMilli()),
	}
}

// requestToken is the commit's ClientRequestToken: a hash of the lease
// token, the attempt and the outcome's time (36 characters, DynamoDB's
// maximum). Lease tokens are unique per reservation, and the tries of one
// reservation (a runner's in-process retries) commit at different times,
// so only a retry of this commit shares it.
func requestToken(rec core.Record) string {
	h := sha256.Sum256([]byte(rec.LeaseToken + "\x00" + strconv.Itoa(rec.Attempts) + "\x00" + strconv.FormatInt(rec.UpdatedAt.UnixNano(), 10)))
	return "idem-" + hex.EncodeToString(h[:])[:31]
}

// Cancellation reason codes of TransactionCanceledException.
const (
	reasonCondition = "ConditionalCheckFailed"
	reasonInvalid   = "ValidationError"
)

var transientReasons = map[string]bool{
	"TransactionConflict":           true,
	"ThrottlingError":               true,
	"ProvisionedThroughputExceeded": true,
	"RequestLimitExceeded":          true,
}

// cancelled maps a cancelled commit's reasons (the record's first, then the
// staged items') to CompleteStaged's answer; stored is the record the
// commit meant to write.
func (s *Store) cancelled(ctx context.Context, rec, stored core.Record, reasons []types.CancellationReason) (core.Record, error) {
	const op = "complete staged"
	if len(reasons) > 0 && aws.ToString(reasons[0].Code) == reasonCondition {
		ccf := &types.ConditionalCheckFailedException{Item: reasons[0].Item}
		_, existing, found, err := s.blockingFor(ctx, op, ccf, rec.Key, nil)
		if err != nil {
			return core.Record{}, err // the lease was lost or the outcome is ours; unknown
		}
		if found && core.SameWrite(existing, rec) {
			return ownLarge(existing, stored), nil
		}
		return core.Record{}, s.leaseLost(rec, existing, found)
	}
	codes := make([]string, len(reasons))
	for i, r := range reasons {
		codes[i] = aws.ToString(r.Code)
		if i == 0 {
			continue
		}
		switch codes[i] {
		case reasonCondition:
			return core.Record{}, &idem.StagedWriteError{Index: i - 1, Err: fmt.Errorf("%w: %s", idem.ErrStagedConditionFailed, aws.ToString(r.Message))}
		case reasonInvalid:
			return core.Record{}, &idem.StagedWriteError{Index: i - 1, Err: fmt.Errorf("%w: %s", ErrInvalidRequest, aws.ToString(r.Message))}
		}
	}
	for _, c := range codes {
		if transientReasons[c] {
			return core.Record{}, refusedCommit(rec, core.MarkTransient(&Error{Op: op, Table: s.table,
				Err: fmt.Errorf("%w: transaction cancelled [%s]", ErrThrottled, strings.Join(codes, ", "))}))
		}
	}
	return core.Record{}, refusedCommit(rec, core.MarkPermanent(&Error{Op: op, Table: s.table,
		Err: fmt.Errorf("%w: transaction cancelled [%s]", ErrInvalidRequest, strings.Join(codes, ", "))}))
}
