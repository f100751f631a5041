package idemlambda

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// Header names and limits of the HTTP wrappers.
const (
	// HeaderIdempotencyKey is the request header that carries the client's
	// idempotency key. It is looked up case-insensitively.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderReplayed is set to "true" on a response replayed from the store.
	HeaderReplayed = "Idempotent-Replayed"
	// MaxHeaderKeyLen is the longest Idempotency-Key value accepted, in
	// characters.
	MaxHeaderKeyLen = 255
	// MaxBodyDepth is the deepest nesting of arrays and objects accepted in
	// a JSON request body. JSON nested deeper than 10,000 is refused by
	// encoding/json and by the fingerprint's canonicalizer, and the
	// fingerprint (RequestPayload) puts the body one level down.
	MaxBodyDepth = 9999
	// ProblemContentType is the media type of the wrappers' own error
	// responses (RFC 9457 problem details).
	ProblemContentType = "application/problem+json"
	// ProblemTypeBase starts the type URI of every problem the wrappers
	// answer; the rest is one of the Problem* constants.
	ProblemTypeBase = "https://github.com/idemgo/idem#"
)

// Problem types (appended to ProblemTypeBase) of the HTTP wrappers' own
// responses.
const (
	// ProblemMissingKey: 400, the request has no Idempotency-Key header.
	ProblemMissingKey = "missing-idempotency-key"
	// ProblemInvalidKey: 400, the Idempotency-Key header is empty, too
	// long, repeated (also as one comma-joined value) or has characters
	// other than visible ASCII, or a comma.
	ProblemInvalidKey = "invalid-idempotency-key"
	// ProblemInvalidBody: 400, a base64 body that does not decode, or a
	// JSON body nested deeper than MaxBodyDepth.
	ProblemInvalidBody = "invalid-body"
	// ProblemInProgress: 409, a request with the same key is still being
	// processed; Retry-After says when its lease ends.
	ProblemInProgress = "request-in-progress"
	// ProblemKeyReused: 422, the key was used with another method, path or
	// body.
	ProblemKeyReused = "idempotency-key-reused"
	// ProblemRetriesExhausted: 500, the key's requests were answered with
	// server errors, 408 or 429 as often as the runner allows
	// (idem.WithMaxAttempts); the key will not run again until its record
	// expires. Send a new key.
	ProblemRetriesExhausted = "retries-exhausted"
	// ProblemResponseOmitted: 500, the request succeeded earlier but its
	// response was too large for the store to keep, so it cannot be
	// replayed.
	ProblemResponseOmitted = "response-not-replayable"
	// ProblemStoreUnavailable: 503, the idempotency store failed; retry.
	ProblemStoreUnavailable = "store-unavailable"
	// ProblemInternal: 500, the handler returned an error (not stored: a
	// retry runs the handler again) or another internal failure.
	ProblemInternal = "internal-error"
)

// Response is what an HTTP handler answers, and what is stored and replayed
// for its key: the status code, headers and body. A StatusCode of 0 means
// 200. Responses with a status of 500 or more, 408 or 429 are returned to the
// client but not stored: the next request with the same key runs the handler
// again.
type Response struct {
	// StatusCode is the HTTP status (0 means 200).
	StatusCode int `json:"statusCode"`
	// Headers are the response headers.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is the response body, base64-encoded if IsBase64Encoded.
	Body string `json:"body"`
	// IsBase64Encoded says that Body holds base64 of a binary body.
	IsBase64Encoded bool `json:"isBase64Encoded,omitempty"`
}

// Problem is an RFC 9457 problem details object, the body of the HTTP
// wrappers' own error responses.
type Problem struct {
	// Type is a URI naming the problem: ProblemTypeBase + one of the
	// Problem* constants.
	Type string `json:"type"`
	// Title is a short summary of the problem type.
	Title string `json:"title"`
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Detail explains this occurrence.
	Detail string `json:"detail,omitempty"`
}

// RESTAPI returns a handler for API Gateway REST APIs (Lambda proxy
// integration) that makes handler idempotent per Idempotency-Key header; see
// HTTPAPI for the rules. The caller identity that scopes keys is, for each
// one present: the authorizer's principalId, its claims' sub (Cognito user
// pool authorizer), the IAM caller's userArn (or caller), the Cognito
// identity id and the API key id.
func RESTAPI(runner *idem.Runner, handler func(ctx context.Context, req events.APIGatewayProxyRequest) (Response, error), opts ...HTTPOption) (func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error), error) {
	w, err := newHTTPWrapper(runner, handler != nil, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		r := w.serve(ctx, restRequest(req), func(ctx context.Context) (Response, error) { return handler(ctx, req) })
		return events.APIGatewayProxyResponse{StatusCode: r.StatusCode, Headers: r.Headers, Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}, nil
	}, nil
}

// HTTPAPI returns a handler for API Gateway HTTP APIs (payload format 2.0)
// that makes handler idempotent per Idempotency-Key header:
//
//   - the header (case-insensitive; an RFC 8941 quoted string is unquoted)
//     must hold 1 to MaxHeaderKeyLen visible ASCII characters other than a
//     comma (HTTP APIs and function URLs join a repeated header's values
//     with commas); missing: 400 (or, with WithOptionalKey, the handler runs
//     unkeyed); invalid or repeated: 400;
//   - the stored key hashes the header with the caller identity (JWT sub
//     claim, IAM userArn or callerId, a Lambda authorizer's principalId or
//     sub), so one caller cannot replay or block another's key; without an
//     identity, all callers share the key space;
//   - the fingerprint covers the method, the path and the body (a base64
//     body is decoded first; a JSON body is compared canonically, any other
//     body byte for byte); a body that does not decode from base64, or JSON
//     nested deeper than MaxBodyDepth: 400;
//   - in progress elsewhere: 409 with Retry-After (whole seconds until the
//     holder's lease ends, at least 1); same key with another method, path
//     or body: 422;
//   - replay: the stored status, headers and body, plus
//     Idempotent-Replayed: true;
//   - a response with status 500 or more, 408 or 429, or a handler error
//     (answered as a 500 problem), is returned as it is but not stored, and
//     the runner does not retry it in-process: the client's retry runs the
//     handler again. Each such run counts against idem.WithMaxAttempts;
//     once they are used up, the key answers 500 retries-exhausted until its
//     record expires;
//   - store failures: 503 with Retry-After: 1 when transient, else 500.
//
// The wrappers' own errors are RFC 9457 problem details (Problem) with
// Content-Type application/problem+json.
func HTTPAPI(runner *idem.Runner, handler func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (Response, error), opts ...HTTPOption) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	w, err := newHTTPWrapper(runner, handler != nil, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		r := w.serve(ctx, httpAPIRequest(req), func(ctx context.Context) (Response, error) { return handler(ctx, req) })
		return events.APIGatewayV2HTTPResponse{StatusCode: r.StatusCode, Headers: r.Headers, Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}, nil
	}, nil
}

// FunctionURL returns a handler for Lambda function URLs that makes handler
// idempotent per Idempotency-Key header; see HTTPAPI for the rules. The
// caller identity that scopes keys is the IAM caller's userArn (or callerId)
// when the URL uses AWS_IAM auth.
func FunctionURL(runner *idem.Runner, handler func(ctx context.Context, req events.LambdaFunctionURLRequest) (Response, error), opts ...HTTPOption) (func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error), error) {
	w, err := newHTTPWrapper(runner, handler != nil, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		r := w.serve(ctx, functionURLRequest(req), func(ctx context.Context) (Response, error) { return handler(ctx, req) })
		return events.LambdaFunctionURLResponse{StatusCode: r.StatusCode, Headers: r.Headers, Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}, nil
	}, nil
}

// httpRequest is the flavour-neutral view of a request.
type httpRequest struct {
	method, path string
	headers      map[string]string
	multi        map[string][]string // REST only
	body         string
	base64       bool
	identity     []string // labelled parts, in a fixed order
}

func restRequest(r events.APIGatewayProxyRequest) httpRequest {
	var id []string
	if a := r.RequestContext.Authorizer; a != nil {
		id = addIdentity(id, "principal", stringOf(a["principalId"]))
		if claims, ok := a["claims"].(map[string]any); ok {
			id = addIdentity(id, "sub", stringOf(claims["sub"]))
		}
	}
	ri := r.RequestContext.Identity
	if ri.UserArn != "" {
		id = addIdentity(id, "iam", ri.UserArn)
	} else {
		id = addIdentity(id, "iam", ri.Caller)
	}
	id = addIdentity(id, "cognito", ri.CognitoIdentityID)
	id = addIdentity(id, "apikey", ri.APIKeyID)
	method := r.HTTPMethod
	if method == "" {
		method = r.RequestContext.HTTPMethod
	}
	return httpRequest{method: method, path: r.Path, headers: r.Headers, multi: r.MultiValueHeaders, body: r.Body, base64: r.IsBase64Encoded, identity: id}
}

func httpAPIRequest(r events.APIGatewayV2HTTPRequest) httpRequest {
	var id []string
	if a := r.RequestContext.Authorizer; a != nil {
		if a.JWT != nil {
			id = addIdentity(id, "sub", a.JWT.Claims["sub"])
		}
		if a.IAM != nil {
			if a.IAM.UserARN != "" {
				id = addIdentity(id, "iam", a.IAM.UserARN)
			} else {
				id = addIdentity(id, "iam", a.IAM.CallerID)
			}
		}
		if a.Lambda != nil {
			id = addIdentity(id, "principal", stringOf(a.Lambda["principalId"]))
			id = addIdentity(id, "lambda-sub", stringOf(a.Lambda["sub"]))
		}
	}
	path := r.RawPath
	if path == "" {
		path = r.RequestContext.HTTP.Path
	}
	return httpRequest{method: r.RequestContext.HTTP.Method, path: path, headers: r.Headers, body: r.Body, base64: r.IsBase64Encoded, identity: id}
}

func functionURLRequest(r events.LambdaFunctionURLRequest) httpRequest {
	var id []string
	if a := r.RequestContext.Authorizer; a != nil && a.IAM != nil {
		if a.IAM.UserARN != "" {
			id = addIdentity(id, "iam", a.IAM.UserARN)
		} else {
			id = addIdentity(id, "iam", a.IAM.CallerID)
		}
	}
	path := r.RawPath
	if path == "" {
		path = r.RequestContext.HTTP.Path
	}
	return httpRequest{method: r.RequestContext.HTTP.Method, path: path, headers: r.Headers, body: r.Body, base64: r.IsBase64Encoded, identity: id}
}

func addIdentity(id []string, label, v string) []string {
	if v == "" {
		return id
	}
	return append(id, label+"="+v)
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

// IdempotencyKeyHeader returns the Idempotency-Key value of headers (looked
// up case-insensitively; a quoted string is unquoted): ok is false if there
// is none. The error, for a present but unusable header (empty, longer than
// MaxHeaderKeyLen, characters outside visible ASCII, a comma, several
// values), wraps core.ErrInvalidKey. A comma is refused because HTTP APIs
// and function URLs deliver a repeated header as one value joined with
// commas; refusing it everywhere keeps one rule for every event type.
func IdempotencyKeyHeader(headers map[string]string, multi map[string][]string) (value string, ok bool, err error) {
	var vals []string
	for k, vs := range multi {
		if strings.EqualFold(k, HeaderIdempotencyKey) {
			vals = append(vals, vs...)
		}
	}
	if len(vals) == 0 {
		for k, v := range headers {
			if strings.EqualFold(k, HeaderIdempotencyKey) {
				vals = append(vals, v)
			}
		}
	}
	if len(vals) == 0 {
		return "", false, nil
	}
	if len(vals) > 1 {
		return "", true, fmt.Errorf("%w: %d Idempotency-Key headers, want one", core.ErrInvalidKey, len(vals))
	}
	v := vals[0]
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	if v == "" {
		return "", true, fmt.Errorf("%w: empty Idempotency-Key header", core.ErrInvalidKey)
	}
	if len(v) > MaxHeaderKeyLen {
		return "", true, fmt.Errorf("%w: Idempotency-Key header is %d characters, at most %d", core.ErrInvalidKey, len(v), MaxHeaderKeyLen)
	}
	for i := 0; i < len(v); i++ {
		if v[i] == ',' {
			return "", true, fmt.Errorf("%w: Idempotency-Key header has a comma at offset %d: repeated headers, or a key that is not allowed", core.ErrInvalidKey, i)
		}
		if v[i] < 0x21 || v[i] > 0x7e {
			return "", true, fmt.Errorf("%w: Idempotency-Key header has byte %#02x at offset %d, want visible ASCII", core.ErrInvalidKey, v[i], i)
		}
	}
	return v, true, nil
}

// HTTPKey returns the stored key of a request: the Idempotency-Key value
// hashed with the caller identity (labelled parts such as "sub=..."; none
// means anonymous; see core.DeriveKey). The method and the path are not
// part of it but of the fingerprint (RequestPayload), so that the key used
// on another endpoint is refused as reused rather than run again. The error
// wraps core.ErrInvalidKey.
func HTTPKey(headerValue string, identity []string) (string, error) {
	who := "anonymous"
	if len(identity) > 0 {
		who = strings.Join(identity, "\n")
	}
	return core.DeriveKey("http", digest(who), headerValue)
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// DecodeBody returns the bytes of a request body as API Gateway and function
// URLs deliver it: body itself, or, when isBase64 is set (binary media types,
// and any body an HTTP API or a function URL chooses to encode), its base64
// decoding. The error, for a body that does not decode, wraps
// core.ErrInvalidPayload. Handlers use it to read the body the wrappers
// fingerprinted.
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

// RequestPayload returns the JSON that fingerprints a request: its method,
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
	if nestsDeeper(raw, MaxBodyDepth) {
		return nil, fmt.Errorf("%w: body nests arrays and objects deeper than %d", core.ErrInvalidPayload, MaxBodyDepth)
	}
	p := struct {
		Method string          `json:"method"`
		Path   string          `json:"path"`
		JSON   json.RawMessage `json:"json,omitempty"`
		Text   *string         `json:"text,omitempty"`
		Base64 []byte          `json:"base64,omitempty"`
	}{Method: method, Path: path}
	switch {
	case len(raw) == 0:
	case jsonCanonical(raw) != nil:
		p.JSON = jsonCanonical(raw)
	case utf8.Valid(raw):
		s := string(raw)
		p.Text = &s
	default:
		p.Base64 = raw
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", core.ErrInvalidPayload, err)
	}
	return b, nil
}

// nestsDeeper reports whether b, a document that opens with '[' or '{'
// after optional whitespace, has more than max arrays and objects open at
// once. Brackets inside strings do not count; the rest of the syntax is not
// checked.
func nestsDeeper(b []byte, max int) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	if len(t) == 0 || (t[0] != '[' && t[0] != '{') {
		return false
	}
	depth, inString, escaped := 0, false, false
	for _, c := range t {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > max {
				return true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return false
}

func jsonCanonical(b []byte) []byte {
	c, err := core.Canonicalize(b)
	if err != nil {
		return nil
	}
	return c
}

type httpWrapper struct {
	runner *idem.Runner
	cfg    config
}

func newHTTPWrapper(runner *idem.Runner, hasHandler bool, opts []HTTPOption) (*httpWrapper, error) {
	if runner == nil {
		return nil, errors.New("idemlambda: nil runner")
	}
	if !hasHandler {
		return nil, errors.New("idemlambda: nil handler")
	}
	cfg, err := configure(opts, HTTPOption.applyHTTP)
	if err != nil {
		return nil, err
	}
	return &httpWrapper{runner: runner, cfg: cfg}, nil
}

// errRetryableResponse is the handler failure recorded for a response that
// is not stored (see retryableStatus), marked core.MarkRetryLater: the key
// stays open for the client's own retry, and the runner does not retry it.
var errRetryableResponse = errors.New("idemlambda: handler answered a status the client retries")

// retryableStatus reports whether a handler's response is returned to the
// client but not stored: a server error (500 or more), 408 Request Timeout
// or 429 Too Many Requests, all of which ask the client to retry, with the
// same key, a request that did not take effect.
func retryableStatus(code int) bool {
	return code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
}

func (w *httpWrapper) serve(ctx context.Context, req httpRequest, run func(context.Context) (Response, error)) Response {
	key, payload, early := w.admit(ctx, req, run)
	if early != nil {
		return *early
	}
	var fresh *Response // the response of this call's own execution, if any
	out, err := w.runner.Do(ctx, key, payload, func(ctx context.Context) ([]byte, error) {
		resp, herr := run(withStoredKey(ctx, key))
		if herr != nil {
			w.log(ctx, slog.LevelError, req, key, "handler_error", http.StatusInternalServerError, idem.Outcome{}, herr)
			resp = problem(http.StatusInternalServerError, ProblemInternal, "Internal error", "")
		}
		resp = normalize(resp)
		fresh = &resp
		if retryableStatus(resp.StatusCode) {
			return nil, core.MarkRetryLater(fmt.Errorf("%w: status %d", errRetryableResponse, resp.StatusCode))
		}
		b, merr := json.Marshal(resp)
		if merr != nil { // a Response always marshals
			return nil, core.MarkRetryLater(merr)
		}
		return b, nil
	})
	if fresh != nil {
		// The handler ran in this call: its response is the truth, whether
		// or not its outcome could be recorded (a failed record is logged).
		level := slog.LevelInfo
		if err != nil {
			level = slog.LevelWarn
		}
		w.log(ctx, level, req, key, out.Verdict.String(), fresh.StatusCode, out, err)
		return *fresh
	}
	resp, err := w.answer(out, err)
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
	}
	w.log(ctx, level, req, key, out.Verdict.String(), resp.StatusCode, out, err)
	return resp
}

// admit takes the stored key and the payload of a request. When the request
// cannot be keyed, early is the answer: a 400, or the handler's own answer
// when it ran unkeyed (WithOptionalKey).
func (w *httpWrapper) admit(ctx context.Context, req httpRequest, run func(context.Context) (Response, error)) (key string, payload []byte, early *Response) {
	value, present, err := IdempotencyKeyHeader(req.headers, req.multi)
	switch {
	case err != nil:
		w.log(ctx, slog.LevelWarn, req, "", "invalid_key", http.StatusBadRequest, idem.Outcome{}, err)
		resp := problem(http.StatusBadRequest, ProblemInvalidKey, "Invalid Idempotency-Key header", err.Error())
		return "", nil, &resp
	case !present && w.cfg.optionalKey:
		resp, herr := run(ctx)
		if herr != nil {
			resp = problem(http.StatusInternalServerError, ProblemInternal, "Internal error", "")
		}
		resp = normalize(resp)
		w.log(ctx, slog.LevelInfo, req, "", "unkeyed", resp.StatusCode, idem.Outcome{}, herr)
		return "", nil, &resp
	case !present:
		w.log(ctx, slog.LevelWarn, req, "", "missing_key", http.StatusBadRequest, idem.Outcome{}, nil)
		resp := problem(http.StatusBadRequest, ProblemMissingKey, "Missing Idempotency-Key header",
			"This endpoint needs an Idempotency-Key header (for example a random UUID) that is the same on every retry of one request.")
		return "", nil, &resp
	}
	if key, err = HTTPKey(value, req.identity); err != nil {
		w.log(ctx, slog.LevelWarn, req, "", "invalid_key", http.StatusBadRequest, idem.Outcome{}, err)
		resp := problem(http.StatusBadRequest, ProblemInvalidKey, "Invalid Idempotency-Key header", err.Error())
		return "", nil, &resp
	}
	if payload, err = RequestPayload(req.method, req.path, req.body, req.base64); err != nil {
		w.log(ctx, slog.LevelWarn, req, key, "invalid_body", http.StatusBadRequest, idem.Outcome{}, err)
		resp := problem(http.StatusBadRequest, ProblemInvalidBody, "Invalid request body", err.Error())
		return "", nil, &resp
	}
	return key, payload, nil
}

// answer maps the runner's answer, for a call whose handler did not run in
// it, to the response (the HTTP status table of the package documentation)
// and the error to log.
func (w *httpWrapper) answer(out idem.Outcome, err error) (Response, error) {
	switch out.Verdict {
	case idem.Replayed:
		return w.replay(out)
	case idem.InProgress:
		var ipe *core.InProgressError
		errors.As(err, &ipe)
		resp := problem(http.StatusConflict, ProblemInProgress, "Request in progress",
			"A request with this Idempotency-Key is still being processed. Retry after the time in Retry-After.")
		resp.Headers["Retry-After"] = strconv.Itoa(retryAfterSeconds(ipe.RetryAt, w.cfg.now()))
		return resp, err
	case idem.KeyReused:
		return problem(http.StatusUnprocessableEntity, ProblemKeyReused, "Idempotency-Key reused",
			"This Idempotency-Key was used with another request (method, path or body). Use a new key for a new request."), err
	case idem.RetriesExhausted:
		return problem(http.StatusInternalServerError, ProblemRetriesExhausted, "Retries exhausted",
			"Requests with this Idempotency-Key failed with errors to retry (5xx, 408, 429) too often; it will not run again. Use a new key."), err
	case idem.InvalidKey:
		return problem(http.StatusBadRequest, ProblemInvalidKey, "Invalid Idempotency-Key header", err.Error()), err
	case idem.InvalidPayload:
		return problem(http.StatusBadRequest, ProblemInvalidBody, "Invalid request body", err.Error()), err
	case idem.StoreFailed, idem.FailedTransiently:
		if core.Classify(err, core.DefaultClassifiers...) == core.Transient {
			resp := problem(http.StatusServiceUnavailable, ProblemStoreUnavailable, "Service unavailable", "The idempotency store failed; retry.")
			resp.Headers["Retry-After"] = "1"
			return resp, err
		}
	}
	return problem(http.StatusInternalServerError, ProblemInternal, "Internal error", ""), err
}

// replay is the stored response, marked as replayed.
func (w *httpWrapper) replay(out idem.Outcome) (Response, error) {
	if out.ResultOmitted {
		resp := problem(http.StatusInternalServerError, ProblemResponseOmitted, "Response cannot be replayed",
			"This request succeeded earlier, but its response was too large to keep.")
		resp.Headers[HeaderReplayed] = "true"
		return resp, nil
	}
	var resp Response
	if err := json.Unmarshal(out.Result, &resp); err != nil {
		return problem(http.StatusInternalServerError, ProblemInternal, "Internal error", ""),
			fmt.Errorf("idemlambda: stored response does not decode: %w", err)
	}
	resp = normalize(resp)
	resp.Headers = cloneHeaders(resp.Headers)
	resp.Headers[HeaderReplayed] = "true"
	return resp, nil
}

func normalize(r Response) Response {
	if r.StatusCode == 0 {
		r.StatusCode = http.StatusOK
	}
	return r
}

func cloneHeaders(h map[string]string) map[string]string {
	c := make(map[string]string, len(h)+1)
	for k, v := range h {
		c[k] = v
	}
	return c
}

// retryAfterSeconds is the whole seconds from now to at, rounded up, at
// least 1.
func retryAfterSeconds(at, now time.Time) int {
	s := math.Ceil(at.Sub(now).Seconds())
	if s < 1 {
		return 1
	}
	if s > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(s)
}

func problem(status int, typ, title, detail string) Response {
	b, _ := json.Marshal(Problem{Type: ProblemTypeBase + typ, Title: title, Status: status, Detail: detail}) // always marshals
	return Response{StatusCode: status, Headers: map[string]string{"Content-Type": ProblemContentType}, Body: string(b)}
}

func (w *httpWrapper) log(ctx context.Context, level slog.Level, req httpRequest, key, decision string, status int, out idem.Outcome, err error) {
	l := w.cfg.logger
	if l == nil || !l.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("wrapper", "http"),
		slog.String("method", req.method),
		slog.String("path", req.path),
		slog.String("verdict", decision),
		slog.Int("status", status),
	}
	if len(req.identity) > 0 {
		labels := make([]string, 0, len(req.identity))
		for _, p := range req.identity {
			labels = append(labels, p[:strings.IndexByte(p, '=')])
		}
		sort.Strings(labels)
		attrs = append(attrs, slog.String("identity", strings.Join(labels, ",")))
	}
	attrs = outcomeAttrs(attrs, key, out, err)
	l.LogAttrs(ctx, level, "idemlambda", attrs...)
}
