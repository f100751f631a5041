package ddbstore

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fit"
)

// Default names of the record's attributes other than the key and the TTL
// attribute (WithKeyAttribute, WithTTLAttribute); WithAttributeNames renames
// them. The package documentation has the whole layout.
const (
	// AttrStatus (S) is the record's status: in_progress, succeeded or failed.
	AttrStatus = "status"
	// AttrFingerprint (S) is the hex SHA-256 of the canonical payload.
	AttrFingerprint = "fingerprint"
	// AttrLeaseToken (S) is the fencing token of the lease that wrote the
	// record, kept after completion.
	AttrLeaseToken = "lease_token"
	// AttrLeaseUntil (N) is the end of an in-progress record's lease, in
	// epoch milliseconds, rounded up.
	AttrLeaseUntil = "lease_until_ms"
	// AttrAttempts (N) is the number of executions started for the key.
	AttrAttempts = "attempts"
	// AttrAttemptsCarried (N), on in-progress records and retryable
	// failures only, equals AttrAttempts: the count a one-write reservation
	// (Store.Acquire) continues from. Records a new execution restarts from
	// (succeeded, permanent failures) do not have it.
	AttrAttemptsCarried = "attempts_carried"
	// AttrRetryable (BOOL), on failed records, is true when a later delivery
	// may execute again.
	AttrRetryable = "retryable"
	// AttrError (S), on failed records, is the handler error's message.
	AttrError = "error"
	// AttrResult (B), on succeeded records, is the result, raw or
	// compressed; absent when empty or omitted.
	AttrResult = "result"
	// AttrResultEncoding (S) is "gzip" when AttrResult is compressed, and
	// absent when it is raw.
	AttrResultEncoding = "result_encoding"
	// AttrResultOmitted (BOOL) is present and true when a succeeded record's
	// result was too large to keep.
	AttrResultOmitted = "result_omitted"
	// AttrUpdatedAt (N) is the time of the record's last write, in epoch
	// milliseconds.
	AttrUpdatedAt = "updated_at_ms"
)

// ceilSeconds returns t in epoch seconds, rounded up: the stored end of
// retention is never earlier than the record's.
func ceilSeconds(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// ceilMillis returns t in epoch milliseconds, rounded up: the stored end of
// a lease is never earlier than the record's.
func ceilMillis(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Nanosecond()%int(time.Millisecond) != 0 {
		ms++
	}
	return ms
}

// normalize returns rec with its times at the resolution the table keeps
// them: ExpiresAt rounded up to the second, LeaseUntil rounded up to the
// millisecond, UpdatedAt truncated to the millisecond, all in UTC. Zero
// times stay zero. A record read back from the table equals the normalized
// record written.
func normalize(rec core.Record) core.Record {
	if !rec.ExpiresAt.IsZero() {
		rec.ExpiresAt = time.Unix(ceilSeconds(rec.ExpiresAt), 0).UTC()
	}
	if !rec.LeaseUntil.IsZero() {
		rec.LeaseUntil = time.UnixMilli(ceilMillis(rec.LeaseUntil)).UTC()
	}
	if !rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = time.UnixMilli(rec.UpdatedAt.UnixMilli()).UTC()
	}
	return rec
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// encode returns the item of rec, whose times must be normalized, with the
// result as given (possibly compressed) in body and its encoding. The item
// has the layout's primary key and attribute names.
func (s *Store) encode(rec core.Record, body []byte, encoding string) map[string]types.AttributeValue {
	n := &s.names
	item := s.keyOf(rec.Key)
	item[n.Status] = &types.AttributeValueMemberS{Value: string(rec.Status)}
	item[n.Attempts] = num(int64(rec.Attempts))
	if carriesAttempts(rec) {
		item[n.AttemptsCarried] = num(int64(rec.Attempts))
	}
	if rec.Fingerprint != "" {
		item[n.Fingerprint] = &types.AttributeValueMemberS{Value: rec.Fingerprint}
	}
	if rec.LeaseToken != "" {
		item[n.LeaseToken] = &types.AttributeValueMemberS{Value: rec.LeaseToken}
	}
	if rec.Status == core.StatusInProgress || !rec.LeaseUntil.IsZero() {
		// An in-progress record always has a lease end, even a zero one
		// (which has ended, as core.Record.LeaseExpired says).
		item[n.LeaseUntil] = num(ceilMillis(rec.LeaseUntil))
	}
	if !rec.ExpiresAt.IsZero() {
		item[s.ttlAttr] = num(ceilSeconds(rec.ExpiresAt))
	}
	if !rec.UpdatedAt.IsZero() {
		item[n.UpdatedAt] = num(rec.UpdatedAt.UnixMilli())
	}
	if rec.Status == core.StatusFailed || rec.Retryable {
		item[n.Retryable] = &types.AttributeValueMemberBOOL{Value: rec.Retryable}
	}
	if rec.Error != "" {
		item[n.Error] = &types.AttributeValueMemberS{Value: rec.Error}
	}
	if len(body) > 0 {
		item[n.Result] = &types.AttributeValueMemberB{Value: body}
		if encoding != "" {
			item[n.ResultEncoding] = &types.AttributeValueMemberS{Value: encoding}
		}
	}
	if rec.ResultOmitted {
		item[n.ResultOmitted] = &types.AttributeValueMemberBOOL{Value: true}
	}
	s.encodeSteps(item, rec.Steps)
	return item
}

// carriesAttempts reports whether rec's item has AttrAttemptsCarried: an
// in-progress record or a retryable failure, whose attempt count the next
// execution continues while the record lives.
func carriesAttempts(rec core.Record) bool {
	return rec.Status == core.StatusInProgress || rec.Status == core.StatusFailed && rec.Retryable
}

// decode returns the record of a stored item, its key without the
// layout's prefix. A malformed item, or one whose key lacks the prefix,
// gives an error wrapping ErrCorruptRecord.
func (s *Store) decode(item map[string]types.AttributeValue) (core.Record, error) {
	n := &s.names
	r := itemReader{item: item}
	key, ok := strings.CutPrefix(r.str(s.keyAttr, true), s.prefix)
	if !ok {
		r.fail("attribute %s lacks the key prefix", s.keyAttr)
	}
	rec := core.Record{
		Key:           key,
		Status:        core.Status(r.str(n.Status, true)),
		Fingerprint:   r.str(n.Fingerprint, false),
		LeaseToken:    r.str(n.LeaseToken, false),
		Error:         r.str(n.Error, false),
		Retryable:     r.boolean(n.Retryable),
		ResultOmitted: r.boolean(n.ResultOmitted),
	}
	if ms, ok := r.num(n.LeaseUntil); ok {
		rec.LeaseUntil = time.UnixMilli(ms).UTC()
	}
	if sec, ok := r.num(s.ttlAttr); ok {
		rec.ExpiresAt = time.Unix(sec, 0).UTC()
	}
	if ms, ok := r.num(n.UpdatedAt); ok {
		rec.UpdatedAt = time.UnixMilli(ms).UTC()
	}
	if a, ok := r.num(n.Attempts); ok {
		rec.Attempts = int(a)
	}
	rec.Result = r.result(n.Result, r.str(n.ResultEncoding, false))
	rec.Steps = r.steps(n.Steps)
	if r.err != nil {
		return core.Record{}, r.err
	}
	return rec, nil
}

// itemReader reads typed attributes of an item, keeping the first error
// (ErrCorruptRecord) and answering zero values after it.
type itemReader struct {
	item map[string]types.AttributeValue
	err  error
}

func (r *itemReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrCorruptRecord}, args...)...)
	}
}

func (r *itemReader) str(name string, required bool) string {
	av, ok := r.item[name]
	if !ok {
		if required {
			r.fail("attribute %s missing", name)
		}
		return ""
	}
	v, ok := av.(*types.AttributeValueMemberS)
	if !ok {
		r.fail("attribute %s is %T, want S", name, av)
		return ""
	}
	return v.Value
}

func (r *itemReader) num(name string) (int64, bool) {
	av, ok := r.item[name]
	if !ok {
		return 0, false
	}
	v, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		r.fail("attribute %s is %T, want N", name, av)
		return 0, false
	}
	x, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		r.fail("attribute %s: %v", name, err)
	}
	return x, err == nil
}

func (r *itemReader) boolean(name string) bool {
	av, ok := r.item[name]
	if !ok {
		return false
	}
	v, ok := av.(*types.AttributeValueMemberBOOL)
	if !ok {
		r.fail("attribute %s is %T, want BOOL", name, av)
		return false
	}
	return v.Value
}

// result reads the stored result, attribute name, in its encoding (nil if
// there is none).
func (r *itemReader) result(name, encoding string) []byte {
	av, ok := r.item[name]
	if !ok {
		return nil
	}
	b, ok := av.(*types.AttributeValueMemberB)
	if !ok {
		r.fail("attribute %s is %T, want B", name, av)
		return nil
	}
	out, err := fit.Decode(b.Value, encoding)
	if err != nil {
		r.fail("result: %v", err)
	}
	return out
}

// ItemSize returns the size of item as DynamoDB counts it against its item
// size limit: for each attribute, the UTF-8 length of its name plus the size
// of its value (strings: UTF-8 length; binary: length; numbers: one byte per
// two significant digits plus one, rounded up here; booleans and nulls: one
// byte; lists and maps: three bytes plus one per element plus their
// elements). Numbers are over-estimated by up to two bytes, never under.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, av := range item {
		n += len(name) + valueSize(av)
	}
	return n
}

func valueSize(av types.AttributeValue) int {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

// numberSize over-estimates a number's stored size: every character of its
// text counted as a digit, two per byte, plus one byte, plus one for a sign.
func numberSize(s string) int {
	return (len(s)+1)/2 + 2
}
