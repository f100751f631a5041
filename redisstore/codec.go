package redisstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fit"
)

// Fields of a record's hash; the package documentation has the layout.
// Every write sends all of them (empty when unset), so that one HSET
// replaces the whole record.
const (
	fieldStatus        = "status"
	fieldToken         = "token"
	fieldFingerprint   = "fp"
	fieldAttempts      = "attempts"
	fieldLeaseUntil    = "lease_ms"
	fieldExpiresAt     = "exp_ms"
	fieldResult        = "result"
	fieldResultOmitted = "result_omitted"
	fieldRetryable     = "retryable"
	fieldError         = "error"
	fieldUpdatedAt     = "updated_ms"
	fieldEncoding      = "encoding"
)

// ceilMillis returns t in epoch milliseconds, rounded up: a stored end is
// never earlier than the record's.
func ceilMillis(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Nanosecond()%int(time.Millisecond) != 0 {
		ms++
	}
	return ms
}

// normalize returns rec with its times at the resolution the store keeps
// them: ExpiresAt and LeaseUntil rounded up to the millisecond, UpdatedAt
// truncated to it, all in UTC. Zero times stay zero. A record read back
// equals the normalized record written.
func normalize(rec core.Record) core.Record {
	if !rec.ExpiresAt.IsZero() {
		rec.ExpiresAt = time.UnixMilli(ceilMillis(rec.ExpiresAt)).UTC()
	}
	if !rec.LeaseUntil.IsZero() {
		rec.LeaseUntil = time.UnixMilli(ceilMillis(rec.LeaseUntil)).UTC()
	}
	if !rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = time.UnixMilli(rec.UpdatedAt.UnixMilli()).UTC()
	}
	return rec
}

// millis is a normalized time as a field value: "" for the zero time.
func millis(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

func boolField(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// encode returns the fields of rec, whose times must be normalized, as
// field, value, ... with the result as given (possibly compressed) in body.
func encode(rec core.Record, body []byte, encoding string) []any {
	return []any{
		fieldStatus, string(rec.Status),
		fieldToken, rec.LeaseToken,
		fieldFingerprint, rec.Fingerprint,
		fieldAttempts, strconv.Itoa(rec.Attempts),
		fieldLeaseUntil, millis(rec.LeaseUntil),
		fieldExpiresAt, millis(rec.ExpiresAt),
		fieldResult, body,
		fieldResultOmitted, boolField(rec.ResultOmitted),
		fieldRetryable, boolField(rec.Retryable),
		fieldError, rec.Error,
		fieldUpdatedAt, millis(rec.UpdatedAt),
		fieldSteps, encodeSteps(rec.Steps),
		fieldEncoding, encoding,
	}
}

// recordSize is the size the store counts against its limit: the key name
// plus every field's name and value.
func recordSize(name string, fields []any) int {
	n := len(name)
	for _, f := range fields {
		switch v := f.(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		}
	}
	return n
}

// decode returns the record of key from its hash. A malformed hash gives an
// error wrapping ErrCorruptRecord.
func decode(key string, h map[string]string) (core.Record, error) {
	rec := core.Record{
		Key:         key,
		Status:      core.Status(h[fieldStatus]),
		LeaseToken:  h[fieldToken],
		Fingerprint: h[fieldFingerprint],
		Error:       h[fieldError],
	}
	if !rec.Status.Valid() {
		return core.Record{}, fmt.Errorf("%w: status %q", ErrCorruptRecord, h[fieldStatus])
	}
	attempts, err := strconv.Atoi(h[fieldAttempts])
	if err != nil {
		return core.Record{}, fmt.Errorf("%w: attempts: %v", ErrCorruptRecord, err)
	}
	rec.Attempts = attempts
	for _, t := range []struct {
		field string
		dst   *time.Time
	}{{fieldLeaseUntil, &rec.LeaseUntil}, {fieldExpiresAt, &rec.ExpiresAt}, {fieldUpdatedAt, &rec.UpdatedAt}} {
		if v := h[t.field]; v != "" {
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return core.Record{}, fmt.Errorf("%w: %s: %v", ErrCorruptRecord, t.field, err)
			}
			*t.dst = time.UnixMilli(ms).UTC()
		}
	}
	if rec.Retryable, err = parseFlag(h, fieldRetryable); err != nil {
		return core.Record{}, err
	}
	if rec.ResultOmitted, err = parseFlag(h, fieldResultOmitted); err != nil {
		return core.Record{}, err
	}
	if rec.Result, err = decodeResult(h[fieldResult], h[fieldEncoding]); err != nil {
		return core.Record{}, err
	}
	if rec.Steps, err = decodeSteps(h[fieldSteps]); err != nil {
		return core.Record{}, err
	}
	return rec, nil
}

func parseFlag(h map[string]string, field string) (bool, error) {
	switch h[field] {
	case "", "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, fmt.Errorf("%w: %s is %q, want 0 or 1", ErrCorruptRecord, field, h[field])
}

func decodeResult(body, encoding string) ([]byte, error) {
	if body == "" {
		return nil, nil
	}
	b, err := fit.Decode([]byte(body), encoding)
	if err != nil {
		return nil, fmt.Errorf("%w: result: %v", ErrCorruptRecord, err)
	}
	return b, nil
}

// decodeFlat decodes a script's answer after its verdict: field, value, ...
// An empty list is no record (found is false).
func decodeFlat(key string, flat []any) (rec core.Record, found bool, err error) {
	if len(flat) == 0 {
		return core.Record{}, false, nil
	}
	if len(flat)%2 != 0 {
		return core.Record{}, false, fmt.Errorf("%w: odd number of hash elements", ErrCorruptRecord)
	}
	h := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, ok1 := flat[i].(string)
		v, ok2 := flat[i+1].(string)
		if !ok1 || !ok2 {
			return core.Record{}, false, fmt.Errorf("%w: hash element of type %T", ErrCorruptRecord, flat[i+1])
		}
		h[k] = v
	}
	rec, err = decode(key, h)
	return rec, err == nil, err
}
