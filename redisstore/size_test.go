package redisstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fit"
)

func mib(compressible bool) []byte {
	if compressible {
		return bytes.Repeat([]byte(`{"line":"a fairly repetitive JSON body"},`), (1<<20)/41+1)[:1<<20]
	}
	b := make([]byte, 1<<20)
	_, _ = rand.Read(b)
	return b
}

// TestFit is the size policy without a server: compress when that helps,
// else drop a succeeded record's result, else shorten a failed record's
// message; never fail a completion for size.
func TestFit(t *testing.T) {
	t.Parallel()
	s, err := New(fakeClient{}, WithMaxRecordSize(MinRecordSize))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	reserved := reservation("evt:1:charge", "tok-a", now, time.Minute)
	long := strings.Repeat("é", 5000) // 10,000 bytes of two-byte runes
	for _, tc := range []struct {
		name         string
		rec          core.Record
		wantEncoding string
		wantOmitted  bool
		wantError    func(string) bool
	}{
		{"small result kept raw", core.Succeed(reserved, []byte(`{"ok":true}`), now, time.Hour), "", false, nil},
		{"compressible result compressed", core.Succeed(reserved, bytes.Repeat([]byte("ab"), 3000), now, time.Hour), fit.Gzip, false, nil},
		{"incompressible result omitted", core.Succeed(reserved, mib(false)[:8000], now, time.Hour), "", true, nil},
		{"empty result", core.Succeed(reserved, []byte{}, now, time.Hour), "", false, nil},
		{"long error shortened", core.Fail(reserved, errors.New(long), false, now, time.Hour), "", false, func(msg string) bool {
			return strings.HasSuffix(msg, " …(truncated)") && utf8.ValidString(msg) && len(msg) < len(long)
		}},
	} {
		rec := normalize(tc.rec)
		fields, stored, err := s.fit("complete", s.Name(rec.Key), rec)
		if err != nil {
			t.Errorf("%s: fit = %v", tc.name, err)
			continue
		}
		if size := recordSize(s.Name(rec.Key), fields); size > MinRecordSize {
			t.Errorf("%s: record of %d bytes, limit %d", tc.name, size, MinRecordSize)
		}
		if got := fields[len(fields)-1]; got != tc.wantEncoding {
			t.Errorf("%s: encoding = %q, want %q", tc.name, got, tc.wantEncoding)
		}
		if stored.ResultOmitted != tc.wantOmitted || stored.Status != rec.Status {
			t.Errorf("%s: stored %v omitted=%v, want status %s omitted=%v", tc.name, stored, stored.ResultOmitted, rec.Status, tc.wantOmitted)
		}
		if !tc.wantOmitted && !bytes.Equal(stored.Result, rec.Result) {
			t.Errorf("%s: stored result differs from the record's", tc.name)
		}
		if tc.wantError != nil && !tc.wantError(stored.Error) {
			t.Errorf("%s: stored error %q... not shortened as expected", tc.name, stored.Error[:min(40, len(stored.Error))])
		}
	}
}

// TestLargeResults: a 1 MiB result is kept compressed when it compresses
// below the limit, and otherwise the outcome is kept without it; a
// duplicate is answered from the record in both cases.
func TestLargeResults(t *testing.T) {
	t.Parallel()
	integration(t)
	client := newClient(t, "", nil)
	s := newStore(t, client)
	ctx := context.Background()
	now := time.Now()
	for _, tc := range []struct {
		name         string
		result       []byte
		wantOmitted  bool
		wantEncoding string
	}{
		{"compressible", mib(true), false, fit.Gzip},
		{"incompressible", mib(false), true, ""},
	} {
		rec := reservation("evt:"+tc.name, "tok-a", now, time.Minute)
		if err := s.Reserve(ctx, rec, nil, now); err != nil {
			t.Fatal(err)
		}
		done, err := s.Complete(ctx, core.Succeed(rec, tc.result, now, time.Hour))
		if err != nil {
			t.Fatalf("%s: Complete = %v", tc.name, err)
		}
		if done.Status != core.StatusSucceeded || done.ResultOmitted != tc.wantOmitted {
			t.Errorf("%s: Complete = %v omitted=%v, want succeeded omitted=%v", tc.name, done, done.ResultOmitted, tc.wantOmitted)
		}
		if enc := client.HGet(ctx, s.Name(rec.Key), fieldEncoding).Val(); enc != tc.wantEncoding {
			t.Errorf("%s: stored encoding %q, want %q", tc.name, enc, tc.wantEncoding)
		}
		if n := client.HStrLen(ctx, s.Name(rec.Key), fieldResult).Val(); n > DefaultMaxRecordSize {
			t.Errorf("%s: stored result of %d bytes, limit %d", tc.name, n, DefaultMaxRecordSize)
		}
		err = s.Reserve(ctx, reservation(rec.Key, "tok-b", now, time.Minute), nil, now)
		var ce *idem.ConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: duplicate Reserve = %v, want a conflict", tc.name, err)
		}
		got := ce.Existing
		if got.Status != core.StatusSucceeded || got.ResultOmitted != tc.wantOmitted ||
			(!tc.wantOmitted && !bytes.Equal(got.Result, tc.result)) || (tc.wantOmitted && got.Result != nil) {
			t.Errorf("%s: duplicate sees %v omitted=%v result of %d bytes", tc.name, got, got.ResultOmitted, len(got.Result))
		}
	}
}

// TestLongErrorKept: a failure with a 1 MiB message is stored, shortened.
func TestLongErrorKept(t *testing.T) {
	t.Parallel()
	integration(t)
	s := newStore(t, newClient(t, "", nil))
	ctx := context.Background()
	now := time.Now()
	rec := reservation("evt:long-error", "tok-a", now, time.Minute)
	if err := s.Reserve(ctx, rec, nil, now); err != nil {
		t.Fatal(err)
	}
	msg := strings.Repeat("€", 1<<20/3)
	if _, err := s.Complete(ctx, core.Fail(rec, errors.New(msg), false, now, time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, rec.Key, now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != core.StatusFailed || !strings.HasSuffix(got.Error, " …(truncated)") ||
		!utf8.ValidString(got.Error) || len(got.Error) > DefaultMaxRecordSize {
		t.Errorf("Get = %v with an error of %d bytes, want the failure with its message shortened", got, len(got.Error))
	}
}

// TestTooLarge: what cannot be stored at all is refused before any call.
func TestTooLarge(t *testing.T) {
	t.Parallel()
	s, err := New(fakeClient{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	huge := reservation("evt:1:charge", strings.Repeat("t", DefaultMaxRecordSize), now, time.Minute)
	assertErr(t, "Reserve with a huge token", s.Reserve(ctx, huge, nil, now), ErrRecordTooLarge, false)
	long := strings.Repeat("k", MaxKeySize+1)
	assertErr(t, "Reserve of a long key", s.Reserve(ctx, reservation(long, "tok", now, time.Minute), nil, now), ErrKeyTooLarge, false)
	assertErr(t, "Reserve of an empty key", s.Reserve(ctx, reservation("", "tok", now, time.Minute), nil, now), ErrKeyTooLarge, false)
	_, err = s.Get(ctx, long, now)
	assertErr(t, "Get of a long key", err, ErrKeyTooLarge, false)
	_, err = s.Complete(ctx, core.Succeed(huge, nil, now, time.Hour))
	assertErr(t, "Complete with a huge token", err, ErrRecordTooLarge, false)
}
