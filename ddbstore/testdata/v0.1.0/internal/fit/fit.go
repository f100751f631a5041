// Package fit is the size policy the stores share: a completed record is
// stored within the store's size limit without losing its outcome. Its result
// is compressed when that makes it smaller; if the record is still too large,
// a succeeded record is kept without its result (ResultOmitted) and a failed
// record's error message is shortened.
package fit

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/idemgo/idem/core"
)

// Gzip is the encoding name of a gzip-compressed result.
const Gzip = "gzip"

// NoCompression as a threshold turns compression off.
const NoCompression = -1

// CheckThreshold validates a compression threshold: at least 0, or
// NoCompression.
func CheckThreshold(n int) error {
	if n < 0 && n != NoCompression {
		return fmt.Errorf("compression threshold %d must be at least 0, or NoCompression", n)
	}
	return nil
}

// Encode encodes rec with the result body in encoding ("" or Gzip) and
// returns the encoded form and its size as the store counts it.
type Encode[T any] func(rec core.Record, body []byte, encoding string) (T, int)

// Record returns rec encoded within max, and rec as stored. It compresses a
// result longer than compressAbove (NoCompression: never) when that makes it
// smaller; drops a result that still does not fit; shortens the error
// message last. ok is false, with the size reached, if even that does not fit.
func Record[T any](rec core.Record, compressAbove, max int, encode Encode[T]) (enc T, stored core.Record, size int, ok bool) {
	body, encoding := rec.Result, ""
	if compressAbove >= 0 && len(body) > compressAbove {
		if z := gzipBody(body); len(z) < len(body) {
			body, encoding = z, Gzip
		}
	}
	if len(rec.Result) == 0 {
		rec.Result = nil
	}
	enc, size = encode(rec, body, encoding)
	if size <= max {
		return enc, rec, size, true
	}
	if len(body) > 0 {
		rec.Result, rec.ResultOmitted = nil, true
		enc, size = encode(rec, nil, "")
	}
	if size > max && rec.Error != "" {
		const mark = " …(truncated)"
		keep := len(rec.Error) - (size - max) - len(mark)
		rec.Error = truncateUTF8(rec.Error, keep) + mark
		enc, size = encode(rec, nil, "")
	}
	return enc, rec, size, size <= max
}

// Decode returns the result body stored in encoding.
func Decode(body []byte, encoding string) ([]byte, error) {
	switch encoding {
	case "":
		return body, nil
	case Gzip:
		return gunzip(body)
	}
	return nil, fmt.Errorf("unknown result encoding %q", encoding)
}

func gzipBody(b []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(b) / 4)
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b) // writes to a bytes.Buffer do not fail
	_ = zw.Close()
	return buf.Bytes()
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	if err := zr.Close(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// truncateUTF8 returns s cut to at most n bytes on a rune boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
