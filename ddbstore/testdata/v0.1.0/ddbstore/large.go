package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/awsclassify"
	"github.com/idemgo/idem/blob"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fit"
)

// Default names of the attributes of a succeeded record whose result is
// kept in the blob store (WithLargeResults); WithAttributeNames renames
// them.
const (
	// AttrResultRef (S) is the name of the blob store object that holds the
	// result, raw or compressed as AttrResultEncoding says.
	AttrResultRef = "result_ref"
	// AttrResultSHA256 (S) is the hex SHA-256 of that object.
	AttrResultSHA256 = "result_sha256"
	// AttrResultSize (N) is that object's size in bytes.
	AttrResultSize = "result_size"
)

// ErrLargeResult: the blob store that keeps large results (WithLargeResults)
// failed. On Complete, the object could not be written, and no record was
// written either: the error is transient if the blob store's error is (S3
// throttling such as SlowDown, HTTP 5xx, transport failures: see
// awsclassify), so the runner retries the completion, and permanent
// otherwise (AccessDenied). On a replay (Reserve refused by a succeeded
// record with the caller's fingerprint, or Get), the object could not be
// read (transient or permanent as above), is missing (also wrapping
// blob.ErrNotFound; permanent), or is not the one recorded (also wrapping
// blob.ErrMismatch; permanent): never wrong bytes. Checked with errors.Is.
var ErrLargeResult = errors.New("ddbstore: large result in the blob store failed")

// WithLargeResults keeps a succeeded result that does not fit the item even
// compressed in b, instead of omitting it: Complete writes the object first
// (one Put, of the result as it would have been stored in the item, raw or
// gzip-compressed) and then the record, which holds the object's name, size
// and SHA-256 (AttrResultRef, AttrResultSize, AttrResultSHA256) in place of
// the result; the record is not flagged omitted. A record therefore never
// points at an object that was not written. A duplicate that replays such a
// record reads the object with one Get and checks its size and SHA-256; no
// other read of the store touches b. Results that fit the item never touch b.
//
// The object's name is made of the key's hash (idem.HashKey, of the key with
// the store's prefix), the lease token's hash and the object's SHA-256, so it
// is unique per outcome and a retried completion rewrites the same object.
// Objects are never deleted by the store: an expiry rule of the blob store
// removes them (s3blob.EnsureLifecycle, matched to the records' retention).
// Without this option, or on a store without it reading a record written
// with it, the result is omitted and the record flagged ResultOmitted.
func WithLargeResults(b blob.Store) Option {
	return func(o *options) error {
		if b == nil {
			return errors.New("ddbstore: WithLargeResults needs a blob store")
		}
		o.large = b
		return nil
	}
}

// loadFunc reports whether the large result of a decoded record is read
// from the blob store (nil: never).
type loadFunc func(core.Record) bool

// replayOf selects the records that a reservation of rec replays (core.Decide:
// a live succeeded record with rec's fingerprint); the others (a key reused
// with another payload) need no body.
func replayOf(rec core.Record, now time.Time) loadFunc {
	return func(stored core.Record) bool {
		return stored.Status == core.StatusSucceeded && stored.Fingerprint == rec.Fingerprint && !stored.Expired(now)
	}
}

// liveAt selects the records live at now (Get returns them whole).
func liveAt(now time.Time) loadFunc {
	return func(stored core.Record) bool { return !stored.Expired(now) }
}

// largeRef is where a large result is kept: the object's name, SHA-256,
// size and encoding.
type largeRef struct {
	name, sum, encoding string
	size                int64
}

// decodeFor decodes item. If it holds a large result reference and load
// selects the record (and the store has a blob store), the object is read
// and checked, and becomes the record's result; otherwise the record is
// flagged ResultOmitted, its body not being at hand. Errors are the store's:
// ErrCorruptRecord, or ErrLargeResult.
func (s *Store) decodeFor(ctx context.Context, op string, item map[string]types.AttributeValue, load loadFunc) (core.Record, error) {
	rec, err := s.decode(item)
	var ref largeRef
	var has bool
	if err == nil {
		ref, has, err = s.refOf(item, rec.Status)
	}
	if err != nil {
		return core.Record{}, core.MarkPermanent(&Error{Op: op, Table: s.table, Err: err})
	}
	if !has {
		return rec, nil
	}
	if s.large == nil || load == nil || !load(rec) {
		rec.ResultOmitted = true
		return rec, nil
	}
	rec.Result, err = s.loadLarge(ctx, op, ref)
	if err != nil {
		return core.Record{}, err
	}
	return rec, nil
}

// refOf reads the large result reference of an item with status, if any. A
// reference that is incomplete, or on a record that is not succeeded, wraps
// ErrCorruptRecord.
func (s *Store) refOf(item map[string]types.AttributeValue, status core.Status) (largeRef, bool, error) {
	n := &s.names
	if _, ok := item[n.ResultRef]; !ok {
		return largeRef{}, false, nil
	}
	r := itemReader{item: item}
	ref := largeRef{name: r.str(n.ResultRef, true), sum: r.str(n.ResultSHA256, true), encoding: r.str(n.ResultEncoding, false)}
	size, ok := r.num(n.ResultSize)
	if !ok && r.err == nil {
		r.fail("attribute %s missing", n.ResultSize)
	}
	ref.size = size
	if r.err == nil && (ref.name == "" || len(ref.sum) != 64 || size <= 0 || status != core.StatusSucceeded) {
		r.fail("large result reference of a %s record: object %q, %d bytes, SHA-256 %q", status, ref.name, size, ref.sum)
	}
	return ref, r.err == nil, r.err
}

// loadLarge reads the object of ref, checks its size and SHA-256, and
// decodes it.
func (s *Store) loadLarge(ctx context.Context, op string, ref largeRef) ([]byte, error) {
	body, err := s.large.Get(ctx, ref.name)
	if err == nil && int64(len(body)) != ref.size {
		err = fmt.Errorf("%w: %d bytes, want %d", blob.ErrMismatch, len(body), ref.size)
	}
	if err == nil {
		err = blob.Verify(body, ref.sum)
	}
	if err != nil {
		return nil, s.largeError(op, ref.name, err)
	}
	out, err := fit.Decode(body, ref.encoding)
	if err != nil {
		return nil, s.largeError(op, ref.name, fmt.Errorf("%w: %w", blob.ErrMismatch, err))
	}
	return out, nil
}

// largeError wraps a failure of the blob store in an *Error wrapping
// ErrLargeResult, marked transient if the blob store's error is (by its own
// mark, or as awsclassify, HTTP status or network failure say), and
// permanent otherwise; a canceled context is left unmarked.
func (s *Store) largeError(op, name string, err error) error {
	e := &Error{Op: op, Table: s.table, Err: fmt.Errorf("%w: object %s: %w", ErrLargeResult, name, err)}
	switch {
	case errors.Is(err, context.Canceled):
		return e
	case core.Classify(err, awsclassify.Classify, core.HTTPStatusClassifier, core.NetworkClassifier) == core.Transient:
		return core.MarkTransient(e)
	}
	return core.MarkPermanent(e)
}

// fitComplete is fitItem, and with a blob store keeps a succeeded result
// that does not fit the item there instead of omitting it: it writes the
// object, and returns the item that points at it only once it is written.
func (s *Store) fitComplete(ctx context.Context, op string, rec core.Record) (map[string]types.AttributeValue, core.Record, error) {
	if s.large == nil || rec.Status != core.StatusSucceeded {
		return s.fitItem(op, rec)
	}
	var body []byte
	var encoding string
	item, stored, size, ok := fit.Record(rec, s.compressAbove, s.maxItem, func(r core.Record, b []byte, enc string) (map[string]types.AttributeValue, int) {
		if len(b) > 0 {
			body, encoding = b, enc // the result as the item would keep it
		}
		item := s.encode(r, b, enc)
		return item, ItemSize(item)
	})
	if !ok {
		return nil, core.Record{}, s.fail(op, ErrItemTooLarge, "record without result is %d bytes, at most %d", size, s.maxItem)
	}
	if !stored.ResultOmitted {
		return item, stored, nil
	}
	largeItem, name, ok := s.largeItem(stored, body, encoding)
	if !ok {
		return item, stored, nil // no room even for the reference: omitted, as without a blob store
	}
	if err := s.large.Put(ctx, name, body); err != nil {
		return nil, core.Record{}, s.largeError(op, name, err)
	}
	stored.Result, stored.ResultOmitted = rec.Result, false
	return largeItem, stored, nil
}

// largeItem returns the item of stored, a succeeded record without its
// result, that points at body, the result in encoding, kept in the blob
// store under name; ok is false if that item would pass the item size
// limit. The name is unique per outcome: the key's hash, the lease token's
// hash, the object's SHA-256.
func (s *Store) largeItem(stored core.Record, body []byte, encoding string) (item map[string]types.AttributeValue, name string, ok bool) {
	n := &s.names
	sum := blob.Sum(body)
	name = idem.HashKey(s.prefix+stored.Key) + "/" + idem.HashKey(stored.LeaseToken) + "-" + sum
	stored.ResultOmitted = false
	item = s.encode(stored, nil, "")
	item[n.ResultRef] = &types.AttributeValueMemberS{Value: name}
	item[n.ResultSHA256] = &types.AttributeValueMemberS{Value: sum}
	item[n.ResultSize] = num(int64(len(body)))
	if encoding != "" {
		item[n.ResultEncoding] = &types.AttributeValueMemberS{Value: encoding}
	}
	return item, name, ItemSize(item) <= s.maxItem
}

// ownLarge returns existing, the stored record that a retried completion
// found to be its own (core.SameWrite), with the result of stored, the
// record that completion meant to write, when existing was read without its
// large result: both are the same outcome.
func ownLarge(existing, stored core.Record) core.Record {
	if existing.ResultOmitted && !stored.ResultOmitted && stored.Result != nil {
		existing.Result, existing.ResultOmitted = stored.Result, false
	}
	return existing
}
