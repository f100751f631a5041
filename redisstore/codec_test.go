package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fit"
)

// fieldMap is the hash HSET makes of encode's fields.
func fieldMap(fields []any) map[string]string {
	h := map[string]string{}
	for i := 0; i < len(fields); i += 2 {
		switch v := fields[i+1].(type) {
		case string:
			h[fields[i].(string)] = v
		case []byte:
			h[fields[i].(string)] = string(v)
		}
	}
	return h
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 10, 0, 0, 123_456_789, time.UTC)
	reserved := core.Reserve("evt:1:charge", fp, "tok-a", nil, now, now.Add(30*time.Second+400*time.Microsecond), time.Hour)
	for _, tc := range []struct {
		name string
		rec  core.Record
	}{
		{"in progress", reserved},
		{"succeeded", core.Succeed(reserved, []byte("\x00\xffbinary"), now, time.Hour)},
		{"succeeded, omitted", func() core.Record {
			r := core.Succeed(reserved, nil, now, time.Hour)
			r.ResultOmitted = true
			return r
		}()},
		{"retryable failure", core.Fail(reserved, errors.New("throttled"), true, now, time.Hour)},
		{"no retention end", func() core.Record { r := reserved; r.ExpiresAt = time.Time{}; return r }()},
	} {
		rec := normalize(tc.rec)
		got, err := decode(rec.Key, fieldMap(encode(rec, rec.Result, "")))
		if err != nil || !sameRecord(got, rec) {
			t.Errorf("%s: decode(encode) = %v, %v; want %v", tc.name, got, err, rec)
		}
	}
	// Normalizing never moves an end earlier, nor the write's time later.
	n := normalize(reserved)
	if n.LeaseUntil.Before(reserved.LeaseUntil) || n.ExpiresAt.Before(reserved.ExpiresAt) || n.UpdatedAt.After(reserved.UpdatedAt) {
		t.Errorf("normalize(%v) = %v", reserved, n)
	}
}

func TestDecodeCorrupt(t *testing.T) {
	t.Parallel()
	valid := func() map[string]string {
		return map[string]string{fieldStatus: "in_progress", fieldAttempts: "1", fieldToken: "tok", fieldLeaseUntil: "1000"}
	}
	for _, tc := range []struct {
		name  string
		field string
		value string
	}{
		{"no status", fieldStatus, ""},
		{"unknown status", fieldStatus, "done"},
		{"no attempts", fieldAttempts, ""},
		{"attempts not a number", fieldAttempts, "one"},
		{"lease not a number", fieldLeaseUntil, "soon"},
		{"expiry out of range", fieldExpiresAt, "99999999999999999999"},
		{"flag neither 0 nor 1", fieldRetryable, "yes"},
		{"omitted flag neither 0 nor 1", fieldResultOmitted, "true"},
		{"unknown encoding", fieldEncoding, "zstd"},
		{"damaged gzip", fieldEncoding, fit.Gzip},
	} {
		h := valid()
		h[tc.field] = tc.value
		if tc.field == fieldEncoding {
			h[fieldResult] = "not compressed"
		}
		if _, err := decode("k", h); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: decode = %v, want ErrCorruptRecord", tc.name, err)
		}
	}
	if _, _, err := decodeFlat("k", []any{"status"}); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("decodeFlat(odd list) = %v, want ErrCorruptRecord", err)
	}
	if _, found, err := decodeFlat("k", nil); found || err != nil {
		t.Errorf("decodeFlat(empty) = %v, %v; want not found", found, err)
	}
	if _, _, err := parseAnswer("reserve", "OK"); !errors.Is(err, ErrRejected) {
		t.Errorf("parseAnswer(not a list) = %v, want ErrRejected", err)
	}
}
