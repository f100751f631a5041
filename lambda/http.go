package idemlambda

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/httprule"
)

// Header names and limits of the HTTP wrappers.
const (
	// HeaderIdempotencyKey is the request header that carries the client's
	// idempotency key. It is looked up case-insensitively.
	HeaderIdempotencyKey = httprule.HeaderIdempotencyKey
	// HeaderReplayed is set to "true" on a response replayed from the store.
	HeaderReplayed = httprule.HeaderReplayed
	// MaxHeaderKeyLen is the longest Idempotency-Key value accepted, in
	// characters.
	MaxHeaderKeyLen = httprule.MaxKeyLen
	// MaxBodyDepth is the deepest nesting of arrays and objects accepted in
	// a JSON request body. JSON nested deeper than 10,000 is refused by
	// encoding/json and by the fingerprint's canonicalizer, and the
	// fingerprint (RequestPayload) puts the body one level down.
	MaxBodyDepth = httprule.MaxBodyDepth
	// ProblemContentType is the media type of the wrappers' own error
	// responses (RFC 9457 problem details).
	ProblemContentType = httprule.ContentType
	// ProblemTypeBase starts the type URI of every problem the wrappers
	// answer; the rest is one of the Problem* constants.
	ProblemTypeBase = httprule.TypeBase
)

// Problem types (appended to ProblemTypeBase) of the HTTP wrappers' own
// responses.
const (
	// ProblemMissingKey: 400, the request has no Idempotency-Key header.
	ProblemMissingKey = httprule.MissingKey
	// ProblemInvalidKey: 400, the Idempotency-Key header is empty, too
	// long, repeated (also as one comma-joined value), a malformed quoted
	// string, or has characters other than visible ASCII, or a comma.
	ProblemInvalidKey = httprule.InvalidKey
	// ProblemInvalidBody: 400, a base64 body that does not decode, or a
	// JSON body nested deeper than MaxBodyDepth.
	ProblemInvalidBody = httprule.InvalidBody
	// ProblemInvalidSignature: 401, with WithWebhook, the sender's signature
	// is missing, malformed or made with none of the secrets, or (Stripe)
	// its timestamp is outside the tolerance; nothing was stored.
	ProblemInvalidSignature = httprule.InvalidSignature
	// ProblemInProgress: 409, a request with the same key is still being
	// processed; Retry-After says when its lease ends (answered from the
	// runner's memory of keys in progress, its next recheck of the store).
	ProblemInProgress = httprule.InProgress
	// ProblemKeyReused: 422, the key was used with another method, path or
	// body.
	ProblemKeyReused = httprule.KeyReused
	// ProblemRetriesExhausted: 500, the key's requests were answered with
	// server errors, 408 or 429 as often as the runner allows
	// (idem.WithMaxAttempts); the key will not run again until its record
	// expires. Send a new key.
	ProblemRetriesExhausted = httprule.RetriesExhausted
	// ProblemResponseOmitted: 500, the request succeeded earlier but its
	// response was too large for the store to keep, so it cannot be
	// replayed.
	ProblemResponseOmitted = httprule.ResponseOmitted
	// ProblemStoreUnavailable: 503, the idempotency store failed; retry.
	ProblemStoreUnavailable = httprule.StoreUnavailable
	// ProblemCommitRefused: 503 with Retry-After: 1, in place of the
	// handler's answer: it ran, but the store refused to commit its outcome
	// (idem.CommitRefused) and kept nothing of it; a retry with the same
	// key runs it again.
	ProblemCommitRefused = httprule.CommitRefused
	// ProblemInternal: 500, the handler returned an error (not stored: a
	// retry runs the handler again) or another internal failure.
	ProblemInternal = httprule.Internal
)

// Problem is an RFC 9457 problem details object (type, title, status,
// detail), the body of the HTTP wrappers' own error responses.
type Problem = httprule.Problem

// HTTPResponse is the set of response types the HTTP wrappers answer, one
// per event source; WithResponseHook takes a hook for one of them.
type HTTPResponse interface {
	events.APIGatewayProxyResponse | events.APIGatewayV2HTTPResponse |
		events.LambdaFunctionURLResponse | events.ALBTargetGroupResponse
}

// HTTPRequest is the request type of an HTTP wrapper (RESTAPI, HTTPAPI,
// FunctionURL, ALB), for RequestKey.
type HTTPRequest interface {
	events.APIGatewayProxyRequest | events.APIGatewayV2HTTPRequest |
		events.LambdaFunctionURLRequest | events.ALBTargetGroupRequest
}

// RESTAPI returns a handler for API Gateway REST APIs (Lambda proxy
// integration) that makes handler idempotent per Idempotency-Key header; see
// HTTPAPI for the rules. The response keeps its MultiValueHeaders (a second
// Set-Cookie included) on a replay. The caller identity that scopes keys
// is, for each one present: the authorizer's principalId, its claims' sub
// (Cognito user pool authorizer), the IAM caller's userArn (or caller), the
// Cognito identity id and the API key id.
func RESTAPI(runner *idem.Runner, handler func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error), opts ...HTTPOption) (func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error), error) {
	return newHTTPWrapper(runner, handler, restFlavour, opts)
}

// HTTPAPI returns a handler for API Gateway HTTP APIs (payload format 2.0)
// that makes handler idempotent per Idempotency-Key header. The wrapper has
// the handler's own type: the handler answers its native response, which
// is stored (as JSON, in an envelope that names its type) and replayed as
// it was, Cookies included.
//
//   - the header (case-insensitive; an RFC 8941 quoted string is unquoted)
//     must hold 1 to MaxHeaderKeyLen visible ASCII characters other than a
//     comma (HTTP APIs and function URLs join a repeated header's values
//     with commas), a double quote or a backslash; missing: 400 (or, with WithOptionalKey, the handler runs
//     unkeyed); invalid or repeated: 400;
//   - with WithKeyHeader or WithKeyBodyField, the key is that header (a
//     webhook's delivery id) or body field instead, scoped by WithEndpoint:
//     missing, 400 missing-key-source; unusable, 400 invalid-key-source;
//     with WithWebhook, the sender's id, after its signature is verified
//     (401 invalid-signature, before any store call);
//   - the stored key hashes the header with the caller identity (JWT sub
//     claim, IAM userArn or callerId, a Lambda authorizer's principalId or
//     sub, and the header of WithIdentityHeader), so one caller cannot
//     replay or block another's key; without an identity, all callers share
//     the key space;
//   - the fingerprint covers the method, the path and the body (a base64
//     body is decoded first; a JSON body is compared canonically, only the
//     fields WithFingerprintSelection selects, any other body byte for
//     byte); a body that does not decode from base64, JSON nested deeper
//     than MaxBodyDepth, or JSON without a selected field: 400;
//   - in progress elsewhere: 409 with Retry-After (whole seconds until the
//     holder's lease ends, or, answered from the runner's memory of keys in
//     progress, until its next recheck; at least 1); same key with another
//     method, path or body: 422;
//   - replay: the stored response, plus Idempotent-Replayed: true, then
//     the hook of WithResponseHook, if any (it cannot remove the marker);
//   - a response with status 401 or 403 is returned as it is and leaves no
//     record: the reservation is released (core.MarkNoRecord), so the next
//     request with the key runs the handler, and no attempt is counted;
//   - a response with status 500 or more, 408 or 429, or a handler error
//     (answered as a 500 problem), is returned as it is but not stored, and
//     the runner does not retry it in-process: the client's retry runs the
//     handler again. Each such run counts against idem.WithMaxAttempts;
//     once they are used up, the key answers 500 retries-exhausted until its
//     record expires;
//   - store failures: 503 with Retry-After: 1 when transient, else 500;
//   - a StatusCode of 0 is answered (and stored) as 200.
//
// The wrappers' own errors are RFC 9457 problem details (Problem) with
// Content-Type application/problem+json.
func HTTPAPI(runner *idem.Runner, handler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), opts ...HTTPOption) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	return newHTTPWrapper(runner, handler, httpAPIFlavour, opts)
}

// FunctionURL returns a handler for Lambda function URLs (buffered invoke
// mode) that makes handler idempotent per Idempotency-Key header; see
// HTTPAPI for the rules. The response keeps its Cookies on a replay. The
// caller identity that scopes keys, when the URL uses AWS_IAM auth, is the
// IAM caller's userArn (or callerId) and, for a Cognito identity pool's
// user, the identity id, which the handler reads from the event as Lambda
// sends it when started with lambda.Start(handler) (see FunctionURLHandler).
func FunctionURL(runner *idem.Runner, handler func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error), opts ...HTTPOption) (FunctionURLHandler, error) {
	h, err := newHTTPWrapper(runner, handler, functionURLFlavour, opts)
	return h, err
}

// ALB returns a handler for Application Load Balancer target groups that
// makes handler idempotent per Idempotency-Key header; see HTTPAPI for the
// rules. A target group with multi-value headers enabled sends
// MultiValueHeaders and reads only the response's MultiValueHeaders; one
// without sends and reads Headers. The wrapper answers in the mode the
// request came in (its own answers, and the replay marker), so the handler
// should too. The response keeps its MultiValueHeaders (a second Set-Cookie
// included) on a replay.
//
// An ALB has no caller identity of its own: by default all callers share
// one key space, so keys should be random (UUIDs). Behind a listener rule
// that authenticates users (authenticate-oidc or authenticate-cognito),
// WithIdentityHeader("x-amzn-oidc-identity") scopes keys by the user the
// ALB authenticated. Without such a rule in front of every route to the
// target group, a client can send that header itself: then it only
// partitions the anonymous key space.
func ALB(runner *idem.Runner, handler func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error), opts ...HTTPOption) (func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error), error) {
	return newHTTPWrapper(runner, handler, albFlavour, opts)
}

// IdempotencyKeyHeader returns the Idempotency-Key value of headers (looked
// up case-insensitively; a quoted string is unquoted): ok is false if there
// is none. The error, for a present but unusable header (empty, longer than
// MaxHeaderKeyLen, characters outside visible ASCII, a comma, a double quote
// or a backslash left after unquoting, several values), wraps
// core.ErrInvalidKey. A comma is refused because HTTP APIs
// and function URLs deliver a repeated header as one value joined with
// commas; refusing it everywhere keeps one rule for every event type.
func IdempotencyKeyHeader(headers map[string]string, multi map[string][]string) (value string, ok bool, err error) {
	return httprule.KeyHeader(headers, multi)
}

// HTTPKey returns the stored key of a request: the Idempotency-Key value
// hashed with the caller identity (labelled parts such as "sub=..."; none
// means anonymous; see core.DeriveKey). The method and the path are not
// part of it but of the fingerprint (RequestPayload), so that the key used
// on another endpoint is refused as reused rather than run again. The error
// wraps core.ErrInvalidKey.
func HTTPKey(headerValue string, identity []string) (string, error) {
	return httprule.Key(headerValue, identity)
}

// DecodeBody returns the bytes of a request body as API Gateway, function
// URLs and ALBs deliver it: body itself, or, when isBase64 is set (binary
// media types, and any body an HTTP API, a function URL or an ALB chooses
// to encode), its base64 decoding. The error, for a body that does not
// decode, wraps core.ErrInvalidPayload. Handlers use it to read the body
// the wrappers fingerprinted.
func DecodeBody(body string, isBase64 bool) ([]byte, error) {
	if !isBase64 {
		return []byte(body), nil
	}
	raw, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return nil, fmt.Errorf("%w: body is not valid base64: %v", core.ErrInvalidPayload, err)
	}
	return raw, nil
}

// RequestPayload returns the JSON that fingerprints a request (without a
// fingerprint selection; the wrappers compute the same fingerprint without
// building it): its method,
// its path and its body (decoded by DecodeBody), as
// {"method":..,"path":..,"json":<body>} for a JSON body,
// {"method":..,"path":..,"text":"<body>"} for other UTF-8 text and
// {"method":..,"path":..,"base64":"<body>"} for binary data; an empty body
// is left out. The error, for a base64 body that does not decode or a body
// that opens with '[' or '{' and nests arrays and objects deeper than
// MaxBodyDepth, wraps core.ErrInvalidPayload.
func RequestPayload(method, path, body string, isBase64 bool) ([]byte, error) {
	raw, err := DecodeBody(body, isBase64)
	if err != nil {
		return nil, err
	}
	return httprule.Payload(method, path, raw)
}
