package httpidem

import (
	"context"
	"net/http"
	"strings"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/httprule"
)

// Header names and limits.
const (
	// HeaderIdempotencyKey is the request header that carries the client's
	// idempotency key (IETF draft-ietf-httpapi-idempotency-key-header).
	HeaderIdempotencyKey = httprule.HeaderIdempotencyKey
	// HeaderReplayed is set to "true" on a response replayed from the store.
	HeaderReplayed = httprule.HeaderReplayed
	// MaxKeyLen is the longest Idempotency-Key value accepted, in
	// characters.
	MaxKeyLen = httprule.MaxKeyLen
	// MaxBodyDepth is the deepest nesting of arrays and objects accepted in
	// a JSON request body.
	MaxBodyDepth = httprule.MaxBodyDepth
	// ProblemContentType is the media type of the middleware's own answers
	// (RFC 9457 problem details).
	ProblemContentType = httprule.ContentType
	// ProblemTypeBase starts the type URI of every problem; the rest is one
	// of the Problem* constants.
	ProblemTypeBase = httprule.TypeBase
)

// Problem types (appended to ProblemTypeBase) of the middleware's own
// answers; the status table is in Middleware's documentation.
const (
	ProblemMissingKey       = httprule.MissingKey       // ProblemMissingKey: 400, a required key is missing.
	ProblemInvalidKey       = httprule.InvalidKey       // ProblemInvalidKey: 400, the key is empty, too long, repeated or not visible ASCII.
	ProblemMissingKeySource = httprule.MissingKeySource // ProblemMissingKeySource: 400, a header or body field the key is taken from (WithKeyHeader, WithKeyBodyField) is missing.
	ProblemInvalidKeySource = httprule.InvalidKeySource // ProblemInvalidKeySource: 400, such a header or body field is unusable (repeated, empty, too long, not visible ASCII; not a string or a number).
	ProblemInvalidBody      = httprule.InvalidBody      // ProblemInvalidBody: 400, the body could not be read, or nests JSON too deep.
	ProblemInvalidSignature = httprule.InvalidSignature // ProblemInvalidSignature: 401, with WithWebhook, the sender's signature is missing or invalid; nothing was stored.
	ProblemBodyTooLarge     = httprule.BodyTooLarge     // ProblemBodyTooLarge: 413, the body is over WithMaxBodyBytes.
	ProblemInProgress       = httprule.InProgress       // ProblemInProgress: 409, the key's first request is still running.
	ProblemKeyReused        = httprule.KeyReused        // ProblemKeyReused: 422, the key was used with another method, path or body.
	ProblemRetriesExhausted = httprule.RetriesExhausted // ProblemRetriesExhausted: 500, the key's 5xx/408/429 answers used up its attempts.
	ProblemResponseOmitted  = httprule.ResponseOmitted  // ProblemResponseOmitted: 500, the key's success was not recorded for replay.
	ProblemStoreUnavailable = httprule.StoreUnavailable // ProblemStoreUnavailable: 503, the store failed transiently.
	ProblemCommitRefused    = httprule.CommitRefused    // ProblemCommitRefused: 503, in place of the handler's answer: the store refused to commit its outcome and kept nothing; a retry runs it again.
	ProblemInternal         = httprule.Internal         // ProblemInternal: 500, another failure.
)

// Problem is an RFC 9457 problem details object (type, title, status,
// detail), the body of the middleware's own answers.
type Problem = httprule.Problem

// Response is what the middleware records of a handler's response and
// replays for its key: the status, the headers the handler set (all their
// values: every Set-Cookie the handler added, never one an outer
// middleware set) and the body. A replay adds the Set-Cookie values to the
// response's own (an outer middleware's fresh session cookie), and sets the
// other headers in place of the response's. It is stored as JSON (the body in
// base64). The response hook (WithResponseHook) receives one.
type Response struct {
	// StatusCode is the HTTP status.
	StatusCode int `json:"statusCode"`
	// Header holds the headers the handler set or changed.
	Header http.Header `json:"header,omitempty"`
	// Body is the response body.
	Body []byte `json:"body,omitempty"`
}

// shape names Response in the stored envelope.
const shape = "net/http"

// StoredKey returns the stored key of the request whose handler was given
// ctx (the request's context): ok is false outside a keyed request. The key
// is the same on every run of one request, so a handler can derive from it
// the ids of what it creates and the idempotency keys it passes downstream:
// a run repeated after a failure then writes the same items instead of new
// ones. Hash it before use (it is a key, not an id to show).
func StoredKey(ctx context.Context) (key string, ok bool) {
	return httprule.StoredKey(ctx)
}

// answerResponse is one of the middleware's own answers as a Response.
func answerResponse(a httprule.Answer) Response {
	h := http.Header{}
	for k, v := range a.Header {
		h.Set(k, v)
	}
	return Response{StatusCode: a.Status, Header: h, Body: a.Body}
}

// mark sets Idempotent-Replayed: true in h, replacing any other value or
// spelling of it.
func mark(h http.Header) http.Header {
	if h == nil {
		h = http.Header{}
	}
	for k := range h {
		if strings.EqualFold(k, HeaderReplayed) {
			delete(h, k)
		}
	}
	h[HeaderReplayed] = []string{"true"}
	return h
}

// write sends resp, in the handler's place: marked if it is a replay, after
// the hook.
func (m *middleware) write(ctx context.Context, w http.ResponseWriter, resp Response, v idem.Verdict, replayed bool) int {
	if replayed {
		resp.Header = mark(resp.Header)
	}
	if m.cfg.hook != nil {
		m.cfg.hook(ctx, &resp, v)
		if replayed {
			resp.Header = mark(resp.Header)
		}
	}
	h := w.Header()
	for k, vs := range resp.Header {
		if http.CanonicalHeaderKey(k) == setCookie {
			// Cookies are added to the caller's own (an outer
			// middleware's session), never put in their place.
			h[k] = append(h[k], vs...)
			continue
		}
		h[k] = vs
	}
	if resp.StatusCode == 0 {
		resp.StatusCode = http.StatusOK
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(resp.Body) // a client gone is nothing to act on
	return resp.StatusCode
}
