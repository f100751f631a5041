package durable_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/webhooktest"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/lambda/durable"
	"github.com/idemgo/idem/webhook"
)

// Webhook secrets of the tests.
const (
	githubSecret = "It's a Secret to Everybody"
	stripeSecret = "whsec_test"
)

// request is an HTTP request as a test sends it, whatever the event type.
type request struct {
	method, path string
	headers      map[string]string
	body         string
	base64       bool   // body is base64, as the platform encodes a binary body
	jwtSub       string // an HTTP API's JWT authorizer's sub claim, if any
}

// answer is an HTTP answer, whatever the response type; header names are
// lower-case.
type answer struct {
	status  int
	headers map[string]string
	body    string
}

// flavour sends a request through one of the HTTP dispatchers, built for
// the sandbox's runner and d with opts.
type flavour struct {
	name string
	send func(t *testing.T, s *sandbox, d *durable.Dispatcher, opts []idemlambda.HTTPOption, r request) answer
}

func fatalIf(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// flavours are the four HTTP dispatchers, the ALB in both header modes.
var flavours = []flavour{
	{"http-api", func(t *testing.T, s *sandbox, d *durable.Dispatcher, opts []idemlambda.HTTPOption, r request) answer {
		h, err := durable.HTTPAPI(s.runner, d, opts...)
		fatalIf(t, err)
		ev := events.APIGatewayV2HTTPRequest{RawPath: r.path, Headers: r.headers, Body: r.body, IsBase64Encoded: r.base64}
		ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = r.method, r.path
		if r.jwtSub != "" {
			ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": r.jwtSub}}}
		}
		resp, err := h(context.Background(), ev)
		return answerOf(t, resp.StatusCode, resp.Headers, nil, resp.Body, err)
	}},
	{"rest-api", func(t *testing.T, s *sandbox, d *durable.Dispatcher, opts []idemlambda.HTTPOption, r request) answer {
		h, err := durable.RESTAPI(s.runner, d, opts...)
		fatalIf(t, err)
		resp, err := h(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: r.method, Path: r.path, Headers: r.headers, MultiValueHeaders: multi(r.headers), Body: r.body, IsBase64Encoded: r.base64})
		return answerOf(t, resp.StatusCode, resp.Headers, resp.MultiValueHeaders, resp.Body, err)
	}},
	{"function-url", func(t *testing.T, s *sandbox, d *durable.Dispatcher, opts []idemlambda.HTTPOption, r request) answer {
		h, err := durable.FunctionURL(s.runner, d, opts...)
		fatalIf(t, err)
		ev := events.LambdaFunctionURLRequest{RawPath: r.path, Headers: r.headers, Body: r.body, IsBase64Encoded: r.base64}
		ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = r.method, r.path
		resp, err := h(context.Background(), ev)
		return answerOf(t, resp.StatusCode, resp.Headers, nil, resp.Body, err)
	}},
	{"alb", func(t *testing.T, s *sandbox, d *durable.Dispatcher, opts []idemlambda.HTTPOption, r request) answer {
		h, err := durable.ALB(s.runner, d, opts...)
		fatalIf(t, err)
		resp, err := h(context.Background(), events.ALBTargetGroupRequest{HTTPMethod: r.method, Path: r.path, Headers: r.headers, Body: r.body, IsBase64Encoded: r.base64})
		if resp.MultiValueHeaders != nil {
			t.Errorf("alb: multi-value headers %v answered to a single-value request", resp.MultiValueHeaders)
		}
		return answerOf(t, resp.StatusCode, resp.Headers, nil, resp.Body, err)
	}},
	{"alb-multi-value", func(t *testing.T, s *sandbox, d *durable.Dispatcher, opts []idemlambda.HTTPOption, r request) answer {
		h, err := durable.ALB(s.runner, d, opts...)
		fatalIf(t, err)
		resp, err := h(context.Background(), events.ALBTargetGroupRequest{HTTPMethod: r.method, Path: r.path, MultiValueHeaders: multi(r.headers), Body: r.body, IsBase64Encoded: r.base64})
		if resp.Headers != nil {
			t.Errorf("alb-multi-value: single-value headers %v answered to a multi-value request", resp.Headers)
		}
		return answerOf(t, resp.StatusCode, nil, resp.MultiValueHeaders, resp.Body, err)
	}},
}

// httpAPI is the HTTP API flavour, the one most tests use.
var httpAPI = flavours[0]

func multi(h map[string]string) map[string][]string {
	m := map[string][]string{}
	for k, v := range h {
		m[k] = []string{v}
	}
	return m
}

// answerOf is the answer of a response; a wrapper never returns an error.
func answerOf(t *testing.T, status int, single map[string]string, mv map[string][]string, body string, err error) answer {
	t.Helper()
	if err != nil {
		t.Fatalf("the wrapper returned an error: %v", err)
	}
	a := answer{status: status, headers: map[string]string{}, body: body}
	for k, v := range single {
		a.headers[strings.ToLower(k)] = v
	}
	for k, vs := range mv {
		a.headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	return a
}

// started is the Started of a 202 answer.
func (a answer) started(t *testing.T) durable.Started {
	t.Helper()
	var s durable.Started
	if a.status != http.StatusAccepted || a.headers["content-type"] != "application/json" || json.Unmarshal([]byte(a.body), &s) != nil || s.ExecutionARN == "" {
		t.Fatalf("answer %+v, want 202 with a durable.Started", a)
	}
	return s
}

// problem is the problem type of an answer ("" for none).
func (a answer) problem() string {
	var p struct {
		Type string `json:"type"`
	}
	if a.headers["content-type"] != idemlambda.ProblemContentType || json.Unmarshal([]byte(a.body), &p) != nil {
		return ""
	}
	return strings.TrimPrefix(p.Type, idemlambda.ProblemTypeBase)
}

// githubPush is a GitHub push delivery with id, signed with githubSecret.
func githubPush(id, body string) request {
	return request{method: "POST", path: "/hooks/github", body: body, headers: map[string]string{
		"Content-Type": "application/json", "User-Agent": "GitHub-Hookshot/a1b2c3d", "X-GitHub-Event": "push",
		"X-GitHub-Delivery": id, "X-Hub-Signature-256": webhooktest.GitHubSignature(githubSecret, body),
	}}
}

// githubOptions are the options of a GitHub dispatcher.
func githubOptions() []idemlambda.HTTPOption {
	return []idemlambda.HTTPOption{idemlambda.WithEndpoint("github-builds"), idemlambda.WithWebhook(webhook.GitHub(githubSecret))}
}

// stripeEvent is a Stripe delivery of body, signed at fixedNow.
func stripeEvent(path, body string) request {
	return request{method: "POST", path: path, body: body, headers: map[string]string{
		"Content-Type":     "application/json; charset=utf-8",
		"Stripe-Signature": webhooktest.StripeSignature(fixedNow.Unix(), body, stripeSecret),
	}}
}

// stripeOptions are the options of a Stripe dispatcher for endpoint, with
// the wrapper's clock at fixedNow (the signature's tolerance).
func stripeOptions(endpoint string) []idemlambda.HTTPOption {
	return []idemlambda.HTTPOption{idemlambda.WithEndpoint(endpoint), idemlambda.WithWebhook(webhook.Stripe(stripeSecret)),
		idemlambda.WithClock(func() time.Time { return fixedNow })}
}

// webhookSandbox is a sandbox whose runner keeps records for the senders'
// windows (3 days), as the webhook wrappers require.
func webhookSandbox(t *testing.T) *sandbox {
	t.Helper()
	return newSandbox(t, idem.WithRetention(72*time.Hour))
}

// received is what the durable function received for an execution.
type received struct {
	Caller  []string          `json:"caller"`
	Headers map[string]string `json:"headers"`
	Key     map[string]string `json:"key"`
	Request struct {
		Method string          `json:"method"`
		Path   string          `json:"path"`
		JSON   json.RawMessage `json:"json"`
		Text   *string         `json:"text"`
		Base64 []byte          `json:"base64"`
	} `json:"request"`
}

// receivedBy decodes the payload of the execution of s.
func receivedBy(t *testing.T, r *rig, s durable.Started) (received, []byte) {
	t.Helper()
	raw, ok := r.srv.Payload(s.ExecutionName)
	var got received
	if !ok || json.Unmarshal(raw, &got) != nil {
		t.Fatalf("payload of %s: %q (found %v), want JSON", s.ExecutionName, raw, ok)
	}
	return got, raw
}
