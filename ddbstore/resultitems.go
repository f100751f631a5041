package ddbstore

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem/blob"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fit"
)

// AttrResultItem (B), on a succeeded record whose result is kept in an item
// of its own, is that item's 8-byte reference; AttrResultSHA256,
// AttrResultSize and AttrResultEncoding describe what it holds. Such a
// record also has AttrResultOmitted true, so that a release that does not
// know result items reads it as a success without its body, never as an
// empty one. WithAttributeNames renames it.
const AttrResultItem = "result_item"

// RecordUnit is the size, in bytes, that one write unit of the record
// covers: DynamoDB bills a write one unit per KB of the larger of the item
// before and after it, and a refused conditional write all the same. A
// result that would make a succeeded record pass a KB boundary it would not
// pass with a reference instead is kept in an item of its own (see
// Complete), so that every later write of the record (a refused duplicate,
// a reservation over it once it expires, a release) costs what the record
// without its result costs: one unit, where the key and the attribute
// names leave the record within RecordUnit (docs/dynamodb.md has the
// bound).
const RecordUnit = 1024

// resultSuffix separates the record's key from a result item's reference in
// the result item's key, as stepSuffix does for step items.
const resultSuffix = "#result#"

// resultKeyGrowth is what a result item's key adds to its record's.
const resultKeyGrowth = len(resultSuffix) + 2*stepRefSize

// resultRef names a result item: the first bytes of a SHA-256 over the
// lease token of the execution that wrote it, the result as stored, its
// encoding and its end of retention. An item's content is what its name
// says, so a retried completion writes the same item, and no other writer
// (a stale holder, an earlier lifetime of the key) writes one a record
// references.
type resultRef [stepRefSize]byte

// resultRefOf returns the reference of the result item of a completion
// under token, of body in encoding, ending at ttl (epoch seconds; 0: never).
func resultRefOf(token string, body []byte, encoding string, ttl int64) resultRef {
	return shortHash([]byte("idem/result/v1"), []byte(token), body, []byte(encoding), []byte(strconv.FormatInt(ttl, 10)))
}

// resultItemKey returns the primary key of key's result item ref (see
// childKey).
func (s *Store) resultItemKey(key string, ref resultRef) map[string]types.AttributeValue {
	return s.childKey(key, resultSuffix+hex.EncodeToString(ref[:]))
}

// resultFits reports whether key's result items fit DynamoDB's key limits.
func (s *Store) resultFits(key string) bool {
	if s.sortAttr == "" {
		return len(s.prefix)+len(key)+resultKeyGrowth <= maxKeyBytes
	}
	return len(s.sortKey(key))+resultKeyGrowth <= maxSortKeyBytes
}

// resultItem returns key's result item ref: its key, the result as stored
// (body, under the result attribute's name) and its end of retention (ttl,
// epoch seconds; none when 0), the record's.
func (s *Store) resultItem(key string, ref resultRef, body []byte, ttl int64) map[string]types.AttributeValue {
	item := s.resultItemKey(key, ref)
	item[s.names.Result] = &types.AttributeValueMemberB{Value: body}
	if ttl > 0 {
		item[s.ttlAttr] = num(ttl)
	}
	return item
}

// isResultItem reports whether item is one of the store's result items: its
// key (the partition key, or the sort key where the table has one) ends
// with resultSuffix and a reference, and it has no status.
func (l *layout) isResultItem(item map[string]types.AttributeValue) bool {
	return l.isChildItem(item, resultSuffix) && item[l.names.Result] != nil
}

// apart is a succeeded record whose result is kept in a result item: the
// record's item (with the reference), the result item, and its reference.
type apart struct {
	record, result map[string]types.AttributeValue
	ref            resultRef
}

// apartOf returns the items of stored, a succeeded record, whose result as
// stored is body in encoding, with the result in an item of its own; ok is
// false where the result item's key or either item would pass DynamoDB's
// limits.
func (s *Store) apartOf(stored core.Record, body []byte, encoding string) (a apart, ok bool) {
	if !s.resultFits(stored.Key) {
		return apart{}, false
	}
	n := &s.names
	var ttl int64
	if !stored.ExpiresAt.IsZero() {
		ttl = ceilSeconds(stored.ExpiresAt)
	}
	a.ref = resultRefOf(stored.LeaseToken, body, encoding, ttl)
	stored.Result, stored.ResultOmitted = nil, true // to a release without result items: a success without its body
	a.record = s.encode(stored, nil, "")
	a.record[n.ResultItem] = &types.AttributeValueMemberB{Value: a.ref[:]}
	a.record[n.ResultSHA256] = &types.AttributeValueMemberS{Value: blob.Sum(body)}
	a.record[n.ResultSize] = num(int64(len(body)))
	if encoding != "" {
		a.record[n.ResultEncoding] = &types.AttributeValueMemberS{Value: encoding}
	}
	a.result = s.resultItem(stored.Key, a.ref, body, ttl)
	return a, ItemSize(a.record) <= s.maxItem && ItemSize(a.result) <= s.maxItem
}

// units is the number of write units a write of item costs.
func units(item map[string]types.AttributeValue) int {
	return (ItemSize(item) + RecordUnit - 1) / RecordUnit
}

// putResultItem writes a's result item with one PutItem, unconditional: an
// item's content is what its key says (resultRefOf). A failure is the
// store's translated error; the caller writes no record after it.
func (s *Store) putResultItem(ctx context.Context, op string, a apart) error {
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.parts.table, Item: a.result}, s.calls.fns...)
	if err != nil {
		return s.translate(ctx, op, err).err
	}
	return nil
}

// loadResultItem reads the result item ref of rec, a live succeeded record
// whose result it keeps, with one consistent GetItem, and returns the
// result: the item must be there, end its retention with the record (so
// it is live while the record is: an expired result item is never read
// as one), and hold the size and SHA-256 the record recorded; anything
// else is ErrCorruptRecord (permanent), never other bytes.
func (s *Store) loadResultItem(ctx context.Context, op string, rec core.Record, ref largeRef) ([]byte, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.parts.table,
		Key: s.resultItemKey(rec.Key, ref.item), ConsistentRead: aws.Bool(true)}, s.calls.fns...)
	if err != nil {
		return nil, s.translate(ctx, op, err).err
	}
	r := itemReader{item: out.Item}
	body := r.result(s.names.Result, "")
	ttl, hasTTL := r.num(s.ttlAttr)
	switch {
	case len(out.Item) == 0:
		r.err = fmt.Errorf("%w: result item %x is missing", ErrCorruptRecord, ref.item[:])
	case r.err == nil && (hasTTL != !rec.ExpiresAt.IsZero() || hasTTL && ttl != ceilSeconds(rec.ExpiresAt)):
		r.fail("result item %x ends its retention at %d, not with its record", ref.item[:], ttl)
	case r.err == nil && (int64(len(body)) != ref.size || blob.Verify(body, ref.sum) != nil):
		r.fail("result item %x holds %d bytes that are not the result recorded (%d bytes, SHA-256 %s)", ref.item[:], len(body), ref.size, ref.sum)
	}
	var result []byte
	if r.err == nil {
		result, err = fit.Decode(body, ref.encoding)
		if err != nil {
			r.fail("result item %x: %v", ref.item[:], err)
		}
	}
	if r.err != nil {
		return nil, core.MarkPermanent(&Error{Op: op, Table: s.table, Err: r.err})
	}
	return result, nil
}
