package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	large         blob.Store  // WithLargeResults; nil: results too large are omitted
	repl          replication // WithHomeRegion, WithReplicationWindowAccepted
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
// processes sharing the table: every write is one conditional request,
// which DynamoDB applies atomically. Create one with New; the zero value is
// not usable, and a Store must not be copied.
type Store struct {
	client API
	table  string
	calls  *callOptions // per-call SDK options (client.go)
	parts  requestParts // the requests' constant parts (requests.go)
	options
	// schema is what the store knows of its table's key schema.
	schema schemaCheck
	// span is what the store knows of its records' retention, for the
	// end of its step items (stepitems.go).
	span stepSpan
	// noStaging is why staged writes cannot be committed (an MRSC table,
	// as CheckTable found), or nil.
	noStaging atomic.Pointer[GlobalTableError]
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
	s := &Store{client: client, table: table, calls: newCallOptions(), options: o}
	s.parts = newRequestParts(s)
	return s, nil
}

// Table returns the name of the store's table.
func (s *Store) Table() string { return s.table }

func (s *Store) fail(op string, sentinel error, format string, args ...any) error {
	return core.MarkPermanent(&Error{Op: op, Table: s.table, Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)})
}

// Reserve implements idem.Store.Reserve (core.Reservable) with one write
// that asks for the blocking item on failure
// (ReturnValuesOnConditionCheckFailure ALL_OLD; where the server does not
// return it, dynalite, one consistent GetItem reads it). With times at the
// table's resolution (see the package documentation):
//
//   - a reservation that carries no step is one PutItem of the whole item,
//     conditioned without prev on there being no live record,
//     `attribute_not_exists(key) OR (expires_at <= now_s AND (status <>
//     in_progress OR lease_until_ms <= now_ms))`, and with prev on prev
//     alone (prevBranch: `lease_token = prev.token AND status = prev.status
//     AND lease_until_ms <= now_ms` (or `retryable = true`) `AND
//     size(step_names) = len(prev.Steps)`, within retention);
//   - a reservation that carries prev's steps (a takeover or a retry of the
//     same payload) is one UpdateItem over prev alone that sets every
//     attribute but the steps', which stay in their step items, and keeps
//     the record's end of retention at or before theirs (untilClause).
//     Refused by prev whose step items end too early, it writes them again
//     to end later (extendStepItems) and is made once more.
//
// A blocking record that is rec itself (an earlier try's whose answer was
// lost) answers nil; a live one, a *idem.ConflictError: with its result
// where a duplicate replays it and the result is kept in a result item (one
// consistent GetItem, checked) or in the blob store (WithLargeResults; one
// Get, checked), with its steps where rec may
// resume it (core.Resumable), and without them otherwise. No live record
// answers, with prev, an error wrapping idem.ErrRecordChanged (prev went),
// and without prev (it expired or was deleted in between) the write once
// more. A prev that allows no replacement (core.Replaceable: another
// status) is answered from one consistent GetItem. After a failure that
// may have been applied (a timeout, a reset, a 5xx), one consistent GetItem
// checks for rec's own write before the error is returned.
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
	item, err := s.checkReservation(op, &rec)
	if err != nil {
		return err
	}
	write, err := s.reservation(item, rec, prev, now)
	if err != nil {
		return err
	}
	if write == nil {
		return s.unreservable(ctx, rec, now)
	}
	for try := 0; ; try++ {
		err := write(ctx)
		var ccf *types.ConditionalCheckFailedException
		if err == nil || !errors.As(err, &ccf) {
			return s.reserveFailed(ctx, rec, err)
		}
		blocking, existing, found, err := s.blockingFor(ctx, op, ccf, rec.Key, replayOf(rec, now))
		live := found && !existing.Expired(now)
		switch {
		case err != nil:
			return err
		case found && core.SameWrite(existing, rec):
			return nil
		case live && (len(rec.Steps) == 0 || !core.Replaceable(existing, prev, now)):
			// Without steps, prev's condition alone refused the write. (A
			// blocking record's steps are read only where rec may resume
			// it, so core.Replaceable, which counts them, is asked only
			// for a reservation that carries them.)
			return &idem.ConflictError{Existing: existing}
		case !live && prev != nil:
			return s.prevGone(rec)
		case try >= 1:
			return core.MarkTransient(&Error{Op: op, Table: s.table,
				Err: fmt.Errorf("%w: the blocking record changed twice during the reservation", ErrUnavailable)})
		case live && len(rec.Steps) > 0:
			if err := s.extendStepItems(ctx, op, blocking, existing, rec.ExpiresAt, now); err != nil {
				return err
			}
		}
	}
}

// reservation returns Reserve's write of rec, whose item without steps is
// item, over prev at now: the PutItem, or the UpdateItem that keeps prev's
// steps where rec carries them; nil where prev allows no replacement.
func (s *Store) reservation(item map[string]types.AttributeValue, rec core.Record, prev *core.Record, now time.Time) (func(context.Context) error, error) {
	if len(rec.Steps) == 0 {
		if prev != nil && !core.Replaceable(*prev, prev, now) {
			return nil, nil
		}
		in := s.reserveInput(item, prev, now)
		return func(ctx context.Context) error { _, err := s.client.PutItem(ctx, in, s.calls.fns...); return err }, nil
	}
	if prev == nil || !sameStepList(rec.Steps, prev.Steps) {
		return nil, errors.New("ddbstore: reserve: a reservation carries steps only as core.Reserve carries them: prev's")
	}
	names, values := map[string]string{}, map[string]types.AttributeValue{}
	branch := s.prevBranch(prev, now, names, values)
	if branch == "" {
		return nil, nil
	}
	in := s.replaceInput(item, branch+" AND "+s.untilClause(rec.ExpiresAt, names, values), names, values)
	return func(ctx context.Context) error {
		_, err := s.client.UpdateItem(ctx, in, s.calls.fns...)
		if err == nil {
			s.span.learn(rec.ExpiresAt, now)
		}
		return err
	}, nil
}

// sameStepList reports whether a and b are the same steps in the same order.
func sameStepList(a, b []core.Step) bool {
	return slices.EqualFunc(a, b, func(x, y core.Step) bool { return x.Name == y.Name && string(x.Result) == string(y.Result) })
}

// reserveFailed is the answer to a reservation of rec that succeeded (err
// nil) or failed otherwise than by its condition: where it may have been
// applied, the stored record is read first, and if it is rec (an earlier
// try's write, or this one's), the reservation is made.
func (s *Store) reserveFailed(ctx context.Context, rec core.Record, err error) error {
	if err == nil {
		return nil
	}
	t := s.translate(ctx, "reserve", err)
	if t.maybeApplied {
		if _, own := s.ownWrite(ctx, "reserve", rec.Key, sameWrite(rec), nil); own {
			return nil
		}
	}
	return t.err
}

// prevGone is the error of a reservation of rec decided on a record that
// is no longer stored (core.Reservable).
func (s *Store) prevGone(rec core.Record) error {
	return fmt.Errorf("ddbstore: reserve on table %q, key hash %s: %w: the record the reservation replaces is gone",
		s.table, idem.HashKey(rec.Key), idem.ErrRecordChanged)
}

// unreservable answers a reservation of rec over a prev that allows no
// replacement (core.Replaceable: another status), which no write could
// make: from one consistent GetItem, the live record as a conflict, or
// none as prev gone.
func (s *Store) unreservable(ctx context.Context, rec core.Record, now time.Time) error {
	_, existing, found, err := s.readFor(ctx, "reserve", rec.Key, replayOf(rec, now))
	switch {
	case err != nil:
		return err
	case found && !existing.Expired(now):
		return &idem.ConflictError{Existing: existing}
	}
	return s.prevGone(rec)
}

// reserveInput is Reserve's PutItem of item: without prev, over no live
// record (freshInput); with prev, over prev alone (prevBranch).
func (s *Store) reserveInput(item map[string]types.AttributeValue, prev *core.Record, now time.Time) *dynamodb.PutItemInput {
	if prev == nil {
		return s.freshInput(item, now)
	}
	names, values := map[string]string{}, map[string]types.AttributeValue{}
	return s.putInput(item, s.prevBranch(prev, now, names, values), names, values)
}

// ownWrite reads key after a write whose outcome is unknown (its answer
// lost, or cut short: translated.maybeApplied) and returns the stored
// record and true if that write was applied, as same tells of the stored
// record (core.SameWrite for a reservation or a completion, core.Acquired
// for an acquisition): the one rule by which a retried write recognises an
// earlier try's, so that no write is called failed before it is checked.
// load selects what is read beyond the item (see decodeFor). Any failure
// of the read counts as not applied.
func (s *Store) ownWrite(ctx context.Context, op, key string, same, load loadFunc) (core.Record, bool) {
	if ctx.Err() != nil {
		return core.Record{}, false
	}
	_, stored, found, err := s.readFor(ctx, op, key, load)
	return stored, err == nil && found && same(stored)
}

// sameWrite selects the stored record that is rec's own write
// (core.SameWrite).
func sameWrite(rec core.Record) loadFunc {
	return func(stored core.Record) bool { return core.SameWrite(stored, rec) }
}

// blockingFor returns the item that made a conditional write fail and its
// record, decoded with load (see decodeFor): the item the error carries
// (ALL_OLD), or else one consistent read's. found is false if there is no
// item.
func (s *Store) blockingFor(ctx context.Context, op string, ccf *types.ConditionalCheckFailedException, key string, load loadFunc) (map[string]types.AttributeValue, core.Record, bool, error) {
	if len(ccf.Item) == 0 {
		return s.readFor(ctx, op, key, load)
	}
	rec, err := s.decodeFor(ctx, op, ccf.Item, load)
	if err != nil {
		return nil, core.Record{}, false, err
	}
	return ccf.Item, rec, true, nil
}

// readFor is one consistent GetItem of key: the item and its record,
// decoded with load (see decodeFor); found is false if there is none.
func (s *Store) readFor(ctx context.Context, op, key string, load loadFunc) (map[string]types.AttributeValue, core.Record, bool, error) {
	item, err := s.getItem(ctx, op, key)
	if err != nil || len(item) == 0 {
		return nil, core.Record{}, false, err
	}
	rec, err := s.decodeFor(ctx, op, item, load)
	if err != nil {
		return nil, core.Record{}, false, err
	}
	return item, rec, true, nil
}

// getItem reads the item of key with one consistent GetItem (nil if there
// is none).
func (s *Store) getItem(ctx context.Context, op, key string) (map[string]types.AttributeValue, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: s.keyOf(key), ConsistentRead: aws.Bool(true)}, s.calls.fns...)
	if err != nil {
		return nil, s.translate(ctx, op, err).err
	}
	return out.Item, nil
}

// Get implements idem.Store.Get with one consistent GetItem. A record whose
// retention has ended at now (its TTL attribute, in seconds, is at or before
// now) is reported as idem.ErrNotFound even if DynamoDB has not deleted it.
// A live succeeded record whose result is kept in a result item or in the
// blob store (WithLargeResults) is returned with it, read with one
// consistent GetItem or one Get and checked; a live record's steps kept in step items are read with one BatchGetItem per
// 100 of them.
func (s *Store) Get(ctx context.Context, key string, now time.Time) (core.Record, error) {
	const op = "get"
	if err := ctx.Err(); err != nil {
		return core.Record{}, err
	}
	if err := s.checkKey(op, key); err != nil {
		return core.Record{}, err
	}
	_, rec, found, err := s.readFor(ctx, op, key, liveAt(now))
	if err != nil {
		return core.Record{}, err
	}
	if !found || rec.Expired(now) {
		return core.Record{}, fmt.Errorf("ddbstore: get on table %q, key hash %s: %w", s.table, idem.HashKey(key), idem.ErrNotFound)
	}
	return rec, nil
}
