package httprule

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/jsonfield"
	"github.com/idemgo/idem/webhook"
)

// ErrNoKey is FindKey's error, checked with errors.Is, for a request that
// lacks its key's source: the Idempotency-Key header, or a configured
// header or body field. The wrappers answer it 400 (KeyAnswer), or run the
// handler unkeyed where the key is optional.
var ErrNoKey = errors.New("idem: request has no idempotency key")

// A KeyPart is a source of a request's idempotency key other than the
// default Idempotency-Key header: a request header (a webhook sender's
// delivery id, such as GitHub's X-GitHub-Delivery), or a field of the
// JSON body (Stripe's event id). The zero KeyPart is not usable.
type KeyPart struct {
	header string   // the header's name, as given; or
	field  []string // the body field's dotted path
}

// HeaderPart returns the key part of header name. The error, for an
// empty name or one with characters a header name cannot have, says so.
func HeaderPart(name string) (KeyPart, error) {
	if name == "" || strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) }) {
		return KeyPart{}, fmt.Errorf("%q is not a header name", name)
	}
	return KeyPart{header: name}, nil
}

// FieldPart returns the key part of the body field at path: a field name
// or a dotted path into nested objects ("data.object.id"). The error, for
// an empty path or an empty name in it, says so.
func FieldPart(path string) (KeyPart, error) {
	parts := strings.Split(path, ".")
	for _, p := range parts {
		if p == "" {
			return KeyPart{}, fmt.Errorf("body field path %q has an empty name", path)
		}
	}
	return KeyPart{field: parts}, nil
}

// String names the part: "the X-GitHub-Delivery header", "the body field
// id".
func (p KeyPart) String() string {
	if p.header != "" {
		return "the " + p.header + " header"
	}
	return "the body field " + strings.Join(p.field, ".")
}

// label names the part in the stored key, whatever the case of a header's
// name.
func (p KeyPart) label() string {
	if p.header != "" {
		return "header:" + strings.ToLower(p.header)
	}
	return "field:" + strings.Join(p.field, ".")
}

// NeedsBody reports whether one of parts is a body field.
func NeedsBody(parts []KeyPart) bool {
	for _, p := range parts {
		if p.field != nil {
			return true
		}
	}
	return false
}

// isDefault reports whether parts is the default: none, or the
// Idempotency-Key header alone.
func isDefault(parts []KeyPart) bool {
	return len(parts) == 0 || len(parts) == 1 && strings.EqualFold(parts[0].header, HeaderIdempotencyKey)
}

// CheckEndpoint checks the endpoint name that scopes the keys of parts: a
// key taken from configured parts (a sender's delivery id) needs one, 1 to
// 128 bytes without control characters, so that one id reaching two
// endpoints on one table runs once per endpoint; the default
// Idempotency-Key takes none (the same key sent to another endpoint is a
// reused key, as the IETF draft has it). The error says which.
func CheckEndpoint(parts []KeyPart, endpoint string) error {
	switch {
	case isDefault(parts) && endpoint != "":
		return fmt.Errorf("an endpoint name (%q) scopes keys from a sender's delivery id, not the Idempotency-Key header, whose key sent to another endpoint is refused as reused", endpoint)
	case isDefault(parts):
		return nil
	case endpoint == "":
		return fmt.Errorf("a key from %s needs an endpoint name (WithEndpoint), so that one id reaching two endpoints on one table runs once per endpoint", Describe(parts))
	case len(endpoint) > 128 || strings.ContainsFunc(endpoint, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("endpoint name %q: want 1 to 128 bytes without control characters", endpoint)
	}
	return nil
}

// Describe names the source of a key: "the Idempotency-Key header" by
// default, else the parts in order ("the X-Shopify-Shop-Domain header and
// the body field id").
func Describe(parts []KeyPart) string {
	if isDefault(parts) {
		return "the " + HeaderIdempotencyKey + " header"
	}
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = p.String()
	}
	return strings.Join(names, " and ")
}

// RequestKey is what a request's stored key is made of (FindKey).
type RequestKey struct {
	header string   // the Idempotency-Key header's value (the default); or
	labels []string // the endpoint, then the configured parts' names and values, alternately
}

// FindKey returns what a request's key is made of: by default (no parts,
// or the Idempotency-Key header alone) the Idempotency-Key header's value
// under the IETF draft's rules (KeyHeader); else the values of parts, in
// order, each checked (a header: one value, 1 to MaxKeyLen visible ASCII
// characters other than a comma; a body field: a non-empty string or a
// number, of a JSON body). body is the request's body, read only if a part
// is a body field. The key of configured parts is scoped by endpoint (see
// CheckEndpoint); the default ignores it. A missing source is an error
// wrapping ErrNoKey; an unusable one wraps core.ErrInvalidKey.
func FindKey(parts []KeyPart, endpoint string, headers map[string]string, multi map[string][]string, body []byte) (RequestKey, error) {
	if isDefault(parts) {
		value, present, err := KeyHeader(headers, multi)
		switch {
		case err != nil:
			return RequestKey{}, err
		case !present:
			return RequestKey{}, fmt.Errorf("%w: no %s header", ErrNoKey, HeaderIdempotencyKey)
		}
		return RequestKey{header: value}, nil
	}
	labels := make([]string, 0, 2+2*len(parts))
	labels = append(labels, "endpoint", endpoint)
	for _, p := range parts {
		v, err := p.value(headers, multi, body)
		if err != nil {
			return RequestKey{}, err
		}
		labels = append(labels, p.label(), v)
	}
	return RequestKey{labels: labels}, nil
}

// Sources returns the values the key is made of, by source: the
// Idempotency-Key header's as "header:idempotency-key"; else "endpoint" and
// each configured part's, as "header:<lower-case name>" or "field:<path>".
func (k RequestKey) Sources() map[string]string {
	if k.labels == nil {
		return map[string]string{"header:" + strings.ToLower(HeaderIdempotencyKey): k.header}
	}
	m := make(map[string]string, len(k.labels)/2)
	for i := 0; i+1 < len(k.labels); i += 2 {
		m[k.labels[i]] = k.labels[i+1]
	}
	return m
}

// Stored returns the stored key, hashed with the caller identity (labelled
// parts such as "sub=..."; none means anonymous): Key of the Idempotency-Key
// header's value, or for configured parts the endpoint and their names and
// values hashed apart from it, so that the key spaces of different sources,
// and of different endpoints, never meet.
// The error wraps core.ErrInvalidKey.
func (k RequestKey) Stored(identity []string) (string, error) {
	if k.labels == nil {
		return Key(k.header, identity)
	}
	return core.DeriveKey(append([]string{"http-source", identityHash(identity)}, k.labels...)...)
}

// identityHash is the hash of the caller identity that scopes a key: of
// "anonymous" for none; of its parts joined with newlines when none has a
// newline (unambiguous then, and the form of releases before, so that their
// records keep their keys); else of a newline followed by each part
// length-prefixed ("<bytes>:<part>"), which no newline-free join can equal.
// So two identities share a hash only if their parts are equal.
func identityHash(identity []string) string {
	h := sha256.New()
	switch {
	case len(identity) == 0:
		h.Write([]byte("anonymous"))
	case !slices.ContainsFunc(identity, func(p string) bool { return strings.Contains(p, "\n") }):
		h.Write([]byte(strings.Join(identity, "\n")))
	default:
		b := []byte{'\n'}
		for _, p := range identity {
			b = append(strconv.AppendInt(b, int64(len(p)), 10), ':')
			b = append(b, p...)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// value is p's value in a request.
func (p KeyPart) value(headers map[string]string, multi map[string][]string, body []byte) (string, error) {
	if p.field != nil {
		v, err := jsonfield.Get("body", body, p.field)
		switch {
		case errors.Is(err, jsonfield.ErrAbsent):
			return "", fmt.Errorf("%w: %v", ErrNoKey, err)
		case err != nil:
			return "", fmt.Errorf("%w: %v", core.ErrInvalidKey, err)
		}
		return v, nil
	}
	vals := HeaderValues(headers, multi, p.header)
	switch {
	case len(vals) == 0:
		return "", fmt.Errorf("%w: no %s header", ErrNoKey, p.header)
	case len(vals) > 1:
		return "", fmt.Errorf("%w: %d %s headers, want one", core.ErrInvalidKey, len(vals), p.header)
	}
	if strings.EqualFold(p.header, HeaderIdempotencyKey) {
		return checkKey(vals[0])
	}
	return vals[0], checkValue(p.header, vals[0])
}

// HeaderValues are the values of header name (any case) in a request's
// headers: the multi-valued ones if they have it, else the single-valued.
func HeaderValues(headers map[string]string, multi map[string][]string, name string) []string {
	var vals []string
	for k, vs := range multi {
		if strings.EqualFold(k, name) {
			vals = append(vals, vs...)
		}
	}
	if len(vals) == 0 {
		for k, v := range headers {
			if strings.EqualFold(k, name) {
				vals = append(vals, v)
			}
		}
	}
	return vals
}

// checkValue checks a configured header's value: 1 to MaxKeyLen visible
// ASCII characters other than a comma (which joins repeated headers).
func checkValue(name, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: empty %s header", core.ErrInvalidKey, name)
	case len(v) > MaxKeyLen:
		return fmt.Errorf("%w: %s header is %d characters, at most %d", core.ErrInvalidKey, name, len(v), MaxKeyLen)
	}
	for i := 0; i < len(v); i++ {
		if v[i] == ',' || v[i] < 0x21 || v[i] > 0x7e {
			return fmt.Errorf("%w: %s header has byte %#02x at offset %d, want visible ASCII other than a comma", core.ErrInvalidKey, name, v[i], i)
		}
	}
	return nil
}

// KeyAnswer is the answer to a request whose key FindKey refused with err:
// 400 missing-idempotency-key or invalid-idempotency-key for the default
// header, 400 missing-key-source or invalid-key-source for configured
// parts, naming them.
func KeyAnswer(parts []KeyPart, err error) Answer {
	missing := errors.Is(err, ErrNoKey)
	switch {
	case isDefault(parts) && missing:
		return NewAnswer(MissingKey, "", idem.MissingKey)
	case isDefault(parts):
		return NewAnswer(InvalidKey, err.Error(), idem.InvalidKey)
	case missing:
		return NewAnswer(MissingKeySource, fmt.Sprintf("This endpoint takes its idempotency key from %s, which this request lacks (%v).", Describe(parts), err), idem.MissingKey)
	}
	return NewAnswer(InvalidKeySource, err.Error(), idem.InvalidKey)
}

// Keying returns the key parts of a wrapper: parts (WithKeyHeader,
// WithKeyBodyField), or, with a sender (WithWebhook), the sender's
// duplicate-detection id, which combines with no other part; and checks
// the endpoint that scopes them (CheckEndpoint) and, for a sender, that
// the runner's retention covers the sender's window
// (webhook.Sender.CheckRetention). The error says what to change.
func Keying(sender *webhook.Sender, parts []KeyPart, endpoint string, retention time.Duration) ([]KeyPart, error) {
	if sender != nil {
		if len(parts) > 0 {
			return nil, fmt.Errorf("the key of a %s webhook is its %s: give WithWebhook without WithKeyHeader or WithKeyBodyField", sender.Name(), senderKey(*sender))
		}
		if err := sender.CheckRetention(retention); err != nil {
			return nil, err
		}
		p, err := HeaderPart(sender.KeyHeader())
		if sender.KeyField() != "" {
			p, err = FieldPart(sender.KeyField())
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sender.Name(), err)
		}
		parts = []KeyPart{p}
	}
	if err := CheckEndpoint(parts, endpoint); err != nil {
		return nil, err
	}
	return parts, nil
}

// senderKey names a sender's duplicate-detection id.
func senderKey(s webhook.Sender) string {
	if s.KeyField() != "" {
		return "body field " + s.KeyField()
	}
	return s.KeyHeader() + " header"
}
