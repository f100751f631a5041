package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/blob"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fit"
)

// API is the part of the DynamoDB client that the store calls. A
// *dynamodb.Client satisfies it; tests may pass a fake. Endpoints,
// credentials and retries come from the client's configuration; the store
// passes per call only options that make a call cheaper in CPU without
// changing what is sent or how answers are classified (see
// FastClientOptions).
type API interface {
	// PutItem writes an item (conditionally, for every write the store makes).
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	// GetItem reads an item (always with ConsistentRead).
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// Defaults of the store's options.
const (
	// DefaultKeyAttribute is the name of the table's partition key, a string.
	DefaultKeyAttribute = "pk"
	// DefaultTTLAttribute is the name of the TTL attribute: the end of a
	// record's retention in epoch seconds, which DynamoDB's Time to Live
	// uses to delete expired items.
	DefaultTTLAttribute = "expires_at"
	// DefaultCompressionThreshold is the result size, in bytes, above which
	// a result is stored gzip-compressed (when that makes it smaller).
	DefaultCompressionThreshold = 4 << 10
	// DefaultMaxItemSize is the size, as ItemSize counts it, that a stored
	// item may reach: DynamoDB's limit of 400 KB (409,600 bytes) less a
	// safety margin of 9,600 bytes.
	DefaultMaxItemSize = 400_000
	// MaxItemSize is DynamoDB's item size limit, the largest value
	// WithMaxItemSize accepts.
	MaxItemSize = 400 << 10
	// NoCompression, given to WithCompressionThreshold, turns compression off.
	NoCompression = -1
)

// Option configures a Store (New) or the table made for it (CreateTable).
type Option func(*options) error

type options struct {
	layout
	compressAbove int
	maxItem       int
	large         blob.Store // WithLargeResults; nil: results too large are omitted
}

func defaultOptions() options {
	return options{
		layout:        layout{keyAttr: DefaultKeyAttribute, ttlAttr: DefaultTTLAttribute},
		compressAbove: DefaultCompressionThreshold,
		maxItem:       DefaultMaxItemSize,
	}
}

// WithKeyAttribute sets the name of the table's partition key attribute, a
// string (default DefaultKeyAttribute). It must differ from the record's
// other attribute names (see WithAttributeNames).
func WithKeyAttribute(name string) Option {
	return func(o *options) error {
		if err := checkAttrName("key", name); err != nil {
			return err
		}
		o.keyAttr = name
		return nil
	}
}

// WithTTLAttribute sets the name of the TTL attribute, a number of epoch
// seconds (default DefaultTTLAttribute). It must differ from the record's
// other attribute names. A table has one TTL attribute: a table shared with
// other items (a single-table design) names the store's after it.
func WithTTLAttribute(name string) Option {
	return func(o *options) error {
		if err := checkAttrName("TTL", name); err != nil {
			return err
		}
		o.ttlAttr = name
		return nil
	}
}

// WithCompressionThreshold stores results of more than n bytes
// gzip-compressed, when that makes them smaller (default
// DefaultCompressionThreshold). n must be at least 0, or NoCompression.
func WithCompressionThreshold(n int) Option {
	return func(o *options) error {
		if err := fit.CheckThreshold(n); err != nil {
			return fmt.Errorf("ddbstore: %w", err)
		}
		o.compressAbove = n
		return nil
	}
}

// WithMaxItemSize sets the largest item, as ItemSize counts it, the store
// writes (default DefaultMaxItemSize; from 4096 to MaxItemSize). A
// completion whose item would be larger is stored without its result.
func WithMaxItemSize(n int) Option {
	return func(o *options) error {
		if n < 4096 || n > MaxItemSize {
			return fmt.Errorf("ddbstore: max item size %d must be from 4096 to %d", n, MaxItemSize)
		}
		o.maxItem = n
		return nil
	}
}

func buildOptions(opts []Option) (options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return options{}, err
		}
	}
	if err := o.checkLayout(); err != nil {
		return options{}, err
	}
	return o, nil
}

// Store is an idem.Store (and an idem.Acquirer) on a DynamoDB table. It is
// safe for concurrent use by multiple goroutines, and by any number of
// processes sharing the table: every write is one conditional PutItem or
// UpdateItem, which DynamoDB applies atomically. Create one with New; the
// zero value is not usable, and a Store must not be copied.
type Store struct {
	client API
	table  string
	calls  *callOptions // per-call SDK options (client.go)
	options
	// noUpdate is set once UpdateItem was refused for access (a policy
	// that grants PutItem and GetItem only): Acquire then uses PutItem.
	noUpdate atomic.Bool
}

var _ idem.Store = (*Store)(nil)
var _ idem.ErrorClassifier = (*Store)(nil)

// New returns a Store on table through client, configured by opts. The table
// must exist with the key schema the options describe: a string partition
// key named as configured and, with WithSortKey or WithSortKeyFunc, a string
// sort key, else none (see CreateTable and CheckTable). New makes no calls.
// A bad option is an error.
func New(client API, table string, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, errors.New("ddbstore: nil client")
	}
	if len(table) < 3 || len(table) > 255 {
		return nil, fmt.Errorf("ddbstore: table name %q must be 3 to 255 characters", table)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	return &Store{client: client, table: table, calls: newCallOptions(), options: o}, nil
}

// Table returns the name of the store's table.
func (s *Store) Table() string { return s.table }

func (s *Store) fail(op string, sentinel error, format string, args ...any) error {
	return core.MarkPermanent(&Error{Op: op, Table: s.table, Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)})
}

// Reserve implements idem.Store.Reserve with one conditional PutItem that
// asks for the blocking item on failure (ReturnValuesOnConditionCheckFailure
// ALL_OLD). The condition, with times at the table's resolution (see the
// package documentation):
//
//	attribute_not_exists(key)
//	OR (expires_at <= now_s AND (status <> in_progress OR lease_until_ms <= now_ms))
//	OR (prev != nil AND lease_token = prev.token AND status = prev.status AND
//	    size(step_names) = len(prev.Steps) AND
//	    ((status = in_progress AND lease_until_ms <= now_ms) OR
//	     (status = failed AND retryable = true)))
//
// If the condition fails, the blocking record comes from the error; where
// the server does not return it (dynalite), one consistent GetItem reads it.
// If that finds no live record (it expired or was deleted in between), the
// put is tried once more. A blocking record that holds rec's own token is
// this reservation, applied by an earlier try whose answer was lost (an SDK
// retry): Reserve returns nil. A blocking record that a duplicate replays
// (succeeded, with rec's fingerprint) and whose result is kept in the blob
// store (WithLargeResults) comes with its result, read with one Get and
// checked; no other blocking record's is read. After a failure that may
// have been applied (a timeout, a reset, a 5xx), one consistent GetItem
// checks for rec's own token in the same way before the error is returned.
//
// A key whose item key does not fit DynamoDB's limits (the prefix and the
// key over 2048 bytes, a sort key value empty or over 1024) or a record
// above the item size limit is a permanent error wrapping ErrKeyTooLarge or
// ErrItemTooLarge.
func (s *Store) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	const op = "reserve"
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.checkReservation(op, &rec); err != nil {
		return err
	}
	in := s.reserveInput(s.encode(rec, nil, ""), prev, now)
	for try := 0; ; try++ {
		_, err := s.client.PutItem(ctx, in, s.calls.fns...)
		if err == nil {
			return nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			t := s.translate(op, err)
			if t.maybeApplied && s.ownReservation(ctx, rec) {
				return nil
			}
			return t.err
		}
		existing, found, err := s.blockingFor(ctx, op, ccf, rec.Key, replayOf(rec, now))
		if err != nil {
			return err
		}
		if found && core.SameWrite(existing, rec) {
			return nil
		}
		if found && !existing.Expired(now) {
			return &idem.ConflictError{Existing: existing}
		}
		if try >= 1 {
			return core.MarkTransient(&Error{Op: op, Table: s.table,
				Err: fmt.Errorf("%w: the blocking record changed twice during the reservation", ErrUnavailable)})
		}
	}
}

func (s *Store) reserveInput(item map[string]types.AttributeValue, prev *core.Record, now time.Time) *dynamodb.PutItemInput {
	// The first two branches are core.Record.Expired: past retention and
	// not an in-progress record with a live lease.
	names := map[string]string{"#k": s.keyAttr, "#exp": s.ttlAttr, "#st": s.names.Status, "#lease": s.names.LeaseUntil}
	values := map[string]types.AttributeValue{":now_s": num(now.Unix()), ":now_ms": num(now.UnixMilli()),
		":in_progress": &types.AttributeValueMemberS{Value: string(core.StatusInProgress)}}
	cond := "attribute_not_exists(#k) OR (#exp <= :now_s AND (#st <> :in_progress OR #lease <= :now_ms))"
	// Only the branch for prev's own status is sent: the stored record must
	// still be prev (token and status), and only an in-progress record with
	// an ended lease or a retryable failure may be taken. Other statuses
	// add nothing. (One branch instead of a disjunction over both also costs
	// dynalite a third of the CPU.)
	if prev != nil && prev.LeaseToken != "" {
		switch prev.Status {
		case core.StatusInProgress:
			cond += " OR (#tok = :prev_tok AND #st = :prev_st AND #lease <= :now_ms AND " + s.prevSteps(prev, names, values) + ")"
		case core.StatusFailed:
			cond += " OR (#tok = :prev_tok AND #st = :prev_st AND #retry = :true AND " + s.prevSteps(prev, names, values) + ")"
			names["#retry"] = s.names.Retryable
			values[":true"] = &types.AttributeValueMemberBOOL{Value: true}
		}
		if prev.Status == core.StatusInProgress || prev.Status == core.StatusFailed {
			names["#tok"] = s.names.LeaseToken
			values[":prev_tok"] = &types.AttributeValueMemberS{Value: prev.LeaseToken}
			values[":prev_st"] = &types.AttributeValueMemberS{Value: string(prev.Status)}
		}
	}
	return &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                item,
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// ownReservation reads the key after a reservation whose outcome is unknown
// and reports whether it was applied. Any failure of the read counts as no.
func (s *Store) ownReservation(ctx context.Context, rec core.Record) bool {
	if ctx.Err() != nil {
		return false
	}
	stored, found, err := s.read(ctx, "reserve", rec.Key)
	return err == nil && found && core.SameWrite(stored, rec)
}

// blocking returns the record that made a conditional put fail: the item the
// error carries (ALL_OLD), or else one consistent read. found is false if the
// read finds no item.
func (s *Store) blocking(ctx context.Context, op string, ccf *types.ConditionalCheckFailedException, key string) (core.Record, bool, error) {
	return s.blockingFor(ctx, op, ccf, key, nil)
}

// blockingFor is blocking, reading the large result of a record that load
// selects (see decodeFor).
func (s *Store) blockingFor(ctx context.Context, op string, ccf *types.ConditionalCheckFailedException, key string, load loadFunc) (core.Record, bool, error) {
	if len(ccf.Item) > 0 {
		rec, err := s.decodeFor(ctx, op, ccf.Item, load)
		if err != nil {
			return core.Record{}, false, err
		}
		return rec, true, nil
	}
	return s.readFor(ctx, op, key, load)
}

// read is one consistent GetItem of key.
func (s *Store) read(ctx context.Context, op, key string) (core.Record, bool, error) {
	return s.readFor(ctx, op, key, nil)
}

// readFor is read, reading the large result of a record that load selects
// (see decodeFor).
func (s *Store) readFor(ctx context.Context, op, key string, load loadFunc) (core.Record, bool, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            s.keyOf(key),
		ConsistentRead: aws.Bool(true),
	}, s.calls.fns...)
	if err != nil {
		return core.Record{}, false, s.translate(op, err).err
	}
	if len(out.Item) == 0 {
		return core.Record{}, false, nil
	}
	rec, err := s.decodeFor(ctx, op, out.Item, load)
	if err != nil {
		return core.Record{}, false, err
	}
	return rec, true, nil
}

// completeCondition requires the caller's lease on a record that is not
// Expired (core.Record.Expired) at the completion's time.
const completeCondition = "#st = :in_progress AND #tok = :tok AND (#exp > :now_s OR #lease > :now_ms)"

// Complete implements idem.Store.Complete with one PutItem conditioned on
// the caller's lease (completeCondition), which replaces the whole item.
//
// A result of more than the compression threshold is stored gzip-compressed
// when that makes it smaller. If the item would still exceed the item size
// limit, a succeeded record is stored without its result and the returned
// record has ResultOmitted set, unless WithLargeResults keeps the result in
// a blob store (written before the record; a failure to write it fails the
// completion with ErrLargeResult and writes no record); a failed record's
// error message is shortened. Completion never fails for size.
//
// If the condition fails and the stored record (from the error, or one
// consistent GetItem where the server does not return it) is this very
// completion, applied by an earlier try whose answer was lost, Complete
// returns it as success. Otherwise the error wraps idem.ErrLeaseLost.
// Transport failures, throttling and 5xx are transient: retrying a
// completion is safe because of that check.
func (s *Store) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	const op = "complete"
	if err := ctx.Err(); err != nil {
		return core.Record{}, err
	}
	if rec.Status != core.StatusSucceeded && rec.Status != core.StatusFailed {
		return core.Record{}, fmt.Errorf("ddbstore: complete needs a succeeded or failed record, got %q", rec.Status)
	}
	if err := s.checkKey(op, rec.Key); err != nil {
		return core.Record{}, err
	}
	rec = normalize(rec)
	rec.Error = strings.ToValidUTF8(rec.Error, "\uFFFD")
	item, stored, err := s.fitComplete(ctx, op, rec)
	if err != nil {
		return core.Record{}, err
	}
	put := s.completePut(item, rec)
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: put.TableName, Item: put.Item, ConditionExpression: put.ConditionExpression,
		ExpressionAttributeNames: put.ExpressionAttributeNames, ExpressionAttributeValues: put.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: put.ReturnValuesOnConditionCheckFailure,
	}, s.calls.fns...)
	if err == nil {
		return stored, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return core.Record{}, s.translate(op, err).err
	}
	existing, found, rerr := s.blocking(ctx, op, ccf, rec.Key)
	if rerr != nil {
		// The lease was lost or the outcome is ours; we cannot tell which.
		return core.Record{}, rerr
	}
	if found && core.SameWrite(existing, rec) {
		return ownLarge(existing, stored), nil
	}
	return core.Record{}, s.leaseLost(rec, existing, found)
}

// leaseLost is the error of a completion of rec refused by its condition,
// describing the stored record (existing, if found).
func (s *Store) leaseLost(rec, existing core.Record, found bool) error {
	what := "no record"
	if found {
		what = fmt.Sprintf("a %s record (attempt %d) with another lease", existing.Status, existing.Attempts)
		if existing.LeaseToken == rec.LeaseToken {
			what = fmt.Sprintf("a %s record (attempt %d) with this lease", existing.Status, existing.Attempts)
		}
	}
	return fmt.Errorf("ddbstore: complete on table %q, key hash %s: %w: table holds %s",
		s.table, idem.HashKey(rec.Key), idem.ErrLeaseLost, what)
}

// fitItem encodes a completed record within the item size limit, compressing
// the result or, failing that, dropping it (succeeded) or shortening the
// error message (failed). It returns the item and the record as stored.
func (s *Store) fitItem(op string, rec core.Record) (map[string]types.AttributeValue, core.Record, error) {
	item, stored, size, ok := fit.Record(rec, s.compressAbove, s.maxItem, func(rec core.Record, body []byte, encoding string) (map[string]types.AttributeValue, int) {
		item := s.encode(rec, body, encoding)
		return item, ItemSize(item)
	})
	if !ok {
		return nil, core.Record{}, s.fail(op, ErrItemTooLarge, "record without result is %d bytes, at most %d", size, s.maxItem)
	}
	return item, stored, nil
}

// Get implements idem.Store.Get with one consistent GetItem. A record whose
// retention has ended at now (its TTL attribute, in seconds, is at or before
// now) is reported as idem.ErrNotFound even if DynamoDB has not deleted it.
// A live succeeded record whose result is kept in the blob store
// (WithLargeResults) is returned with it, read with one Get and checked.
func (s *Store) Get(ctx context.Context, key string, now time.Time) (core.Record, error) {
	const op = "get"
	if err := ctx.Err(); err != nil {
		return core.Record{}, err
	}
	if err := s.checkKey(op, key); err != nil {
		return core.Record{}, err
	}
	rec, found, err := s.readFor(ctx, op, key, liveAt(now))
	if err != nil {
		return core.Record{}, err
	}
	if !found || rec.Expired(now) {
		return core.Record{}, fmt.Errorf("ddbstore: get on table %q, key hash %s: %w", s.table, idem.HashKey(key), idem.ErrNotFound)
	}
	return rec, nil
}
