package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects that Fingerprint
// and Canonicalize accept, the limit of encoding/json (json.Valid rejects
// the same nesting): a document with more than MaxDepth arrays and
// objects open at once gives an error wrapping ErrInvalidPayload, as soon
// as the one past the limit opens. The canonicalizer keeps the open arrays
// and objects on the heap, at most 56 bytes each, not on the goroutine's
// stack, which stays at its starting size however deep the document.
const MaxDepth = 10000

// Fingerprint returns the hex SHA-256 of the canonical form of the JSON
// payload (see Canonicalize): object keys sorted, insignificant whitespace
// removed, numbers kept exactly as sent (1.0 and 1 differ), strings
// re-encoded without HTML escaping. An empty payload has the empty
// fingerprint, which matches only another empty payload. Invalid JSON, a
// duplicate object key, nesting deeper than MaxDepth or trailing data gives
// an error wrapping ErrInvalidPayload. Time and memory grow with the
// payload's size (and the sorting of its keys), not with its nesting.
// Fingerprint is safe for concurrent use.
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
	if len(c.defers) > 0 {
		c.scratch = c.assemble(slices.Grow(c.scratch[:0], len(canon)))
		canon = c.scratch
	}
	sum := sha256.Sum256(canon)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return string(h[:]), nil
}

// Canonicalize returns the canonical form of a JSON document, the input of
// Fingerprint: RFC 8259 JSON with object members sorted by their decoded
// keys (byte-wise), no insignificant whitespace, numbers as sent, and strings
// re-encoded as encoding/json encodes them with HTML escaping off (U+2028
// and U+2029 escaped). Strings are decoded as encoding/json decodes them:
// invalid UTF-8 and unpaired surrogate escapes such as \ud800 become
// U+FFFD, so "\ud800", "\ufffd" and the byte 0xFF in a string all have the
// same canonical form. Two members whose decoded keys are equal ("a" and
// "\u0061") are a duplicate key: an error, as is nesting deeper than
// MaxDepth. Errors wrap ErrInvalidPayload. Canonicalize is safe for
// concurrent use.
func Canonicalize(payload []byte) ([]byte, error) {
	c := canonPool.Get().(*canonicalizer)
	defer c.release()
	pooled := c.out
	canon, err := c.run(payload, make([]byte, 0, len(payload)))
	if err == nil && len(c.defers) > 0 {
		// Assembled in the scratch buffer, which goes to the caller; the
		// buffer of this call's reading replaces it.
		assembled := c.assemble(slices.Grow(c.scratch[:0], len(canon)))
		c.scratch, canon = canon, assembled
	}
	c.out = pooled // the result belongs to the caller: never reuse it
	return canon, err
}

var errDuplicateKey = errors.New("duplicate object key")

// ErrTooDeep is the error, checked with errors.Is, of a document nested
// deeper than MaxDepth. Such an error also wraps ErrInvalidPayload.
var ErrTooDeep = errors.New("idem: JSON nested deeper than MaxDepth")

// depthError reports an array or object opened at offset when MaxDepth
// arrays and objects were already open. It wraps ErrInvalidPayload and is
// ErrTooDeep.
type depthError struct{ offset int }

// Is reports whether target is ErrTooDeep.
func (e *depthError) Is(target error) bool { return target == ErrTooDeep }

func (e *depthError) Error() string {
	return fmt.Sprintf("%v: nesting deeper than %d at offset %d", ErrInvalidPayload, MaxDepth, e.offset)
}

func (e *depthError) Unwrap() error { return ErrInvalidPayload }

// canonicalizer is a one-pass JSON validator and canonicalizer. It is not
// safe for concurrent use; Fingerprint and Canonicalize take one from
// canonPool per call.
type canonicalizer struct {
	in      []byte     // the document
	pos     int        // the next byte of in to read
	out     []byte     // the canonical form written so far
	stack   []frame    // the arrays and objects open at pos, innermost last
	members []member   // the members of the open objects, innermost last
	scratch []byte     // a copy of an object's members while they are reordered
	str     []byte     // a decoded string value that needed unescaping
	keys    []byte     // decoded object keys that needed unescaping
	defers  []deferred // the objects left to reorder when out is complete
	order   []span     // the members of the deferred objects, sorted
	todo    []piece    // the pieces of out that assemble has still to write
	kids    []int      // the objects deferred inside one, for assemble
}

// frame is an array or an object open at the read position. For an object,
// open is len(out) after its '{' and base is len(members) when it opened;
// sorted is whether its keys so far were read in increasing order.
type frame struct {
	object, sorted bool
	open, base     int
}

// member is an object member whose canonical text (key, colon, value) is
// out[start:end], end being set once the member is followed by another or
// by the object's end. Its decoded key is in[ks:ke], or, for a key that needed
// unescaping, keys[-ks-1:-ke-1]. It holds no pointers, so that keeping
// and sorting members costs no write barriers.
type member struct {
	ks, ke     int
	start, end int
}

// deferred is an object whose members were read out of order and that was
// too large to reorder in place (see maxReorderInPlace): its members, in
// read order, are out[open:close], and in key order order[first:last].
// c.defers lists the deferred objects in the order they closed, so that
// the ones inside an object are just before it, from index desc.
type deferred struct {
	open, close int
	first, last int
	desc        int
}

// span is the range out[start:end].
type span struct{ start, end int }

// piece is a range of out for assemble to write, where defers[last] is the
// last deferred object to close in it that is not inside another (last is
// -1 if there is none); or a comma, if start < 0.
type piece struct{ start, end, last int }

// maxReorderInPlace is the largest object, in bytes of canonical members,
// that is put in key order as soon as it is read, by copying its members.
// A larger one is deferred to assemble, which writes each byte once, so
// that an object nested in many unsorted objects is not copied once per
// level: in place, a byte is copied at most 2*maxReorderInPlace/12 times
// (each level adds at least 12 bytes, as {"b":…,"a":0} does).
const maxReorderInPlace = 1 << 10

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
	c.out, c.scratch = reuse(c.out, maxPooledBuf), reuse(c.scratch, maxPooledBuf)
	c.str, c.keys = reuse(c.str, maxPooledBuf), reuse(c.keys, maxPooledBuf)
	c.members, c.order = reuse(c.members, maxPooledBuf/32), reuse(c.order, maxPooledBuf/16)
	c.defers, c.todo = reuse(c.defers, maxPooledBuf/40), reuse(c.todo, maxPooledBuf/24)
	c.kids = reuse(c.kids, maxPooledBuf/8)
	c.stack = reuse(c.stack, MaxDepth) // 240 KB at most, as large as it grows
	canonPool.Put(c)
}

// grow returns s with room for n more elements. Unlike append, which grows
// a large slice by a quarter, it at least doubles s when it must grow, so
// that the slices a hostile document makes long are copied a few times,
// not dozens.
func grow[S ~[]E, E any](s S, n int) S {
	if len(s)+n <= cap(s) {
		return s
	}
	return slices.Grow(s, max(n, len(s)))
}

// reuse returns s emptied, or nil if its capacity is over maxCap.
func reuse[S ~[]E, E any](s S, maxCap int) S {
	if cap(s) > maxCap {
		return nil
	}
	return s[:0]
}

// run canonicalizes in, appending to out, except for the objects it
// defers to assemble.
func (c *canonicalizer) run(in, out []byte) ([]byte, error) {
	c.in, c.pos, c.out, c.keys = in, 0, out, c.keys[:0]
	c.stack, c.defers, c.order = c.stack[:0], c.defers[:0], c.order[:0]
	c.skipSpace()
	if err := c.walk(); err != nil {
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

// walk reads the value at c.pos and everything nested in it. It does not
// recurse: the arrays and objects open at c.pos are on c.stack, innermost
// last, so that the goroutine's stack stays small however deep the
// document, and MaxDepth bounds c.stack.
func (c *canonicalizer) walk() (err error) {
	if b := c.peek(); b != '{' && b != '[' {
		return c.scalar()
	}
	for descend := true; ; {
		// c.pos is at an array or object (descend), or after a value in
		// the innermost open one.
		after := !descend
		if descend {
			// c.pos is at an array or object: open it, or read it whole
			// if it is empty and go on after it.
			if len(c.stack) == MaxDepth {
				return &depthError{offset: c.pos}
			}
			b := c.in[c.pos]
			c.out = append(c.out, b)
			c.pos++
			c.skipSpace()
			if closing := b + 2; c.peek() == closing { // '{'+2 == '}', '['+2 == ']'
				c.out = append(c.out, closing)
				c.pos++
				if len(c.stack) == 0 {
					return nil
				}
				after = true
			} else {
				c.stack = append(grow(c.stack, 1), frame{object: b == '{', sorted: true, open: len(c.out), base: len(c.members)})
			}
		}
		if f := &c.stack[len(c.stack)-1]; f.object {
			descend, err = c.objectMembers(f, after)
		} else {
			descend, err = c.arrayElements(after)
		}
		if err != nil {
			return err
		}
		if !descend { // the innermost array or object was read to its end
			if c.stack = c.stack[:len(c.stack)-1]; len(c.stack) == 0 {
				return nil
			}
		}
	}
}

// arrayElements reads the elements of the innermost array from c.pos, at
// an element or, if after, after one, up to its end or to an element that
// is an array or an object (descend).
func (c *canonicalizer) arrayElements(after bool) (descend bool, err error) {
	for {
		if !after {
			if b := c.peek(); b == '{' || b == '[' {
				return true, nil
			}
			if err := c.scalar(); err != nil {
				return false, err
			}
		}
		after = false
		c.skipSpace()
		switch c.peek() {
		case ',':
			c.pos++
			c.out = append(c.out, ',')
			c.skipSpace()
		case ']':
			c.pos++
			c.out = append(c.out, ']')
			return false, nil
		default:
			return false, c.syntaxError(c.pos, "after array element")
		}
	}
}

// objectMembers reads the members of f's object from c.pos, at a member's
// key or, if after, after a member's value, up to the object's end or to a
// value that is an array or an object (descend). It writes each member as
// read; closeObject puts them in key order.
func (c *canonicalizer) objectMembers(f *frame, after bool) (descend bool, err error) {
	for {
		if !after {
			if c.peek() != '"' {
				return false, c.syntaxError(c.pos, "looking for beginning of object key string")
			}
			n := len(c.members)
			if n > f.base {
				c.members[n-1].end = len(c.out)
				c.out = append(c.out, ',')
			}
			m := member{start: len(c.out)}
			if m.ks, m.ke, err = c.string(true); err != nil {
				return false, err
			}
			c.skipSpace()
			if err := c.expect(':', "after object key"); err != nil {
				return false, err
			}
			c.out = append(c.out, ':')
			c.skipSpace()
			if f.sorted && n > f.base && string(c.key(c.members[n-1])) >= string(c.key(m)) {
				f.sorted = false
			}
			c.members = append(c.members, m)
			if b := c.peek(); b == '{' || b == '[' {
				return true, nil
			}
			if err := c.scalar(); err != nil {
				return false, err
			}
		}
		after = false
		c.skipSpace()
		switch c.peek() {
		case ',':
			c.pos++
			c.skipSpace()
		case '}':
			return false, c.closeObject(f)
		default:
			return false, c.syntaxError(c.pos, "after object key:value pair")
		}
	}
}

// peek returns the byte at c.pos, or 0 at the end of the document.
func (c *canonicalizer) peek() byte {
	if c.pos < len(c.in) {
		return c.in[c.pos]
	}
	return 0
}

// scalar reads the string, number or literal at c.pos.
func (c *canonicalizer) scalar() (err error) {
	switch b := c.peek(); {
	case b == '"':
		_, _, err = c.string(false)
	case b == 't':
		err = c.literal("true")
	case b == 'f':
		err = c.literal("false")
	case b == 'n':
		err = c.literal("null")
	case b == '-' || '0' <= b && b <= '9':
		err = c.number()
	default:
		err = c.syntaxError(c.pos, "looking for beginning of value")
	}
	return err
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

// closeObject reads the '}' that closes f's object, whose members
// c.members[f.base:] are in out in the order read. Unless their keys were
// read in increasing order, it sorts them, rejects a duplicate key and puts
// them in key order: at once for a small object, else later, in assemble.
func (c *canonicalizer) closeObject(f *frame) error {
	ms := c.members[f.base:]
	ms[len(ms)-1].end = len(c.out)
	if !f.sorted {
		c.sortMembers(ms)
		for i := 1; i < len(ms); i++ {
			if k := c.key(ms[i]); string(c.key(ms[i-1])) == string(k) {
				return fmt.Errorf("%w: %v %q", ErrInvalidPayload, errDuplicateKey, k)
			}
		}
		if len(c.out)-f.open <= maxReorderInPlace {
			c.reorder(f.open, ms)
		} else {
			c.deferObject(f.open, ms)
		}
	}
	c.pos++
	c.out = append(c.out, '}')
	c.members = c.members[:f.base]
	return nil
}

// reorder rewrites the members out[open:], in the order read, in the order
// of ms. An object this small holds no deferred object, whose offsets the
// move would invalidate.
func (c *canonicalizer) reorder(open int, ms []member) {
	c.scratch = append(c.scratch[:0], c.out[open:]...)
	c.out = c.out[:open]
	for i, m := range ms {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, c.scratch[m.start-open:m.end-open]...)
	}
}

// deferObject records the object whose members, sorted, are ms, and that
// is out[open:] in the order read, for assemble.
func (c *canonicalizer) deferObject(open int, ms []member) {
	// The objects deferred inside this one closed last: skip them, one
	// subtree at a time.
	desc := len(c.defers)
	for desc > 0 && c.defers[desc-1].open > open {
		desc = c.defers[desc-1].desc
	}
	c.defers = append(grow(c.defers, 1), deferred{open: open, close: len(c.out), first: len(c.order), last: len(c.order) + len(ms), desc: desc})
	c.order = grow(c.order, len(ms))
	for _, m := range ms {
		c.order = append(c.order, span{m.start, m.end})
	}
}

// assemble appends out to dst with the members of each deferred object in
// key order. It writes each byte of out once, keeping the pieces still to
// write on c.todo rather than recursing.
func (c *canonicalizer) assemble(dst []byte) []byte {
	todo := append(c.todo[:0], piece{0, len(c.out), len(c.defers) - 1})
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		switch {
		case p.start < 0:
			dst = append(dst, ',')
			continue
		case p.last < 0:
			dst = append(dst, c.out[p.start:p.end]...)
			continue
		}
		// p is out[p.start:d.open], d's members in key order, then
		// out[d.close:p.end], d being the last deferred object in p.
		d := c.defers[p.last]
		before := d.desc - 1 // the last deferred object closed before d, if in p
		if before >= 0 && c.defers[before].open < p.start {
			before = -1
		}
		todo = append(todo, piece{d.close, p.end, -1})
		todo = c.pushMembers(todo, p.last)
		todo = append(todo, piece{p.start, d.open, before})
	}
	c.todo = todo
	return dst
}

// pushMembers pushes the members of defers[k] on todo, last first, each
// with the last deferred object inside it.
func (c *canonicalizer) pushMembers(todo []piece, k int) []piece {
	d := c.defers[k]
	kids := c.kids[:0] // the deferred objects inside d, not inside another; last first
	for i := k - 1; i >= d.desc; i = c.defers[i].desc - 1 {
		kids = append(kids, i)
	}
	todo = grow(todo, 2*(d.last-d.first))
	for i := d.last - 1; i >= d.first; i-- {
		m := c.order[i]
		last := -1
		if j := sort.Search(len(kids), func(j int) bool { return c.defers[kids[j]].open < m.end }); j < len(kids) && c.defers[kids[j]].open >= m.start {
			last = kids[j]
		}
		todo = append(todo, piece{m.start, m.end, last})
		if i > d.first {
			todo = append(todo, piece{-1, -1, -1})
		}
	}
	c.kids = kids
	return todo
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
			var err error
			if dec, i, err = c.escape(dec, i); err != nil {
				return nil, err
			}
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

// simpleEscapes maps the byte after a backslash to what it stands for.
var simpleEscapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// escape decodes the escape sequence at in[i] (a backslash) onto dec and
// returns the offset after it. A \u escape of a lone surrogate decodes as
// U+FFFD, as encoding/json does.
func (c *canonicalizer) escape(dec []byte, i int) ([]byte, int, error) {
	in := c.in
	if i+1 >= len(in) {
		return nil, i, c.syntaxError(i+1, "")
	}
	e := in[i+1]
	if d := simpleEscapes[e]; d != 0 {
		return append(dec, d), i + 2, nil
	}
	if e != 'u' {
		return nil, i, c.syntaxError(i+1, "in string escape code")
	}
	r, bad := hex4(in, i+2)
	if bad >= 0 {
		return nil, i, c.syntaxError(bad, "in \\u hexadecimal character escape")
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
			return utf8.AppendRune(dec, d), i + 6, nil
		}
		r = utf8.RuneError
	}
	return utf8.AppendRune(dec, r), i, nil
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
