package idemlambda_test

// Hostile inputs: what the world sends to each wrapper. Every case asserts
// that the wrapper does not panic and answers as documented: the HTTP
// status of the README's table, a typed error, or, for SQS, every message
// either done, acknowledged as a documented permanent case, or reported for
// redelivery.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
)

// hostileDepth is the nesting of the deep-nesting cases: ten times
// encoding/json's limit.
const hostileDepth = 100_000

// nested returns depth opens, the leaf, and depth closes.
func nested(depth int, open, leaf, closing string) string {
	return strings.Repeat(open, depth) + leaf + strings.Repeat(closing, depth)
}

// oneMiB is a JSON object of a little over 1 MiB.
var oneMiB = `{"event_id":"e-big","pad":"` + strings.Repeat("x", 1<<20) + `"}`

// headers returns a header map of key/value pairs.
func headers(kv ...string) map[string]string {
	h := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return h
}

// manyHeaders returns n filler headers plus kv.
func manyHeaders(n int, kv ...string) map[string]string {
	h := headers(kv...)
	for i := range n {
		h[fmt.Sprintf("x-filler-%d", i)] = "v"
	}
	return h
}

// hostileHTTP is one hostile request, fed to RESTAPI, HTTPAPI,
// FunctionURL and ALB (in both header modes) alike (or to the one flavour
// named by only).
type hostileHTTP struct {
	name      string
	only      string // "rest", "v2", "url", "alb" or "alb-multi"; "" for all
	method    string // "-" for none; "" for POST
	headers   map[string]string
	multi     map[string][]string // REST's multiValueHeaders
	body      string
	b64       bool
	noContext bool // the event has no requestContext
	rest      func(*events.APIGatewayProxyRequest)
	v2        func(*events.APIGatewayV2HTTPRequest)
	url       func(*events.LambdaFunctionURLRequest)
	status    int
	problem   string // the wrapper's problem type; "" for the handler's answer
	runs      int    // handler executions
}

func (c hostileHTTP) methodOrPost() string {
	switch c.method {
	case "":
		return "POST"
	case "-":
		return ""
	}
	return c.method
}

// hostileAnswer is the handlers' logic: 400 (their own, not a problem) for
// a body that is not JSON, else 201.
func hostileAnswer(runs *counter, body string, b64 bool) (events.APIGatewayProxyResponse, error) {
	runs.inc("all")
	raw, err := idemlambda.DecodeBody(body, b64)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	var v any
	if len(raw) > 0 && json.Unmarshal(raw, &v) != nil {
		return events.APIGatewayProxyResponse{StatusCode: 400, Headers: headers("Content-Type", "application/json"), Body: `{"error":"not json"}`}, nil
	}
	return events.APIGatewayProxyResponse{StatusCode: 201, Headers: headers("Content-Type", "application/json"), Body: `{"ok":true}`}, nil
}

// serveHostile sends c through the wrapper of flavour and returns the
// status, headers and body of the answer.
func serveHostile(t *testing.T, e *env, runs *counter, flavour string, c hostileHTTP) (int, map[string]string, string) {
	t.Helper()
	ctx := e.ctx(t, 10*time.Second)
	method, path := c.methodOrPost(), "/orders"
	switch flavour {
	case "rest":
		h, _ := idemlambda.RESTAPI(e.runner, func(ctx context.Context, r events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			return hostileAnswer(runs, r.Body, r.IsBase64Encoded)
		})
		req := events.APIGatewayProxyRequest{Resource: path, Path: path, HTTPMethod: method, Headers: c.headers, MultiValueHeaders: c.multi, Body: c.body, IsBase64Encoded: c.b64}
		if !c.noContext {
			req.RequestContext = events.APIGatewayProxyRequestContext{HTTPMethod: method, Path: path, Identity: events.APIGatewayRequestIdentity{SourceIP: "192.0.2.1"}}
		}
		if c.rest != nil {
			c.rest(&req)
		}
		r, err := h(ctx, req)
		if err != nil {
			t.Fatalf("RESTAPI returned an error: %v", err)
		}
		return r.StatusCode, r.Headers, r.Body
	case "v2":
		h, _ := idemlambda.HTTPAPI(e.runner, func(ctx context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			a, err := hostileAnswer(runs, r.Body, r.IsBase64Encoded)
			return events.APIGatewayV2HTTPResponse{StatusCode: a.StatusCode, Headers: a.Headers, Body: a.Body}, err
		})
		req := events.APIGatewayV2HTTPRequest{Version: "2.0", RouteKey: "POST /orders", RawPath: path, Headers: c.headers, Body: c.body, IsBase64Encoded: c.b64}
		if !c.noContext {
			req.RequestContext = events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path}}
		}
		if c.v2 != nil {
			c.v2(&req)
		}
		r, err := h(ctx, req)
		if err != nil {
			t.Fatalf("HTTPAPI returned an error: %v", err)
		}
		return r.StatusCode, r.Headers, r.Body
	case "alb", "alb-multi":
		return serveHostileALB(t, e, runs, flavour == "alb-multi", c)
	}
	h, _ := idemlambda.FunctionURL(e.runner, func(ctx context.Context, r events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		a, err := hostileAnswer(runs, r.Body, r.IsBase64Encoded)
		return events.LambdaFunctionURLResponse{StatusCode: a.StatusCode, Headers: a.Headers, Body: a.Body}, err
	})
	req := events.LambdaFunctionURLRequest{Version: "2.0", RawPath: path, Headers: c.headers, Body: c.body, IsBase64Encoded: c.b64}
	if !c.noContext {
		req.RequestContext = events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: method, Path: path}}
	}
	if c.url != nil {
		c.url(&req)
	}
	r, err := h(ctx, req)
	if err != nil {
		t.Fatalf("FunctionURL returned an error: %v", err)
	}
	return r.StatusCode, r.Headers, r.Body
}

// serveHostileALB sends c through ALB, its headers in headers or, with
// multi, in multiValueHeaders (one value each), and returns the answer with
// its headers read in that mode.
func serveHostileALB(t *testing.T, e *env, runs *counter, multi bool, c hostileHTTP) (int, map[string]string, string) {
	t.Helper()
	h, _ := idemlambda.ALB(e.runner, func(ctx context.Context, r events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		a, err := hostileAnswer(runs, r.Body, r.IsBase64Encoded)
		return events.ALBTargetGroupResponse{StatusCode: a.StatusCode, Headers: a.Headers, Body: a.Body}, err
	})
	req := events.ALBTargetGroupRequest{HTTPMethod: c.methodOrPost(), Path: "/orders", Headers: c.headers, Body: c.body, IsBase64Encoded: c.b64}
	if !c.noContext {
		req.RequestContext.ELB.TargetGroupArn = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/t/1"
	}
	if multi && len(c.headers) > 0 {
		req.Headers, req.MultiValueHeaders = nil, map[string][]string{}
		for k, v := range c.headers {
			req.MultiValueHeaders[k] = []string{v}
		}
	}
	r, err := h(e.ctx(t, 10*time.Second), req)
	if err != nil {
		t.Fatalf("ALB returned an error: %v", err)
	}
	hdr := r.Headers
	if multi && r.MultiValueHeaders != nil {
		hdr = map[string]string{}
		for k, vs := range r.MultiValueHeaders {
			hdr[k] = strings.Join(vs, ",")
		}
	}
	return r.StatusCode, hdr, r.Body
}

func hostileHTTPCases() []hostileHTTP {
	key := []string{"Idempotency-Key", "k-hostile"}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	const ok, handler400, bad = 201, 400, 400
	return []hostileHTTP{
		// Bodies.
		{name: "deeply nested arrays", headers: headers(key...), body: nested(hostileDepth, "[", "", "]"), status: bad, problem: idemlambda.ProblemInvalidBody},
		{name: "deeply nested objects", headers: headers(key...), body: nested(hostileDepth, `{"a":`, "1", "}"), status: bad, problem: idemlambda.ProblemInvalidBody},
		{name: "deeply nested and never closed", headers: headers(key...), body: strings.Repeat("[", hostileDepth), status: bad, problem: idemlambda.ProblemInvalidBody},
		{name: "deeply nested behind whitespace", headers: headers(key...), body: " \n\t" + nested(hostileDepth, "[", "", "]"), status: bad, problem: idemlambda.ProblemInvalidBody},
		{name: "deeply nested in a base64 body", headers: headers(key...), body: b64(nested(hostileDepth, "[", "", "]")), b64: true, status: bad, problem: idemlambda.ProblemInvalidBody},
		{name: "nested as deep as accepted", headers: headers(key...), body: nested(idemlambda.MaxBodyDepth, "[", "", "]"), status: ok, runs: 1},
		{name: "nested one level deeper than accepted", headers: headers(key...), body: nested(idemlambda.MaxBodyDepth+1, `{"a":`, "1", "}"), status: bad, problem: idemlambda.ProblemInvalidBody},
		{name: "brackets in a string do not nest", headers: headers(key...), body: `{"a":"` + strings.Repeat(`[\"`, hostileDepth) + `"}`, status: ok, runs: 1},
		{name: "text that starts with many brackets is text", headers: headers(key...), body: "x" + strings.Repeat("[", hostileDepth), status: handler400, runs: 1},
		{name: "1 MiB JSON body", headers: headers(key...), body: oneMiB, status: ok, runs: 1},
		{name: "1 MiB text body", headers: headers(key...), body: strings.Repeat("x", 1<<20), status: handler400, runs: 1},
		{name: "invalid UTF-8 body", headers: headers(key...), body: "\xff\xfe\xfd", status: handler400, runs: 1},
		{name: "invalid UTF-8 in a JSON string", headers: headers(key...), body: "{\"a\":\"\xff\"}", status: ok, runs: 1},
		{name: "lone high surrogate in a JSON string", headers: headers(key...), body: `{"a":"\ud800"}`, status: ok, runs: 1},
		{name: "lone low surrogate as an object key", headers: headers(key...), body: `{"\udc00":1}`, status: ok, runs: 1},
		{name: "duplicate JSON keys are text", headers: headers(key...), body: `{"a":1,"a":2}`, status: ok, runs: 1},
		{name: "bad base64", headers: headers(key...), body: "%%% not base64", b64: true, status: bad, problem: idemlambda.ProblemInvalidBody},
		{name: "unpadded base64", headers: headers(key...), body: "eyJhIjoxfQ", b64: true, status: bad, problem: idemlambda.ProblemInvalidBody},
		{name: "base64 of binary data", headers: headers(key...), body: base64.StdEncoding.EncodeToString([]byte{0xff, 0, 0xfe}), b64: true, status: handler400, runs: 1},
		// Headers.
		{name: "64 KiB key", headers: headers("Idempotency-Key", strings.Repeat("k", 64<<10)), body: "{}", status: bad, problem: idemlambda.ProblemInvalidKey},
		{name: "64 KiB other header", headers: headers("Idempotency-Key", "k-hostile", "X-Big", strings.Repeat("v", 64<<10)), body: "{}", status: ok, runs: 1},
		{name: "10,000 headers", headers: manyHeaders(10000, key...), body: "{}", status: ok, runs: 1},
		{name: "10,000 headers, no key", headers: manyHeaders(10000), body: "{}", status: bad, problem: idemlambda.ProblemMissingKey},
		{name: "comma-joined repeated key", headers: headers("idempotency-key", "k-1,k-2"), body: "{}", status: bad, problem: idemlambda.ProblemInvalidKey},
		{name: "comma-joined repeated key with a space", headers: headers("idempotency-key", "k-1, k-2"), body: "{}", status: bad, problem: idemlambda.ProblemInvalidKey},
		{name: "comma-joined identical keys", headers: headers("idempotency-key", "k-1,k-1"), body: "{}", status: bad, problem: idemlambda.ProblemInvalidKey},
		{name: "comma-joined quoted keys", headers: headers("idempotency-key", `"k-1","k-2"`), body: "{}", status: bad, problem: idemlambda.ProblemInvalidKey},
		{name: "key in two spellings", headers: headers("idempotency-key", "k-1", "Idempotency-Key", "k-1"), body: "{}", status: bad, problem: idemlambda.ProblemInvalidKey},
		{name: "empty key", headers: headers("Idempotency-Key", ""), body: "{}", status: bad, problem: idemlambda.ProblemInvalidKey},
		{name: "empty quoted key", headers: headers("Idempotency-Key", `""`), body: "{}", status: bad, problem: idemlambda.ProblemInvalidKey},
		{name: "NUL in the key", headers: headers("Idempotency-Key", "k\x001"), body: "{}", status: bad, problem: idemlambda.ProblemInvalidKey},
		{name: "invalid UTF-8 in the key", headers: headers("Idempotency-Key", "k\xff1"), body: "{}", status: bad, problem: idemlambda.ProblemInvalidKey},
		// Malformed events.
		{name: "nil headers", body: "{}", status: bad, problem: idemlambda.ProblemMissingKey},
		{name: "no method", method: "-", headers: headers(key...), body: "{}", status: ok, runs: 1},
		{name: "no requestContext", noContext: true, headers: headers(key...), body: "{}", status: ok, runs: 1},
		{name: "empty body", headers: headers(key...), status: ok, runs: 1},
		// REST API: repeated headers arrive in multiValueHeaders.
		{name: "repeated key in multiValueHeaders", only: "rest", headers: headers("Idempotency-Key", "k-2"), multi: map[string][]string{"Idempotency-Key": {"k-1", "k-2"}}, body: "{}", status: bad, problem: idemlambda.ProblemInvalidKey},
		{name: "key in two spellings in multiValueHeaders", only: "rest", multi: map[string][]string{"Idempotency-Key": {"k-1"}, "idempotency-key": {"k-1"}}, body: "{}", status: bad, problem: idemlambda.ProblemInvalidKey},
		{name: "empty multiValueHeaders list", only: "rest", headers: headers(key...), multi: map[string][]string{"Idempotency-Key": {}}, body: "{}", status: ok, runs: 1},
		{name: "authorizer values of odd types", only: "rest", headers: headers(key...), body: "{}", status: ok, runs: 1,
			rest: func(r *events.APIGatewayProxyRequest) {
				r.RequestContext.Authorizer = map[string]any{"principalId": 42, "claims": "not an object"}
			}},
		{name: "authorizer claims of odd types", only: "rest", headers: headers(key...), body: "{}", status: ok, runs: 1,
			rest: func(r *events.APIGatewayProxyRequest) {
				r.RequestContext.Authorizer = map[string]any{"claims": map[string]any{"sub": []any{"a"}}}
			}},
		// An authorizer that ran but names no caller: refused, never run
		// in a key space that every such caller shares.
		{name: "JWT authorizer without claims", only: "v2", headers: headers(key...), body: "{}", status: 500, problem: idemlambda.ProblemInternal,
			v2: func(r *events.APIGatewayV2HTTPRequest) {
				r.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
					JWT:    &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{},
					Lambda: map[string]any{"principalId": 7, "sub": nil},
					IAM:    &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{},
				}
			}},
		{name: "IAM authorizer without caller", only: "url", headers: headers(key...), body: "{}", status: 500, problem: idemlambda.ProblemInternal,
			url: func(r *events.LambdaFunctionURLRequest) {
				r.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{}}
			}},
	}
}

func TestHostileHTTP(t *testing.T) {
	t.Parallel()
	for _, flavour := range []string{"rest", "v2", "url", "alb", "alb-multi"} {
		for _, c := range hostileHTTPCases() {
			if c.only != "" && c.only != flavour {
				continue
			}
			t.Run(flavour+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t)
				var runs counter
				status, hdr, body := serveHostile(t, e, &runs, flavour, c)
				if status != c.status {
					t.Fatalf("status = %d want %d (body %.200s)", status, c.status, body)
				}
				isProblem := hdr["Content-Type"] == idemlambda.ProblemContentType
				if c.problem == "" && isProblem {
					t.Fatalf("answered the problem %.200s, want the handler's answer", body)
				}
				if c.problem != "" {
					var p idemlambda.Problem
					if !isProblem || json.Unmarshal([]byte(body), &p) != nil || p.Type != idemlambda.ProblemTypeBase+c.problem || p.Status != status {
						t.Fatalf("answer %v %.200s, want problem %s", hdr, body, c.problem)
					}
				}
				if got := runs.get("all"); got != c.runs {
					t.Errorf("handler ran %d times, want %d", got, c.runs)
				}
			})
		}
	}
}

// hostileSQSHandler acknowledges a message whose body is a JSON object,
// fails permanently on any other body, and transiently on "do":"transient".
func hostileSQSHandler(runs *counter) func(context.Context, events.SQSMessage) ([]byte, error) {
	return func(ctx context.Context, m events.SQSMessage) ([]byte, error) {
		runs.inc("all")
		var b map[string]json.RawMessage
		if err := json.Unmarshal([]byte(m.Body), &b); err != nil {
			return nil, core.MarkPermanent(fmt.Errorf("body is not a JSON object: %w", err))
		}
		if string(b["do"]) == `"transient"` {
			return nil, core.MarkTransient(errors.New("downstream unavailable"))
		}
		return nil, nil
	}
}

// withMsg returns sqsMsg(id, body) changed by edit.
func withMsg(id, body string, edit func(*events.SQSMessage)) events.SQSMessage {
	m := sqsMsg(id, body)
	edit(&m)
	return m
}

// hostileSQS is one hostile batch. Messages in permanent are documented
// permanent cases (README, SQS table): reported by default, acknowledged
// when WithAcknowledged names their verdict. Messages in transient are
// always reported. runs is the handler's executions with every permanent
// verdict acknowledged and by default.
type hostileSQS struct {
	name      string
	source    idemlambda.KeySource
	msgs      []events.SQSMessage
	permanent []string
	transient []string
	runs      [2]int
}

func hostileSQSCases() []hostileSQS {
	byField, byID, byAttr := idemlambda.KeyFromBodyField("event_id"), idemlambda.KeyFromMessageID(), idemlambda.KeyFromAttribute("EventId")
	str := func(s string) *string { return &s }
	attr := func(a events.SQSMessageAttribute) func(*events.SQSMessage) {
		return func(m *events.SQSMessage) { m.MessageAttributes = map[string]events.SQSMessageAttribute{"EventId": a} }
	}
	deep := nested(hostileDepth, "[", "", "]")
	return []hostileSQS{
		{name: "empty body, key from a body field", source: byField, msgs: []events.SQSMessage{sqsMsg("m1", "")}, permanent: []string{"m1"}},
		{name: "empty body, key from the message id", source: byID, msgs: []events.SQSMessage{sqsMsg("m1", "")}, permanent: []string{"m1"}, runs: [2]int{1, 1}},
		{name: "no message id, key from the message id", source: byID, msgs: []events.SQSMessage{sqsMsg("", "{}")}, permanent: []string{""}},
		{name: "no message id, transient failure", source: byField, msgs: []events.SQSMessage{sqsMsg("", `{"event_id":"e1","do":"transient"}`)}, transient: []string{""}, runs: [2]int{2, 2}},
		{name: "deeply nested body, key from a body field", source: byField, msgs: []events.SQSMessage{sqsMsg("m1", deep)}, permanent: []string{"m1"}},
		{name: "deeply nested body, key from the message id", source: byID, msgs: []events.SQSMessage{sqsMsg("m1", deep)}, permanent: []string{"m1"}}, // invalid_payload: the handler does not run
		{name: "deeply nested key field", source: byField, msgs: []events.SQSMessage{sqsMsg("m1", `{"event_id":`+deep+`}`)}, permanent: []string{"m1"}},
		{name: "1 MiB body", source: byField, msgs: []events.SQSMessage{sqsMsg("m1", oneMiB)}, runs: [2]int{1, 1}},
		{name: "invalid UTF-8 body", source: byID, msgs: []events.SQSMessage{sqsMsg("m1", "\xff\xfe\xfd")}, permanent: []string{"m1"}, runs: [2]int{1, 1}},
		{name: "invalid UTF-8 in the key field", source: byField, msgs: []events.SQSMessage{sqsMsg("m1", "{\"event_id\":\"e\xff\"}")}, runs: [2]int{1, 1}},
		{name: "lone surrogate in the key field", source: byField, msgs: []events.SQSMessage{sqsMsg("m1", `{"event_id":"e\ud800"}`)}, runs: [2]int{1, 1}},
		{name: "control character in the key field", source: byField, msgs: []events.SQSMessage{sqsMsg("m1", `{"event_id":"e\u0000"}`)}, permanent: []string{"m1"}},
		{name: "key fields of odd types", source: byField, msgs: []events.SQSMessage{
			sqsMsg("m1", `{"event_id":true}`), sqsMsg("m2", `{"event_id":null}`), sqsMsg("m3", `{"event_id":{}}`),
			sqsMsg("m4", `{"event_id":[]}`), sqsMsg("m5", `{"event_id":""}`), sqsMsg("m6", `[{"event_id":"e1"}]`),
		}, permanent: []string{"m1", "m2", "m3", "m4", "m5", "m6"}},
		{name: "huge number as the key field", source: byField, msgs: []events.SQSMessage{sqsMsg("m1", `{"event_id":1e400}`)}, runs: [2]int{1, 1}},
		{name: "binary attribute as the key", source: byAttr, msgs: []events.SQSMessage{withMsg("m1", "{}", attr(events.SQSMessageAttribute{DataType: "Binary", BinaryValue: []byte{1, 2}}))}, permanent: []string{"m1"}},
		{name: "empty string attribute as the key", source: byAttr, msgs: []events.SQSMessage{withMsg("m1", "{}", attr(events.SQSMessageAttribute{DataType: "String", StringValue: str("")}))}, permanent: []string{"m1"}},
		{name: "attribute of a custom type as the key", source: byAttr, msgs: []events.SQSMessage{withMsg("m1", "{}", attr(events.SQSMessageAttribute{DataType: "Number.float", StringValue: str("1.5")}))}, runs: [2]int{1, 1}},
		{name: "64 KiB attribute as the key", source: byAttr, msgs: []events.SQSMessage{withMsg("m1", "{}", attr(events.SQSMessageAttribute{DataType: "String", StringValue: str(strings.Repeat("k", 64<<10))}))}, permanent: []string{"m1"}},
		{name: "nil attribute maps", source: byAttr, msgs: []events.SQSMessage{withMsg("m1", "{}", func(m *events.SQSMessage) { m.Attributes, m.MessageAttributes = nil, nil })}, permanent: []string{"m1"}},
		{name: "FIFO queue without a deduplication id", source: idemlambda.KeyFromDeduplicationID(), msgs: []events.SQSMessage{withMsg("m1", "{}", func(m *events.SQSMessage) { m.EventSourceARN, m.Attributes = fifoARN, nil })}, permanent: []string{"m1"}},
		{name: "same message id twice in a batch", source: byField, msgs: []events.SQSMessage{sqsMsg("m1", `{"event_id":"e1"}`), sqsMsg("m1", `{"event_id":"e1"}`)}, runs: [2]int{1, 1}},
		{name: "FIFO group with a malformed message first", source: byField, msgs: []events.SQSMessage{
			fifoMsg("m1", "g", `{"no_key":1}`), fifoMsg("m2", "g", `{"event_id":"e2","do":"transient"}`), fifoMsg("m3", "g", `{"event_id":"e3"}`),
		}, permanent: []string{"m1"}, transient: []string{"m2", "m3"}, runs: [2]int{2, 0}},
		{name: "no records", source: byField},
	}
}

func TestHostileSQS(t *testing.T) {
	t.Parallel()
	for _, c := range hostileSQSCases() {
		for mode, dlq := range []bool{false, true} {
			name := c.name + "/acknowledged when named"
			if dlq {
				name = c.name + "/reported by default"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, idem.WithRetry(2, 0, 0))
				var runs counter
				var opts []idemlambda.BatchOption
				want := append([]string{}, c.transient...)
				if dlq {
					want = append(want, c.permanent...)
				} else {
					opts = append(opts, acknowledgeAll)
				}
				handle, err := idemlambda.SQS(e.runner, "hostile", c.source, hostileSQSHandler(&runs), opts...)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := handle(e.ctx(t, time.Minute), events.SQSEvent{Records: c.msgs})
				if err != nil {
					t.Fatalf("the handler returned an error: %v", err)
				}
				if resp.BatchItemFailures == nil {
					t.Fatal("batchItemFailures is null, want a list")
				}
				got := failureIDs(resp)
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("reported %q, want %q", got, want)
				}
				if n := runs.get("all"); n != c.runs[mode] {
					t.Errorf("handler ran %d times, want %d", n, c.runs[mode])
				}
			})
		}
	}
}

// TestHostileSQSEventJSON decodes raw events as the Lambda runtime does
// before the wrapper sees them: an event that does not decode fails the
// whole invocation (SQS redelivers the batch, nothing is lost); the others
// reach the wrapper.
func TestHostileSQSEventJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		raw       string
		decodes   bool
		permanent []string // reported: no usable key
	}{
		{name: "null records", raw: `{"Records":null}`, decodes: true},
		{name: "no records", raw: `{}`, decodes: true},
		{name: "null body", raw: `{"Records":[{"messageId":"m1","body":null}]}`, decodes: true, permanent: []string{"m1"}},
		{name: "null message attributes", raw: `{"Records":[{"messageId":"m1","body":"{\"event_id\":\"e1\"}","messageAttributes":null,"attributes":null}]}`, decodes: true},
		{name: "number attribute value", raw: `{"Records":[{"messageId":"m1","body":"{}","attributes":{"ApproximateReceiveCount":3}}]}`},
		{name: "string records", raw: `{"Records":"m1"}`},
		{name: "binary attribute not base64", raw: `{"Records":[{"messageId":"m1","body":"{}","messageAttributes":{"EventId":{"dataType":"Binary","binaryValue":"%%%"}}}]}`},
		{name: "deeply nested event", raw: `{"Records":[{"messageId":"m1","body":"{}","x":` + nested(hostileDepth, "[", "", "]") + `}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ev events.SQSEvent
			err := json.Unmarshal([]byte(tc.raw), &ev)
			if (err == nil) != tc.decodes {
				t.Fatalf("decode error %v, want decodes %v", err, tc.decodes)
			}
			if err != nil {
				return
			}
			e := newEnv(t)
			var runs counter
			handle, err := idemlambda.SQS(e.runner, "hostile", idemlambda.KeyFromBodyField("event_id"), hostileSQSHandler(&runs))
			if err != nil {
				t.Fatal(err)
			}
			resp, _ := handle(e.ctx(t, time.Minute), ev)
			got := failureIDs(resp)
			if !slices.Equal(got, append([]string{}, tc.permanent...)) {
				t.Errorf("reported %q, want %q", got, tc.permanent)
			}
		})
	}
}

func TestHostileTyped(t *testing.T) {
	t.Parallel()
	const key = "evt:hostile:typed"
	tests := []struct {
		name    string
		in      json.RawMessage
		key     string // "" makes the key function fail
		wantErr []error
		runs    int
	}{
		{name: "key function error", in: json.RawMessage(`{}`), wantErr: []error{idemlambda.ErrMissingKey, core.ErrInvalidKey}},
		{name: "key too short", in: json.RawMessage(`{}`), key: "k", wantErr: []error{core.ErrInvalidKey}},
		{name: "key with a comma", in: json.RawMessage(`{}`), key: "evt:a,b:typed", wantErr: []error{core.ErrInvalidKey}},
		{name: "key with a NUL", in: json.RawMessage(`{}`), key: "evt:a\x00b:typed", wantErr: []error{core.ErrInvalidKey}},
		{name: "64 KiB key", in: json.RawMessage(`{}`), key: strings.Repeat("k", 64<<10), wantErr: []error{core.ErrInvalidKey}},
		{name: "deeply nested input", in: json.RawMessage(nested(hostileDepth, "[", "", "]")), key: key, wantErr: []error{core.ErrInvalidPayload}},
		{name: "input nested at encoding/json's limit", in: json.RawMessage(nested(10000, "[", "", "]")), key: key, runs: 1},
		{name: "input nested past encoding/json's limit", in: json.RawMessage(nested(10001, "[", "", "]")), key: key, wantErr: []error{core.ErrInvalidPayload}},
		{name: "input that is not JSON", in: json.RawMessage(`{"a":`), key: key, wantErr: []error{core.ErrInvalidPayload}},
		{name: "duplicate JSON keys", in: json.RawMessage(`{"a":1,"a":2}`), key: key, wantErr: []error{core.ErrInvalidPayload}},
		{name: "invalid UTF-8 in a string", in: json.RawMessage("{\"a\":\"\xff\"}"), key: key, runs: 1},
		{name: "lone surrogate in a string", in: json.RawMessage(`{"a":"\ud800"}`), key: key, runs: 1},
		{name: "1 MiB input", in: json.RawMessage(oneMiB), key: key, runs: 1},
		{name: "no input", key: key, runs: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var runs counter
			handle, err := idemlambda.Typed(e.runner,
				func(json.RawMessage) (string, error) {
					if tc.key == "" {
						return "", errors.New("no id in the event")
					}
					return tc.key, nil
				},
				func(ctx context.Context, in json.RawMessage) (string, error) {
					return fmt.Sprintf("run %d", runs.inc("all")), nil
				})
			if err != nil {
				t.Fatal(err)
			}
			out, err := handle(e.ctx(t, time.Minute), tc.in)
			for _, want := range tc.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("err = %v, want one wrapping %v", err, want)
				}
			}
			if len(tc.wantErr) == 0 && (err != nil || out != "run 1") {
				t.Errorf("= %q, %v; want run 1", out, err)
			}
			if n := runs.get("all"); n != tc.runs {
				t.Errorf("handler ran %d times, want %d", n, tc.runs)
			}
		})
	}
	t.Run("input that does not marshal", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		handle, err := idemlambda.Typed(e.runner,
			func(map[string]any) (string, error) { return key, nil },
			func(ctx context.Context, in map[string]any) (string, error) { return "ran", nil })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := handle(e.ctx(t, time.Minute), map[string]any{"x": math.NaN()}); !errors.Is(err, core.ErrInvalidPayload) {
			t.Errorf("err = %v, want ErrInvalidPayload", err)
		}
	})
}
