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

// ErrLargeResult reports that the blob store that keeps large results
// (WithLargeResults) failed. On Complete (and CompleteStaged), the object
// could not be written, and no record was written either: the error wraps
// idem.ErrCommitRefused, and is transient if the blob store's error is (S3
// throttling such as SlowDown, HTTP 5xx, transport failures: see
// awsclassify), so the runner retries the completion, and permanent
// otherwise (AccessDenied); once no retry mends it, the runner records a
// retryable failure in the success's place. On a replay (Reserve refused by a succeeded
// record with the caller's fingerprint, or Get), the object could not be
// read (transient or permanent as above), is missing (also wrapping
// blob.ErrNotFound; permanent), or is not the one recorded (also wrapping
// blob.ErrMismatch; permanent): never wrong bytes. Checked with errors.Is.
var ErrLargeResult = errors.New("ddbstore: large result in the blob store failed")

// WithLargeResults keeps a succeeded result that does not fit an item even
// compressed (neither the record nor a result item of its own: see
// Complete) in b, instead of omitting it: Complete writes the object first
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

// loadFunc reports whether what a decoded record keeps outside its item is
// read: a large result from the blob store, steps from their step items
// (nil: never). It is given the record without them.
type loadFunc func(core.Record) bool

// replayOf selects the records that a reservation of rec replays (core.Decide:
// a live succeeded record with rec's fingerprint) or may resume, carrying
// their steps (core.Resumable); the others (a key reused with another
// payload, a live lease, a record that ended) need neither.
func replayOf(rec core.Record, now time.Time) loadFunc {
	return func(stored core.Record) bool {
		return stored.Status == core.StatusSucceeded && stored.Fingerprint == rec.Fingerprint && !stored.Expired(now) ||
			core.Resumable(&stored, rec.Fingerprint, now)
	}
}

// liveAt selects the records live at now (Get returns them whole).
func liveAt(now time.Time) loadFunc {
	return func(stored core.Record) bool { return !stored.Expired(now) }
}

// largeRef is where a result kept outside its record is: in the blob store
// (the object's name), or in a result item (inItem, its reference item);
// and the SHA-256, size and encoding of what it holds.
type largeRef struct {
	name, sum, encoding string
	size                int64
	item                resultRef
	inItem              bool
}

// decodeFor decodes item. If load selects the record, the steps it keeps in
// step items are read (resolveSteps); otherwise they are left out (Steps
// nil). If its result is kept outside the item and load selects the record
// (and, for the blob store, the store has one), the result is read and
// checked (loadResultItem, loadLarge); otherwise the record is flagged
// ResultOmitted, its body not being at hand. Errors are the store's:
// ErrCorruptRecord, ErrLargeResult, or those of reading step items.
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
	wanted := load != nil && load(rec)
	if wanted && s.hasStepRefs(item) {
		if err := s.resolveSteps(ctx, op, item, &rec, nil); err != nil {
			return core.Record{}, err
		}
	}
	switch {
	case !has:
		return rec, nil
	case !wanted || !ref.inItem && s.large == nil:
		rec.ResultOmitted = true
		return rec, nil
	case ref.inItem:
		rec.Result, err = s.loadResultItem(ctx, op, rec, ref)
	default:
		rec.Result, err = s.loadLarge(ctx, op, ref)
	}
	if err != nil {
		return core.Record{}, err
	}
	rec.ResultOmitted = false
	return rec, nil
}

// refOf reads the reference of an item with status to its result kept
// outside it, if any: a blob store object's name, or a result item's
// reference. A reference that is incomplete, names both, or is on a record
// that is not succeeded, wraps ErrCorruptRecord.
func (s *Store) refOf(item map[string]types.AttributeValue, status core.Status) (largeRef, bool, error) {
	n := &s.names
	_, inBlob := item[n.ResultRef]
	_, inItem := item[n.ResultItem]
	if !inBlob && !inItem {
		return largeRef{}, false, nil
	}
	r := itemReader{item: item}
	ref := largeRef{name: r.str(n.ResultRef, inBlob), sum: r.str(n.ResultSHA256, true), encoding: r.str(n.ResultEncoding, false), inItem: inItem}
	if b := r.result(n.ResultItem, ""); inItem && len(b) != len(ref.item) && r.err == nil {
		r.fail("attribute %s is a reference of %d bytes, want %d", n.ResultItem, len(b), len(ref.item))
	} else {
		copy(ref.item[:], b)
	}
	size, ok := r.num(n.ResultSize)
	if !ok && r.err == nil {
		r.fail("attribute %s missing", n.ResultSize)
	}
	ref.size = size
	if r.err == nil && (inBlob && (inItem || ref.name == "") || len(ref.sum) != 64 || size <= 0 || status != core.StatusSucceeded) {
		r.fail("result reference of a %s record: object %q, item %x, %d bytes, SHA-256 %q", status, ref.name, ref.item[:], size, ref.sum)
	}
	return ref, r.err == nil, r.err
}

// loadLarge reads the object of ref, checks its size and SHA-256, and
// decodes it. A blob store that can bound a read (blob.LimitedGetter) reads
// no more than the recorded size and a byte: an object replaced by a far
// larger one is refused without being read whole.
func (s *Store) loadLarge(ctx context.Context, op string, ref largeRef) ([]byte, error) {
	var body []byte
	var err error
	if lg, ok := s.large.(blob.LimitedGetter); ok {
		body, err = lg.GetLimited(ctx, ref.name, ref.size)
	} else {
		body, err = s.large.Get(ctx, ref.name)
	}
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

// completion is a completed record as it is to be stored: its item, the
// record as stored, and where its result is kept outside the item, what
// must be written before it (writeApart): a result item (result), or a
// blob store object (object, its name, and body).
type completion struct {
	item   map[string]types.AttributeValue
	stored core.Record
	result *apart
	object string
	body   []byte
}

// fitComplete is fitItem, and keeps a succeeded result outside the record
// where keeping it in costs every later write of the record more: a result
// that makes the record pass a write unit (RecordUnit) it would not pass
// with a reference instead goes to a result item of its own; one that does
// not fit an item goes, with a blob store, to the blob store, and is
// omitted otherwise. It writes nothing: writeApart does, before the record.
func (s *Store) fitComplete(op string, rec core.Record) (completion, error) {
	if rec.Status != core.StatusSucceeded {
		item, stored, err := s.fitItem(op, rec)
		return completion{item: item, stored: stored}, err
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
		return completion{}, s.fail(op, ErrItemTooLarge, "record without result is %d bytes, at most %d", size, s.maxItem)
	}
	c := completion{item: item, stored: stored}
	kept := rec
	kept.ResultOmitted = false
	if len(body) == 0 {
		return c, nil
	}
	if a, fits := s.apartOf(stored, body, encoding); fits && (stored.ResultOmitted || units(a.record) < units(item)) {
		return completion{item: a.record, stored: kept, result: &a}, nil
	}
	if !stored.ResultOmitted || s.large == nil {
		return c, nil
	}
	largeItem, name, ok := s.largeItem(stored, body, encoding)
	if !ok {
		return c, nil // no room even for the reference: omitted, as without a blob store
	}
	return completion{item: largeItem, stored: kept, object: name, body: body}, nil
}

// writeApart writes what c keeps outside its record: its result item, or
// its blob store object. A failure is the store's error (ErrLargeResult
// for the blob store); the caller then writes no record.
func (s *Store) writeApart(ctx context.Context, op string, c completion) error {
	switch {
	case c.result != nil:
		return s.putResultItem(ctx, op, *c.result)
	case c.object != "":
		if err := s.large.Put(ctx, c.object, c.body); err != nil {
			return s.largeError(op, c.object, err)
		}
	}
	return nil
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
