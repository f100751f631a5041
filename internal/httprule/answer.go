package httprule

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// Media type and type URIs of the wrappers' own answers.
const (
	// ContentType is the media type of the wrappers' own answers (RFC
	// 9457 problem details).
	ContentType = "application/problem+json"
	// TypeBase starts the type URI of every problem; the rest is one of the
	// problem type names below (anchors in the README).
	TypeBase = "https://github.com/idemgo/idem#"
)

// Problem type names, appended to TypeBase.
const (
	MissingKey       = "missing-idempotency-key"   // 400
	InvalidKey       = "invalid-idempotency-key"   // 400
	MissingKeySource = "missing-key-source"        // 400
	InvalidKeySource = "invalid-key-source"        // 400
	InvalidBody      = "invalid-body"              // 400
	InvalidSignature = "invalid-signature"         // 401
	BodyTooLarge     = "body-too-large"            // 413
	InProgress       = "request-in-progress"       // 409
	KeyReused        = "idempotency-key-reused"    // 422
	RetriesExhausted = "retries-exhausted"         // 500
	ResponseOmitted  = "response-not-replayable"   // 500
	StoreUnavailable = "store-unavailable"         // 503
	CommitRefused    = "commit-refused"            // 503
	StartUnavailable = "durable-start-unavailable" // 503 (package durable)
	Internal         = "internal-error"            // 500
)

// Problem is an RFC 9457 problem details object, the body of the wrappers'
// own answers.
type Problem struct {
	// Type is a URI naming the problem: TypeBase + a problem type name.
	Type string `json:"type"`
	// Title is a short summary of the problem type.
	Title string `json:"title"`
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Detail explains this occurrence.
	Detail string `json:"detail,omitempty"`
}

type spec struct {
	status        int
	title, detail string
}

// specs is the HTTP status table of the wrappers' own answers.
var specs = map[string]spec{
	MissingKey:       {http.StatusBadRequest, "Missing Idempotency-Key header", "This endpoint needs an Idempotency-Key header (for example a random UUID) that is the same on every retry of one request."},
	InvalidKey:       {http.StatusBadRequest, "Invalid Idempotency-Key header", ""},
	MissingKeySource: {http.StatusBadRequest, "Missing idempotency key source", "This endpoint takes its idempotency key from a header or a body field that the request lacks."},
	InvalidKeySource: {http.StatusBadRequest, "Invalid idempotency key source", ""},
	InvalidBody:      {http.StatusBadRequest, "Invalid request body", ""},
	InvalidSignature: {http.StatusUnauthorized, "Invalid webhook signature", "This endpoint accepts only deliveries its sender signed; this request's signature is missing or matches none of the endpoint's secrets."},
	BodyTooLarge:     {http.StatusRequestEntityTooLarge, "Request body too large", ""},
	InProgress:       {http.StatusConflict, "Request in progress", "A request with this Idempotency-Key is still being processed. Retry after the time in Retry-After."},
	KeyReused:        {http.StatusUnprocessableEntity, "Idempotency-Key reused", "This Idempotency-Key was used with another request (method, path or body). Use a new key for a new request."},
	RetriesExhausted: {http.StatusInternalServerError, "Retries exhausted", "Requests with this Idempotency-Key failed with errors to retry (5xx, 408, 429) too often; it will not run again. Use a new key."},
	ResponseOmitted:  {http.StatusInternalServerError, "Response cannot be replayed", "This request succeeded earlier, but its response was not kept (too large, or streamed), so it cannot be replayed."},
	StoreUnavailable: {http.StatusServiceUnavailable, "Service unavailable", "The idempotency store failed; retry."},
	CommitRefused:    {http.StatusServiceUnavailable, "Request not committed", "The request ran, but the store refused to commit its outcome and kept nothing of it; retry with the same Idempotency-Key to run it again."},
	StartUnavailable: {http.StatusServiceUnavailable, "Durable execution not started", "Lambda throttled or failed the start of this request's durable execution. Retry after the time in Retry-After: a retry starts at most one execution."},
	Internal:         {http.StatusInternalServerError, "Internal error", ""},
}

// Answer is one of the wrappers' own answers, given in the handler's place:
// a problem, its status and headers, and the verdict it answers.
type Answer struct {
	// Status is the HTTP status code.
	Status int
	// Header holds Content-Type and, where they apply, Retry-After and
	// HeaderReplayed.
	Header map[string]string
	// Body is the problem's JSON.
	Body []byte
	// Verdict is what happened to the request (idem.InvalidKey for a
	// missing key, idem.InvalidPayload for a body refused before the
	// runner saw it).
	Verdict idem.Verdict
}

// NewAnswer returns the answer of problem type typ (a name above), with
// detail, or the type's own detail when detail is empty.
func NewAnswer(typ, detail string, v idem.Verdict) Answer {
	s, ok := specs[typ]
	if !ok {
		typ, s = Internal, specs[Internal]
	}
	if detail == "" {
		detail = s.detail
	}
	b, _ := json.Marshal(Problem{Type: TypeBase + typ, Title: s.title, Status: s.status, Detail: detail}) // always marshals
	return Answer{Status: s.status, Header: map[string]string{"Content-Type": ContentType}, Body: b, Verdict: v}
}

// sourced are the details of the problems about a key, for a key taken
// from configured parts (the %s names them: Describe), which are no
// Idempotency-Key header.
var sourced = map[string]spec{
	InProgress:       {title: "Request in progress", detail: "A request with the same key, from %s, is still being processed. Retry after the time in Retry-After."},
	KeyReused:        {title: "Key from %s reused", detail: "The key this endpoint takes from %s was used with another request (method, path or body); it is not run again."},
	RetriesExhausted: {title: "Retries exhausted", detail: "Requests with the same key, from %s, failed with errors to retry (5xx, 408, 429) too often; it will not run again until its record expires."},
}

// keyAnswer is the answer of problem type typ about the key of parts: the
// type's own words for the Idempotency-Key header, else words that name
// the parts (Describe).
func keyAnswer(typ string, parts []KeyPart, v idem.Verdict) Answer {
	a := NewAnswer(typ, "", v)
	sp, ok := sourced[typ]
	if isDefault(parts) || !ok {
		return a
	}
	src := Describe(parts)
	title := sp.title
	if strings.Contains(title, "%s") {
		title = fmt.Sprintf(title, src)
	}
	a.Body, _ = json.Marshal(Problem{Type: TypeBase + typ, Title: title, Status: a.Status, Detail: fmt.Sprintf(sp.detail, src)}) // always marshals
	return a
}

// Refusal returns the answer to a call whose handler did not run in it and
// that is not a replay of a stored response, or whose handler's answer is
// not to be given (idem.CommitRefused: its commit was refused, nothing
// kept), from the runner's verdict and error; now is the wrapper's clock,
// for Retry-After; parts are the sources of the request's key, which the
// answer names.
func Refusal(v idem.Verdict, err error, now time.Time, parts []KeyPart) Answer {
	var detail string
	if err != nil {
		detail = err.Error()
	}
	switch v {
	case idem.InProgress:
		a := keyAnswer(InProgress, parts, v)
		var ipe *core.InProgressError
		if errors.As(err, &ipe) {
			a.Header["Retry-After"] = strconv.Itoa(RetryAfterSeconds(ipe.RetryAt, now))
		} else {
			a.Header["Retry-After"] = "1"
		}
		return a
	case idem.KeyReused:
		return keyAnswer(KeyReused, parts, v)
	case idem.RetriesExhausted:
		return keyAnswer(RetriesExhausted, parts, v)
	case idem.InvalidKey:
		return NewAnswer(InvalidKey, detail, v)
	case idem.InvalidPayload:
		return NewAnswer(InvalidBody, detail, v)
	case idem.CommitRefused:
		a := NewAnswer(CommitRefused, "", v)
		a.Header["Retry-After"] = "1"
		return a
	case idem.StoreFailed, idem.FailedTransiently:
		if core.Classify(err, core.DefaultClassifiers...) == core.Transient {
			a := NewAnswer(StoreUnavailable, "", v)
			a.Header["Retry-After"] = "1"
			return a
		}
	}
	return NewAnswer(Internal, "", v)
}

// Omitted is the answer to a replay of a success whose response was not
// kept (too large for the store, or not recorded by the middleware): 500
// response-not-replayable, marked as replayed.
func Omitted() Answer {
	a := NewAnswer(ResponseOmitted, "", idem.ReplayOmitted)
	a.Header[HeaderReplayed] = "true"
	return a
}

// ErrRetryableResponse is the handler failure recorded for an answer that
// is not stored (see RetryableStatus).
var ErrRetryableResponse = errors.New("idem: handler answered a status the client retries")

// ErrRefusedResponse is the handler's answer that leaves no record: a
// request refused for its credentials (see Unstored).
var ErrRefusedResponse = errors.New("idem: handler refused the request for its credentials")

// Unstored is nil for a handler's answer of status code that is stored
// for replay; else the error the wrapper's handler function returns
// instead of the answer: for a retryable status (RetryableStatus),
// RetryLater's (recorded as a retryable failure, the key left open for the
// client's retry); for 401 Unauthorized and 403 Forbidden, an answer to a
// request's credentials rather than to the request, marked with
// core.MarkNoRecord: the runner releases the reservation (a conditional
// delete in the completion's place; no attempt counted), so that a
// delivery signed with a corrected secret runs.
func Unstored(code int) error {
	switch {
	case RetryableStatus(code):
		return RetryLater(code)
	case Refused(code):
		return core.MarkNoRecord(fmt.Errorf("%w: status %d", ErrRefusedResponse, code))
	}
	return nil
}

// Refused reports whether a handler's answer of status code refuses the
// request for its credentials (401 Unauthorized, 403 Forbidden): never
// stored (Unstored), and the call's verdict is idem.Unauthorized.
func Refused(code int) bool {
	return code == http.StatusUnauthorized || code == http.StatusForbidden
}

// RetryableStatus reports whether a handler's answer is returned to the
// client but not stored: a server error (500 or more), 408 Request Timeout
// or 429 Too Many Requests, all of which ask the client to retry, with the
// same key, a request that did not take effect.
func RetryableStatus(code int) bool {
	return code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
}

// RetryLater is the error a wrapper's handler function returns for an
// answer with a retryable status: recorded as a retryable failure (the key
// stays open for the client's own retry) and not retried in-process
// (core.MarkRetryLater).
func RetryLater(status int) error {
	return core.MarkRetryLater(fmt.Errorf("%w: status %d", ErrRetryableResponse, status))
}

// RetryAfterSeconds is the whole seconds from now to at, rounded up, at
// least 1.
func RetryAfterSeconds(at, now time.Time) int {
	s := math.Ceil(at.Sub(now).Seconds())
	if s < 1 {
		return 1
	}
	if s > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(s)
}
