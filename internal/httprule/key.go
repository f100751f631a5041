package httprule

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgo/idem/core"
)

// Header names and the key's length limit.
const (
	// HeaderIdempotencyKey carries the client's idempotency key; it is
	// looked up case-insensitively.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderReplayed is set to "true" on an answer replayed from the store.
	HeaderReplayed = "Idempotent-Replayed"
	// MaxKeyLen is the longest Idempotency-Key value accepted, in
	// characters.
	MaxKeyLen = 255
)

// KeyHeader returns the Idempotency-Key value of a request's headers,
// single-valued (headers) or multi-valued (multi, which wins when it has
// the header; an http.Header is one). A quoted string (an RFC 8941
// sf-string, as the IETF draft writes the header) is unquoted. ok is false
// if there is none. The error, for a present but unusable header (empty,
// longer than MaxKeyLen, characters outside visible ASCII, a comma, a
// double quote or a backslash left after unquoting, several values), wraps
// core.ErrInvalidKey. A comma is refused because API Gateway
// HTTP APIs and function URLs deliver a repeated header as one value joined
// with commas; refusing it everywhere keeps one rule.
func KeyHeader(headers map[string]string, multi map[string][]string) (value string, ok bool, err error) {
	vals := HeaderValues(headers, multi, HeaderIdempotencyKey)
	if len(vals) == 0 {
		return "", false, nil
	}
	if len(vals) > 1 {
		return "", true, fmt.Errorf("%w: %d Idempotency-Key headers, want one", core.ErrInvalidKey, len(vals))
	}
	v, err := checkKey(vals[0])
	return v, true, err
}

func checkKey(v string) (string, error) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	if v == "" {
		return "", fmt.Errorf("%w: empty Idempotency-Key header", core.ErrInvalidKey)
	}
	if len(v) > MaxKeyLen {
		return "", fmt.Errorf("%w: Idempotency-Key header is %d characters, at most %d", core.ErrInvalidKey, len(v), MaxKeyLen)
	}
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case ',':
			return "", fmt.Errorf("%w: Idempotency-Key header has a comma at offset %d: repeated headers, or a key that is not allowed", core.ErrInvalidKey, i)
		case '"', '\\':
			return "", fmt.Errorf("%w: Idempotency-Key header has %q at offset %d: a malformed quoted string", core.ErrInvalidKey, v[i], i)
		}
		if v[i] < 0x21 || v[i] > 0x7e {
			return "", fmt.Errorf("%w: Idempotency-Key header has byte %#02x at offset %d, want visible ASCII", core.ErrInvalidKey, v[i], i)
		}
	}
	return v, nil
}

// Key returns the stored key of a request: the Idempotency-Key value hashed
// with the caller identity (labelled parts such as "sub=..."; none means
// anonymous; see core.DeriveKey). The method and the path are not part of
// it but of the fingerprint (Payload), so that the key used on another
// endpoint is refused as reused rather than run again. The error wraps
// core.ErrInvalidKey.
func Key(headerValue string, identity []string) (string, error) {
	return core.DeriveKey("http", identityHash(identity), headerValue)
}

type storedKeyCtx struct{}

// WithStoredKey returns ctx carrying key for the handler (see StoredKey).
func WithStoredKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, storedKeyCtx{}, key)
}

// StoredKey returns the stored key that WithStoredKey put in ctx: ok is
// false if there is none.
func StoredKey(ctx context.Context) (key string, ok bool) {
	key, ok = ctx.Value(storedKeyCtx{}).(string)
	return key, ok && key != ""
}

type payloadCtx struct{}

// WithCallPayload returns ctx carrying the payload that the call of the
// handler's stored key was given (see CallPayload): what the wrapper
// fingerprinted, before any selection.
func WithCallPayload(ctx context.Context, payload []byte) context.Context {
	return context.WithValue(ctx, payloadCtx{}, payload)
}

// CallPayload returns the payload that WithCallPayload put in ctx: ok is false if
// there is none. The caller must not modify it.
func CallPayload(ctx context.Context) (payload []byte, ok bool) {
	payload, ok = ctx.Value(payloadCtx{}).([]byte)
	return payload, ok
}

// Request is an HTTP request as a wrapper keyed and fingerprinted it, in
// its handler's context (WithRequest), for a handler in this module that
// passes the request on: package durable sends it to the durable function
// it starts. A Request is not modified once in a context.
type Request struct {
	// Method and Path are the fingerprinted method and path.
	Method, Path string
	// Headers and Multi are the request's headers, single- and
	// multi-valued (HeaderValues reads them).
	Headers map[string]string
	Multi   map[string][]string
	// Body is the request's body, decoded from base64 if it was.
	Body []byte
	// Key is what the stored key is made of; Identity the caller identity
	// that scopes it (labelled parts, none for an anonymous caller).
	Key      RequestKey
	Identity []string
	// Selection is the selection of the body's fingerprint.
	Selection core.Selection
}

type requestCtx struct{}

// WithRequest returns ctx carrying r for the handler (see RequestOf).
func WithRequest(ctx context.Context, r *Request) context.Context {
	return context.WithValue(ctx, requestCtx{}, r)
}

// RequestOf returns the request WithRequest put in ctx: ok is false if
// there is none (outside an HTTP wrapper's handler, or in one run unkeyed).
func RequestOf(ctx context.Context) (r *Request, ok bool) {
	r, ok = ctx.Value(requestCtx{}).(*Request)
	return r, ok && r != nil
}

// Answered marks err, the error a handler in this module returns beside a
// response of its own: the wrapper answers that response, where it would
// answer a handler's error with a 500 problem, and gives the runner err as
// the handler's outcome instead of a retryable failure (package durable
// answers Lambda's refusal of a start 422, with err wrapping
// core.ErrKeyReused and marked core.MarkNoRecord). Answered(nil) is nil.
func Answered(err error) error {
	if err == nil {
		return nil
	}
	return &answeredError{err}
}

// IsAnswered reports whether err was marked by Answered.
func IsAnswered(err error) bool {
	var a *answeredError
	return errors.As(err, &a)
}

type answeredError struct{ err error }

func (e *answeredError) Error() string { return e.err.Error() }
func (e *answeredError) Unwrap() error { return e.err }
