package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// Fingerprint returns the hex SHA-256 of the canonical form of the JSON
// payload: object keys sorted, insignificant whitespace removed, numbers kept
// exactly as sent (1.0 and 1 differ), strings re-encoded without HTML
// escaping. An empty payload has the empty fingerprint, which matches only
// another empty payload. Invalid JSON, a duplicate object key or trailing
// data gives an error wrapping ErrInvalidPayload. Fingerprint is safe for
// concurrent use.
func Fingerprint(payload []byte) (string, error) {
	if len(bytes.TrimSpace(payload)) == 0 {
		return "", nil
	}
	c := canonPool.Get().(*canonicalizer)
	defer c.release()
	if cap(c.out) < len(payload) {
		c.out = make([]byte, 0, len(payload)+len(payload)/8)
	}
	canon, err := c.run(payload, c.out[:0])
	if err != nil {
		return "", err
	}
	c.out = canon
	sum := sha256.Sum256(canon)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return string(h[:]), nil
}

// Canonicalize returns the canonical form of a JSON document, the input of
// Fingerprint: RFC 8259 JSON with object members sorted by their decoded
// keys (byte-wise), no insignificant whitespace, numbers as sent, and strings
// re-encoded as encoding/json encodes them with HTML escaping off (invalid
// UTF-8 coerced to U+FFFD, U+2028 and U+2029 escaped). Errors wrap
// ErrInvalidPayload. Canonicalize is safe for concurrent use.
func Canonicalize(payload []byte) ([]byte, error) {
	c := canonPool.Get().(*canonicalizer)
	defer c.release()
	pooled := c.out
	canon, err := c.run(payload, make([]byte, 0, len(payload)))
	c.out = pooled // the result belongs to the caller: never reuse it
	return canon, err
}

var errDuplicateKey = errors.New("duplicate object key")

// canonicalizer is a one-pass JSON validator and canonicalizer. It is not
// safe for concurrent use; Fingerprint and Canonicalize take one from
// canonPool per call.
type canonicalizer struct {
	in      []byte   // the document
	pos     int      // the next byte of in to read
	out     []byte   // the canonical form written so far
	members []member // the members of the objects being read, innermost last
	scratch []byte   // a copy of an object's members while they are reordered
	str     []byte   // a decoded string value that needed unescaping
	keys    []byte   // decoded object keys that needed unescaping
}

// member is an object member whose canonical text (key, colon, value) is
// out[start:end]. Its decoded key is in[ks:ke], or, for a key that needed
// unescaping, keys[-ks-1:-ke-1]. It holds no pointers, so that keeping
// and sorting members costs no write barriers.
type member struct {
	ks, ke     int
	start, end int
}

// key returns m's decoded key.
func (c *canonicalizer) key(m member) []byte {
	if m.ks >= 0 {
		return c.in[m.ks:m.ke]
	}
	return c.keys[-m.ks-1 : -m.ke-1]
}

// maxPooledBuf bounds the buffers a canonicalizer keeps for reuse.
const maxPooledBuf = 256 << 10

var canonPool = sync.Pool{New: func() any { return new(canonicalizer) }}

func (c *canonicalizer) release() {
	c.in = nil
	c.members = c.members[:0]
	c.keys = c.keys[:0]
	if cap(c.out) > maxPooledBuf {
		c.out = nil
	}
	if cap(c.scratch) > maxPooledBuf {
		c.scratch = nil
	}
	if cap(c.str) > maxPooledBuf {
		c.str = nil
	}
	if cap(c.keys) > maxPooledBuf {
		c.keys = nil
	}
	if cap(c.members) > maxPooledBuf/32 {
		c.members = nil
	}
	canonPool.Put(c)
}

// run canonicalizes in, appending to out.
func (c *canonicalizer) run(in, out []byte) ([]byte, error) {
	c.in, c.pos, c.out, c.keys = in, 0, out, c.keys[:0]
	c.skipSpace()
	if err := c.value(); err != nil {
		return nil, err
	}
	c.skipSpace()
	if c.pos < len(c.in) {
		return nil, fmt.Errorf("%w: trailing data after the JSON value", ErrInvalidPayload)
	}
	return c.out, nil
}

// syntaxError describes the byte at i, or the end of the document.
func (c *canonicalizer) syntaxError(i int, context string) error {
	if i >= len(c.in) {
		return fmt.Errorf("%w: unexpected end of JSON input", ErrInvalidPayload)
	}
	return fmt.Errorf("%w: invalid character %q at offset %d %s", ErrInvalidPayload, rune(c.in[i]), i, context)
}

func (c *canonicalizer) skipSpace() {
	in, i := c.in, c.pos
	for i < len(in) && in[i] <= ' ' && (in[i] == ' ' || in[i] == '\t' || in[i] == '\n' || in[i] == '\r') {
		i++
	}
	c.pos = i
}

// expect consumes b, or fails.
func (c *canonicalizer) expect(b byte, context string) error {
	if c.pos >= len(c.in) || c.in[c.pos] != b {
		return c.syntaxError(c.pos, context)
	}
	c.pos++
	return nil
}

func (c *canonicalizer) value() error {
	if c.pos >= len(c.in) {
		return c.syntaxError(c.pos, "")
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		return c.object()
	case b == '[':
		return c.array()
	case b == '"':
		_, _, err := c.string(false)
		return err
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	case b == '-' || '0' <= b && b <= '9':
		return c.number()
	}
	return c.syntaxError(c.pos, "looking for beginning of value")
}

func (c *canonicalizer) literal(lit string) error {
	for i := 0; i < len(lit); i++ {
		if c.pos+i >= len(c.in) || c.in[c.pos+i] != lit[i] {
			return c.syntaxError(c.pos+i, "in literal "+lit)
		}
	}
	c.out = append(c.out, lit...)
	c.pos += len(lit)
	return nil
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

// number copies a number as sent, after checking it against JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (c *canonicalizer) number() error {
	in, i := c.in, c.pos
	if in[i] == '-' {
		i++
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && '1' <= in[i] && in[i] <= '9':
		for i++; i < len(in) && isDigit(in[i]); i++ {
		}
	default:
		return c.syntaxError(i, "in numeric literal")
	}
	if i < len(in) && in[i] == '.' {
		i++
		if i >= len(in) || !isDigit(in[i]) {
			return c.syntaxError(i, "after decimal point in numeric literal")
		}
		for ; i < len(in) && isDigit(in[i]); i++ {
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if i >= len(in) || !isDigit(in[i]) {
			return c.syntaxError(i, "in exponent of numeric literal")
		}
		for ; i < len(in) && isDigit(in[i]); i++ {
		}
	}
	c.out = append(c.out, in[c.pos:i]...)
	c.pos = i
	return nil
}

func (c *canonicalizer) array() error {
	c.pos++ // [
	c.out = append(c.out, '[')
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		return nil
	}
	for {
		if err := c.value(); err != nil {
			return err
		}
		c.skipSpace()
		if c.pos >= len(c.in) {
			return c.syntaxError(c.pos, "")
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
			c.out = append(c.out, ',')
			c.skipSpace()
		case ']':
			c.pos++
			c.out = append(c.out, ']')
			return nil
		default:
			return c.syntaxError(c.pos, "after array element")
		}
	}
}

// object writes the members in the order read, then, unless their keys
// were already strictly increasing, sorts them and rewrites them in order.
func (c *canonicalizer) object() error {
	c.pos++ // {
	c.out = append(c.out, '{')
	open := len(c.out)
	base := len(c.members)
	sorted := true
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		c.out = append(c.out, '}')
		return nil
	}
	for {
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return c.syntaxError(c.pos, "looking for beginning of object key string")
		}
		if len(c.members) > base {
			c.out = append(c.out, ',')
		}
		start := len(c.out)
		ks, ke, err := c.string(true)
		if err != nil {
			return err
		}
		c.skipSpace()
		if err := c.expect(':', "after object key"); err != nil {
			return err
		}
		c.out = append(c.out, ':')
		c.skipSpace()
		if err := c.value(); err != nil {
			return err
		}
		m := member{ks: ks, ke: ke, start: start, end: len(c.out)}
		if n := len(c.members); sorted && n > base && string(c.key(c.members[n-1])) >= string(c.key(m)) {
			sorted = false
		}
		c.members = append(c.members, m)
		c.skipSpace()
		if c.pos >= len(c.in) {
			return c.syntaxError(c.pos, "")
		}
		if c.in[c.pos] == '}' {
			c.pos++
			break
		}
		if err := c.expect(',', "after object key:value pair"); err != nil {
			return err
		}
		c.skipSpace()
	}
	ms := c.members[base:]
	if !sorted {
		c.sortMembers(ms)
		for i := 1; i < len(ms); i++ {
			if k := c.key(ms[i]); string(c.key(ms[i-1])) == string(k) {
				return fmt.Errorf("%w: %v %q", ErrInvalidPayload, errDuplicateKey, k)
			}
		}
		c.scratch = append(c.scratch[:0], c.out[open:]...)
		c.out = c.out[:open]
		for i, m := range ms {
			if i > 0 {
				c.out = append(c.out, ',')
			}
			c.out = append(c.out, c.scratch[m.start-open:m.end-open]...)
		}
	}
	c.out = append(c.out, '}')
	c.members = c.members[:base]
	return nil
}

// sortMembers sorts members by key: by insertion for the few members most
// objects have, else with slices.SortFunc.
func (c *canonicalizer) sortMembers(ms []member) {
	if len(ms) > 12 {
		slices.SortFunc(ms, func(a, b member) int { return bytes.Compare(c.key(a), c.key(b)) })
		return
	}
	for i := 1; i < len(ms); i++ {
		m := ms[i]
		k := c.key(m)
		j := i
		for ; j > 0 && string(k) < string(c.key(ms[j-1])); j-- {
			ms[j] = ms[j-1]
		}
		ms[j] = m
	}
}

// plain marks the bytes that a string's canonical encoding keeps as they
// are and that need no decoding: printable ASCII other than '"' and '\\'.
var plain = func() (t [256]bool) {
	for b := ' '; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// string reads the string at c.pos and appends its canonical encoding. For
// an object key (key true) it returns where the decoded string is, as
// member.ks and member.ke.
func (c *canonicalizer) string(key bool) (ks, ke int, err error) {
	in := c.in
	start := c.pos + 1
	for i := start; i < len(in); {
		for i < len(in) && plain[in[i]] {
			i++
		}
		if i >= len(in) {
			break
		}
		b := in[i]
		if b == '"' {
			// Only characters that encode as themselves: copy as is.
			c.out = append(c.out, in[c.pos:i+1]...)
			c.pos = i + 1
			return start, i, nil
		}
		if b < utf8.RuneSelf {
			break // an escape or a control character
		}
		r, size := utf8.DecodeRune(in[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			break
		}
		i += size
	}
	if key {
		off := len(c.keys)
		if c.keys, err = c.unquote(c.keys); err != nil {
			return 0, 0, err
		}
		c.out = appendString(c.out, c.keys[off:])
		return -off - 1, -len(c.keys) - 1, nil
	}
	if c.str, err = c.unquote(c.str[:0]); err != nil {
		return 0, 0, err
	}
	c.out = appendString(c.out, c.str)
	return 0, 0, nil
}

// unquote decodes the string at c.pos into dec, as encoding/json decodes
// it: escapes resolved, invalid UTF-8 and unpaired surrogates replaced by
// U+FFFD; a raw control character, an unknown escape or a missing quote is a
// syntax error.
func (c *canonicalizer) unquote(dec []byte) ([]byte, error) {
	in := c.in
	i := c.pos + 1
	for {
		if i >= len(in) {
			return nil, c.syntaxError(i, "")
		}
		b := in[i]
		switch {
		case b == '"':
			c.pos = i + 1
			return dec, nil
		case b == '\\':
			if i+1 >= len(in) {
				return nil, c.syntaxError(i+1, "")
			}
			switch e := in[i+1]; e {
			case '"', '\\', '/':
				dec = append(dec, e)
			case 'b':
				dec = append(dec, '\b')
			case 'f':
				dec = append(dec, '\f')
			case 'n':
				dec = append(dec, '\n')
			case 'r':
				dec = append(dec, '\r')
			case 't':
				dec = append(dec, '\t')
			case 'u':
				r, bad := hex4(in, i+2)
				if bad >= 0 {
					return nil, c.syntaxError(bad, "in \\u hexadecimal character escape")
				}
				i += 6
				if utf16.IsSurrogate(r) {
					r1 := rune(-1)
					if i+1 < len(in) && in[i] == '\\' && in[i+1] == 'u' {
						if v, bad := hex4(in, i+2); bad < 0 {
							r1 = v
						}
					}
					if d := utf16.DecodeRune(r, r1); d != utf8.RuneError {
						dec = utf8.AppendRune(dec, d)
						i += 6
						continue
					}
					r = utf8.RuneError
				}
				dec = utf8.AppendRune(dec, r)
				continue
			default:
				return nil, c.syntaxError(i+1, "in string escape code")
			}
			i += 2
		case b < ' ':
			return nil, c.syntaxError(i, "in string literal")
		case b < utf8.RuneSelf:
			dec = append(dec, b)
			i++
		default:
			r, size := utf8.DecodeRune(in[i:])
			dec = utf8.AppendRune(dec, r) // an invalid byte becomes U+FFFD
			i += size
		}
	}
}

// hex4 parses the four hex digits at in[i:]; bad is the offset of the first
// byte that is not one (len(in) if the document ends), or -1.
func hex4(in []byte, i int) (r rune, bad int) {
	for j := i; j < i+4; j++ {
		if j >= len(in) {
			return 0, j
		}
		var v byte
		switch b := in[j]; {
		case '0' <= b && b <= '9':
			v = b - '0'
		case 'a' <= b && b <= 'f':
			v = b - 'a' + 10
		case 'A' <= b && b <= 'F':
			v = b - 'A' + 10
		default:
			return 0, j
		}
		r = r<<4 | rune(v)
	}
	return r, -1
}

const hexDigits = "0123456789abcdef"

// appendString appends s, valid UTF-8, as encoding/json encodes a string
// with HTML escaping off.
func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= ' ' && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
