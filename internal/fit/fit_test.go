package fit

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/idemgo/idem/core"
)

// encodeLen encodes a record as its result body and error, with its size.
func encodeLen(rec core.Record, body []byte, encoding string) (string, int) {
	return encoding + ":" + string(body) + rec.Error, len(body) + len(rec.Error) + 10
}

func TestRecord(t *testing.T) {
	compressible := bytes.Repeat([]byte("abcdefgh"), 1000)
	random := make([]byte, 5000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	for _, tc := range []struct {
		name                string
		rec                 core.Record
		compressAbove, max  int
		wantOmitted, wantOK bool
		wantEncoding        string
		wantTruncated       bool
	}{
		{name: "small stays as it is", rec: core.Record{Result: []byte("ok")}, compressAbove: 100, max: 100, wantOK: true},
		{name: "large compresses", rec: core.Record{Result: compressible}, compressAbove: 100, max: 1000, wantOK: true, wantEncoding: Gzip},
		{name: "compression off: omitted", rec: core.Record{Result: compressible}, compressAbove: NoCompression, max: 1000, wantOK: true, wantOmitted: true},
		{name: "incompressible: omitted", rec: core.Record{Result: random}, compressAbove: 100, max: 1000, wantOK: true, wantOmitted: true},
		{name: "error shortened", rec: core.Record{Status: core.StatusFailed, Error: strings.Repeat("é", 1000)}, compressAbove: 100, max: 500, wantOK: true, wantTruncated: true},
		{name: "nothing fits", rec: core.Record{}, compressAbove: 100, max: 5, wantOK: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc, stored, size, ok := Record(tc.rec, tc.compressAbove, tc.max, encodeLen)
			if ok != tc.wantOK || stored.ResultOmitted != tc.wantOmitted || (ok && size > tc.max) {
				t.Fatalf("ok %v omitted %v size %d, want ok %v omitted %v within %d", ok, stored.ResultOmitted, size, tc.wantOK, tc.wantOmitted, tc.max)
			}
			if !strings.HasPrefix(enc, tc.wantEncoding+":") {
				t.Errorf("encoding of %q, want %q", enc[:min(10, len(enc))], tc.wantEncoding)
			}
			if tc.wantTruncated && (!strings.HasSuffix(stored.Error, "…(truncated)") || !utf8Valid(stored.Error)) {
				t.Errorf("error = %q, want a valid shortened message", stored.Error)
			}
		})
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestDecodeRoundTrip(t *testing.T) {
	b := bytes.Repeat([]byte("xyz"), 500)
	got, err := Decode(gzipBody(b), Gzip)
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("Decode(gzip) = %d bytes, %v", len(got), err)
	}
	if _, err := Decode([]byte("not gzip"), Gzip); err == nil {
		t.Error("Decode of a broken gzip body succeeded")
	}
	if _, err := Decode(nil, "zstd"); err == nil {
		t.Error("Decode of an unknown encoding succeeded")
	}
	if err := CheckThreshold(-2); err == nil || CheckThreshold(NoCompression) != nil || CheckThreshold(0) != nil {
		t.Error("CheckThreshold")
	}
}
