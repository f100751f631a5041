package durable

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/awsclassify"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/httprule"
	idemlambda "github.com/idemgo/idem/lambda"
)

// Problem types (appended to idemlambda.ProblemTypeBase) that the HTTP
// dispatchers answer besides the HTTP wrappers' own (idemlambda.Problem*).
const (
	// ProblemBodyTooLarge: 413, what the durable function would receive
	// for the request is over MaxPayload, or Lambda refused it as too
	// large; not started.
	ProblemBodyTooLarge = httprule.BodyTooLarge
	// ProblemStartUnavailable: 503, Lambda throttled the start, failed
	// (5xx), or could not be reached; Retry-After says when to retry.
	ProblemStartUnavailable = httprule.StartUnavailable
)

// The HTTP wrappers are idemlambda's, with the start of the request's
// execution as the handler: the signature check of WithWebhook before
// anything, the key sources, the caller and tenant scopes, the fingerprint,
// the HTTP status table, logs and metrics are theirs, unchanged. The
// handler answers a start 202 Accepted with Started as its JSON body, which
// the runner records and replays, marked Idempotent-Replayed: true; a start
// that failed is answered in the handler's place and leaves no record
// (core.MarkNoRecord), so that Lambda, which knows the execution by its
// name, stays the judge of the next delivery:
//
//   - Lambda's refusal of another payload under the name
//     (DurableExecutionAlreadyStartedException): 422 idempotency-key-reused,
//     verdict key_reused;
//   - a payload over MaxPayload, or Lambda's RequestTooLargeException: 413
//     body-too-large, verdict invalid_payload, not sent;
//   - throttling, a Lambda 5xx, or a connection that failed: 503
//     durable-start-unavailable with Retry-After (Lambda's, else 1),
//     verdict failed_transiently: the sender's retry starts the execution
//     at most once;
//   - any other error (a permission, a function not found): 500
//     internal-error, verdict failed_transiently, for the sender to retry
//     once it is fixed.

// HTTPAPI returns the handler of API Gateway HTTP API requests (payload
// format 2.0) that starts one durable execution per request key:
// idemlambda.HTTPAPI(runner, handler, opts...) with the start of d's
// durable function as the handler (see the package documentation for the
// payload and the answers). With idemlambda.WithWebhook and
// idemlambda.WithEndpoint, the key is the sender's delivery id, its
// signature verified first; without, the Idempotency-Key header.
func HTTPAPI(runner *idem.Runner, d *Dispatcher, opts ...idemlambda.HTTPOption) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	if d == nil {
		return nil, errNilDispatcher
	}
	return idemlambda.HTTPAPI(runner, httpHandler(d, func(_ events.APIGatewayV2HTTPRequest, a httprule.Answer) events.APIGatewayV2HTTPResponse {
		return events.APIGatewayV2HTTPResponse{StatusCode: a.Status, Headers: a.Header, Body: string(a.Body)}
	}), opts...)
}

// RESTAPI returns the handler of API Gateway REST API requests (Lambda
// proxy integration) that starts one durable execution per request key:
// idemlambda.RESTAPI with the start of d's durable function as the handler
// (see HTTPAPI).
func RESTAPI(runner *idem.Runner, d *Dispatcher, opts ...idemlambda.HTTPOption) (func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error), error) {
	if d == nil {
		return nil, errNilDispatcher
	}
	return idemlambda.RESTAPI(runner, httpHandler(d, func(_ events.APIGatewayProxyRequest, a httprule.Answer) events.APIGatewayProxyResponse {
		return events.APIGatewayProxyResponse{StatusCode: a.Status, Headers: a.Header, Body: string(a.Body)}
	}), opts...)
}

// FunctionURL returns the handler of Lambda function URL requests
// (buffered invoke mode) that starts one durable execution per request key:
// idemlambda.FunctionURL with the start of d's durable function as the
// handler (see HTTPAPI).
func FunctionURL(runner *idem.Runner, d *Dispatcher, opts ...idemlambda.HTTPOption) (idemlambda.FunctionURLHandler, error) {
	if d == nil {
		return nil, errNilDispatcher
	}
	return idemlambda.FunctionURL(runner, httpHandler(d, func(_ events.LambdaFunctionURLRequest, a httprule.Answer) events.LambdaFunctionURLResponse {
		return events.LambdaFunctionURLResponse{StatusCode: a.Status, Headers: a.Header, Body: string(a.Body)}
	}), opts...)
}

// ALB returns the handler of Application Load Balancer requests that
// starts one durable execution per request key: idemlambda.ALB with the
// start of d's durable function as the handler (see HTTPAPI), answering in
// the header mode the request came in. An ALB passes a Lambda target at
// most 1 MB of body.
func ALB(runner *idem.Runner, d *Dispatcher, opts ...idemlambda.HTTPOption) (func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error), error) {
	if d == nil {
		return nil, errNilDispatcher
	}
	return idemlambda.ALB(runner, httpHandler(d, func(req events.ALBTargetGroupRequest, a httprule.Answer) events.ALBTargetGroupResponse {
		resp := events.ALBTargetGroupResponse{StatusCode: a.Status, StatusDescription: fmt.Sprintf("%d %s", a.Status, http.StatusText(a.Status)), Body: string(a.Body)}
		if len(req.MultiValueHeaders) == 0 {
			resp.Headers = a.Header
			return resp
		}
		resp.MultiValueHeaders = map[string][]string{}
		for k, v := range a.Header {
			resp.MultiValueHeaders[k] = []string{v}
		}
		return resp
	}), opts...)
}

// httpHandler is the handler of an HTTP wrapper: the start of the request's
// execution (startRequest), answered as the wrapper's response type
// (native).
func httpHandler[Req, Resp any](d *Dispatcher, native func(Req, httprule.Answer) Resp) func(context.Context, Req) (Resp, error) {
	return func(ctx context.Context, req Req) (Resp, error) {
		a, err := d.startRequest(ctx)
		return native(req, a), err
	}
}

// startRequest starts the execution of the request that ctx's HTTP wrapper
// call runs (httprule.RequestOf) under the execution name of its stored key,
// and returns the answer: 202 with Started as JSON; or, for a start that
// failed, the answer of refusal and the error, marked core.MarkNoRecord and
// httprule.Answered.
func (d *Dispatcher) startRequest(ctx context.Context) (httprule.Answer, error) {
	key, keyed := httprule.StoredKey(ctx)
	r, ok := httprule.RequestOf(ctx)
	if !keyed || !ok {
		err := errors.New("durable: the request has no key to name its execution: an HTTP dispatcher keys every request (give it no WithOptionalKey)")
		return httprule.NewAnswer(httprule.Internal, "", idem.FailedTransiently), httprule.Answered(err)
	}
	payload, err := d.requestPayload(r)
	var s Started
	if err == nil {
		s, err = d.invoke(ctx, key, payload)
	}
	if err != nil {
		return refusal(err), httprule.Answered(core.MarkNoRecord(err))
	}
	body, _ := json.Marshal(s) // two strings: always marshals
	return httprule.Answer{Status: http.StatusAccepted, Header: map[string]string{"Content-Type": "application/json"}, Body: body, Verdict: idem.Executed}, nil
}

// httpPayload is what the durable function receives for an HTTP request.
type httpPayload struct {
	// Caller is the caller identity that scopes the key, as labelled parts
	// ("sub=..."); none for an anonymous caller.
	Caller []string `json:"caller,omitempty"`
	// Headers are the headers of WithForwardedHeaders the request has,
	// by lower-case name, several values joined with commas.
	Headers map[string]string `json:"headers,omitempty"`
	// Key are the values the stored key is made of, by source
	// (httprule.RequestKey.Sources): the endpoint and the sender's
	// delivery id, or the Idempotency-Key header.
	Key map[string]string `json:"key"`
	// Request is the request as fingerprinted: its method, its path and
	// its body under the wrapper's selection (httprule.SelectedPayload).
	Request json.RawMessage `json:"request"`
}

// requestPayload is the payload of r for the durable function (httpPayload,
// as JSON), at most MaxPayload bytes: the same for every request of one
// stored key and fingerprint, and of the same forwarded headers.
func (d *Dispatcher) requestPayload(r *httprule.Request) ([]byte, error) {
	doc, err := httprule.SelectedPayload(r.Method, r.Path, r.Body, r.Selection)
	if err != nil { // the wrapper fingerprinted it: it does not fail here
		return nil, err
	}
	p := httpPayload{Caller: r.Identity, Key: r.Key.Sources(), Request: doc}
	for _, name := range d.forward {
		if vals := httprule.HeaderValues(r.Headers, r.Multi, name); len(vals) > 0 {
			if p.Headers == nil {
				p.Headers = map[string]string{}
			}
			p.Headers[name] = strings.Join(vals, ",")
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("%w: %v", core.ErrInvalidPayload, err)
	}
	payload := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return payload, checkSize(payload)
}

// refusal is the answer to a request whose execution was not started for
// err (see the package documentation).
func refusal(err error) httprule.Answer {
	switch {
	case errors.Is(err, ErrAlreadyStarted):
		return httprule.NewAnswer(httprule.KeyReused, "A durable execution was started for this request's key with another payload; it is not started again.", idem.KeyReused)
	case errors.Is(err, ErrPayloadTooLarge):
		return httprule.NewAnswer(httprule.BodyTooLarge, fmt.Sprintf("The durable execution of this request would receive more than an asynchronous invocation takes (%d bytes); it was not started.", MaxPayload), idem.InvalidPayload)
	case core.Classify(err, awsclassify.Classifiers...) == core.Transient:
		a := httprule.NewAnswer(httprule.StartUnavailable, "", idem.FailedTransiently)
		a.Header["Retry-After"] = strconv.Itoa(retryAfter(err))
		return a
	}
	return httprule.NewAnswer(httprule.Internal, "", idem.FailedTransiently)
}

// retryAfter is the Retry-After of Lambda's throttling, in whole seconds,
// else 1.
func retryAfter(err error) int {
	var tm *types.TooManyRequestsException
	if errors.As(err, &tm) && tm.RetryAfterSeconds != nil {
		if s, perr := strconv.Atoi(strings.TrimSpace(*tm.RetryAfterSeconds)); perr == nil && s > 0 {
			return s
		}
	}
	return 1
}
