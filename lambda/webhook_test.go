package idemlambda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
)

// GitHub sends a delivery's id in X-GitHub-Delivery, the same when the
// delivery is redelivered; the body is the event's JSON. Header names as an
// HTTP API hands them to the function: in lower case.
func githubDelivery(guid, event, body string) events.APIGatewayV2HTTPRequest {
	r := v2Req("POST", "/hooks/github", "", body)
	r.Headers = map[string]string{
		"accept":                                 "*/*",
		"content-type":                           "application/json",
		"user-agent":                             "GitHub-Hookshot/5d2c8a1",
		"x-github-delivery":                      guid,
		"x-github-event":                         event,
		"x-github-hook-id":                       "481516234",
		"x-github-hook-installation-target-id":   "90817263",
		"x-github-hook-installation-target-type": "repository",
		"x-hub-signature":                        "sha1=3b0f6a9b1e5c4d2a8f7e6d5c4b3a29180f1e2d3c",
		"x-hub-signature-256":                    "sha256=9f2b1c0d3e4a5b6c7d8e9f0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e",
	}
	r.RequestContext.RequestID = "gh-" + guid
	return r
}

const githubIssueOpened = `{"action":"opened","issue":{"url":"https://api.github.com/repos/example/shop/issues/42","id":2417783321,"number":42,` +
	`"title":"Checkout fails on Safari","user":{"login":"octo-reporter","id":9919,"type":"User"},"state":"open","created_at":"2030-01-02T03:04:05Z"},` +
	`"repository":{"id":79929171,"name":"shop","full_name":"example/shop","private":false},"sender":{"login":"octo-reporter","id":9919,"type":"User"}}`

// A GitHub webhook deduplicated by its delivery id: a redelivery replays,
// another delivery runs, a request without the header is 400
// missing-key-source.
func TestHTTPAPIGitHubWebhook(t *testing.T) {
	t.Parallel()
	e, v := observedEnv(t)
	var runs counter
	handle, err := idemlambda.HTTPAPI(e.runner, func(ctx context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusAccepted, Body: fmt.Sprintf(`{"ticket":%d}`, runs.inc(r.Headers["x-github-event"]))}, nil
	}, idemlambda.WithEndpoint("github"), idemlambda.WithKeyHeader("X-GitHub-Delivery"))
	if err != nil {
		t.Fatal(err)
	}
	noHeader := githubDelivery("", "issues", githubIssueOpened)
	delete(noHeader.Headers, "x-github-delivery")
	twice := githubDelivery("a1b2c3d4-0000-11ef-8000-000000000001,a1b2c3d4-0000-11ef-8000-000000000002", "issues", githubIssueOpened)
	steps := []struct {
		req events.APIGatewayV2HTTPRequest
		httpStep
	}{
		{githubDelivery("1f6e0a70-c9a1-11ef-9a8b-3d2c1b0a9f8e", "issues", githubIssueOpened), httpStep{"delivery", 202, `{"ticket":1}`, false, "", executed}},
		{githubDelivery("1f6e0a70-c9a1-11ef-9a8b-3d2c1b0a9f8e", "issues", githubIssueOpened), httpStep{"redelivery", 202, `{"ticket":1}`, true, "", replayed}},
		{githubDelivery("5c4b3a29-c9a2-11ef-8c7d-6e5f4a3b2c1d", "issues", githubIssueOpened), httpStep{"another delivery of the same payload", 202, `{"ticket":2}`, false, "", executed}},
		{noHeader, httpStep{"no delivery header", 400, "", false, idemlambda.ProblemMissingKeySource, []idem.Verdict{idem.MissingKey}}},
		{twice, httpStep{"a repeated header, comma-joined", 400, "", false, idemlambda.ProblemInvalidKeySource, []idem.Verdict{idem.InvalidKey}}},
	}
	for i, s := range steps {
		resp, err := handle(e.ctx(t, 10*time.Second), s.req)
		if err != nil {
			t.Fatal(err)
		}
		s.check(t, i, v, resp.StatusCode, resp.Body, resp.Headers[idemlambda.HeaderReplayed] == "true")
	}
}

func equalVerdicts(a, b []idem.Verdict) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// httpStep is one request of a webhook test: the answer and the verdicts
// it must have; problem names the problem type of an answer the wrapper
// gives in the handler's place.
type httpStep struct {
	name     string
	status   int
	body     string
	replayed bool
	problem  string
	verdicts []idem.Verdict
}

// check compares the answer of step i with s.
func (s httpStep) check(t *testing.T, i int, v *verdictLog, status int, body string, replayed bool) {
	t.Helper()
	if got := v.take(); !equalVerdicts(got, s.verdicts) {
		t.Errorf("step %d (%s): verdicts %v want %v", i, s.name, got, s.verdicts)
	}
	if s.problem != "" {
		var p idemlambda.Problem
		if json.Unmarshal([]byte(body), &p) != nil || status != s.status || p.Status != status || p.Type != idemlambda.ProblemTypeBase+s.problem {
			t.Errorf("step %d (%s): %d %s; want %d %s", i, s.name, status, body, s.status, s.problem)
		}
		return
	}
	if status != s.status || body != s.body || replayed != s.replayed {
		t.Errorf("step %d (%s): %d %s replayed %v; want %d %s replayed %v", i, s.name, status, body, replayed, s.status, s.body, s.replayed)
	}
}

// stripeEvent is a Stripe event as Stripe posts it to a webhook endpoint.
// pendingWebhooks is the event's count of endpoints not yet answered, which
// can differ between two deliveries of one event.
func stripeEvent(id, intent string, amount, pendingWebhooks int) string {
	return fmt.Sprintf(`{
  "id": %q,
  "object": "event",
  "api_version": "2024-06-20",
  "created": 1893553445,
  "data": {
    "object": {
      "id": %q,
      "object": "payment_intent",
      "amount": %d,
      "amount_received": %d,
      "currency": "eur",
      "customer": "cus_Q9xM2kLp4RtZ1a",
      "livemode": false,
      "metadata": {"order_id": "o-1001"},
      "status": "succeeded"
    }
  },
  "livemode": false,
  "pending_webhooks": %d,
  "request": {"id": "req_8HrT3kLm2PqW9x", "idempotency_key": "5b1f2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"},
  "type": "payment_intent.succeeded"
}`, id, intent, amount, amount, pendingWebhooks)
}

// stripeDelivery is a Stripe webhook request to a function URL: each
// attempt has its own Stripe-Signature (a timestamp and an HMAC).
func stripeDelivery(attempt int, body string) events.LambdaFunctionURLRequest {
	return events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: "/webhooks/stripe", Body: body,
		Headers: map[string]string{
			"accept":           "*/*; q=0.5, application/xml",
			"cache-control":    "no-cache",
			"content-type":     "application/json; charset=utf-8",
			"stripe-signature": fmt.Sprintf("t=%d,v1=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a3%d", 1893553445+60*attempt, attempt%10),
			"user-agent":       "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
		},
		RequestContext: events.LambdaFunctionURLRequestContext{
			RequestID: fmt.Sprintf("url-%d", attempt),
			HTTP:      events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/webhooks/stripe", Protocol: "HTTP/1.1", SourceIP: "3.18.12.63", UserAgent: "Stripe/1.0"},
		},
	}
}

// A Stripe event deduplicated by its id, taken from the body: a retry
// replays (also when pending_webhooks changed, which the fingerprint
// ignores), another event runs, a body without an id is 400.
func TestFunctionURLStripeWebhook(t *testing.T) {
	t.Parallel()
	e, v := observedEnv(t)
	var runs counter
	handle, err := idemlambda.FunctionURL(e.runner, func(ctx context.Context, r events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		var ev struct {
			Data struct {
				Object struct {
					ID string `json:"id"`
				} `json:"object"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(r.Body), &ev); err != nil {
			return events.LambdaFunctionURLResponse{StatusCode: 400}, nil
		}
		return events.LambdaFunctionURLResponse{StatusCode: 200, Body: fmt.Sprintf(`{"received":true,"fulfilment":%d}`, runs.inc(ev.Data.Object.ID))}, nil
	}, idemlambda.WithEndpoint("stripe"), idemlambda.WithKeyBodyField("id"), idemlambda.WithFingerprintSelection(core.IgnoreFields("pending_webhooks")))
	if err != nil {
		t.Fatal(err)
	}
	paid := stripeEvent("evt_3PxK2mLp4RtZ1a0B1cD2eF3g", "pi_3PxK2mLp4RtZ1a0B", 2500, 2)
	steps := []struct {
		req events.LambdaFunctionURLRequest
		httpStep
	}{
		{stripeDelivery(1, paid), httpStep{"delivery", 200, `{"received":true,"fulfilment":1}`, false, "", executed}},
		{stripeDelivery(2, paid), httpStep{"retry, same body", 200, `{"received":true,"fulfilment":1}`, true, "", replayed}},
		{stripeDelivery(3, stripeEvent("evt_3PxK2mLp4RtZ1a0B1cD2eF3g", "pi_3PxK2mLp4RtZ1a0B", 2500, 1)), httpStep{"retry, pending_webhooks changed", 200, `{"received":true,"fulfilment":1}`, true, "", replayed}},
		{stripeDelivery(4, stripeEvent("evt_3PxK9zYx8WvU7t6S5r4Q3p2o", "pi_3PxK9zYx8WvU7t6S", 900, 1)), httpStep{"another event", 200, `{"received":true,"fulfilment":1}`, false, "", executed}},
		{stripeDelivery(5, stripeEvent("evt_3PxK2mLp4RtZ1a0B1cD2eF3g", "pi_3PxK2mLp4RtZ1a0B", 9999, 1)), httpStep{"the id reused with another amount", 422, "", false, idemlambda.ProblemKeyReused, reused}},
		{stripeDelivery(6, `{"object":"event","type":"ping"}`), httpStep{"a body without an id", 400, "", false, idemlambda.ProblemMissingKeySource, []idem.Verdict{idem.MissingKey}}},
		{stripeDelivery(7, `id=evt_1`), httpStep{"a body that is not JSON", 400, "", false, idemlambda.ProblemMissingKeySource, []idem.Verdict{idem.MissingKey}}},
		{stripeDelivery(8, `{"id":{"evt":1}}`), httpStep{"an id that is an object", 400, "", false, idemlambda.ProblemInvalidKeySource, []idem.Verdict{idem.InvalidKey}}},
	}
	for i, s := range steps {
		resp, err := handle(e.ctx(t, 10*time.Second), s.req)
		if err != nil {
			t.Fatal(err)
		}
		s.check(t, i, v, resp.StatusCode, resp.Body, resp.Headers[idemlambda.HeaderReplayed] == "true")
	}
}

// A composite key from two headers (Shopify names the shop and the
// webhook), on a REST API: the same webhook id from another shop runs.
func TestRESTAPICompositeKeyHeaders(t *testing.T) {
	t.Parallel()
	e, v := observedEnv(t)
	handle, err := idemlambda.RESTAPI(e.runner, func(ctx context.Context, r events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		return events.APIGatewayProxyResponse{StatusCode: 200}, nil
	}, idemlambda.WithEndpoint("shopify"), idemlambda.WithKeyHeader("X-Shopify-Shop-Domain"), idemlambda.WithKeyHeader("X-Shopify-Webhook-Id"))
	if err != nil {
		t.Fatal(err)
	}
	req := func(shop, id string) events.APIGatewayProxyRequest {
		h := map[string][]string{
			"Content-Type": {"application/json"}, "X-Shopify-Topic": {"orders/create"}, "X-Shopify-Hmac-Sha256": {"XWmrwMey6OsLMeiZKwP4FppHH3cmAiiJJAweH5Jo4bM="},
			"X-Shopify-Shop-Domain": {shop}, "X-Shopify-Webhook-Id": {id}, "X-Shopify-Api-Version": {"2024-07"},
		}
		return events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/hooks/shopify", Resource: "/hooks/shopify", MultiValueHeaders: h, Body: `{"id":820982911946154500,"email":"jon@example.com"}`}
	}
	for i, r := range []events.APIGatewayProxyRequest{
		req("shop-a.myshopify.com", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"),
		req("shop-b.myshopify.com", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"),
		req("shop-a.myshopify.com", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"),
	} {
		if resp, err := handle(e.ctx(t, 10*time.Second), r); err != nil || resp.StatusCode != 200 {
			t.Fatalf("request %d: %+v, %v", i, resp, err)
		}
	}
	if got := v.take(); !equalVerdicts(got, []idem.Verdict{idem.Executed, idem.Executed, idem.Replayed}) {
		t.Errorf("verdicts = %v", got)
	}
}

// WithKeyHeader("Idempotency-Key") alone is the default: the same stored
// key, the same IETF rules.
func TestWithKeyHeaderIdempotencyKeyIsTheDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var keys []string
	h := func(ctx context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		k, _ := idemlambda.StoredKey(ctx)
		keys = append(keys, k)
		return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
	}
	plain, _ := idemlambda.HTTPAPI(e.runner, h)
	named, err := idemlambda.HTTPAPI(newEnv(t).runner, h, idemlambda.WithKeyHeader("idempotency-key"))
	if err != nil {
		t.Fatal(err)
	}
	r := v2Req("POST", "/orders", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `{}`)
	for _, handle := range []func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error){plain, named} {
		if _, err := handle(e.ctx(t, time.Second), r); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := idemlambda.HTTPKey("8e03978e-40d5-43e8-bc93-6894a57f9324", nil)
	if len(keys) != 2 || keys[0] != want || keys[1] != want {
		t.Errorf("stored keys %v; want both %s", keys, want)
	}
	for name, opt := range map[string]idemlambda.HTTPOption{"empty header": idemlambda.WithKeyHeader(""), "bad header": idemlambda.WithKeyHeader("X Bad"), "empty field": idemlambda.WithKeyBodyField("a..b")} {
		if _, err := idemlambda.HTTPAPI(e.runner, h, opt); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// An ALB: the key header, and WithOptionalKey letting a request without it
// run unkeyed.
func TestALBKeyHeaderOptional(t *testing.T) {
	t.Parallel()
	e, v := observedEnv(t)
	var runs counter
	handle, err := idemlambda.ALB(e.runner, func(ctx context.Context, r events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		return events.ALBTargetGroupResponse{StatusCode: 200, Body: fmt.Sprint(runs.inc("all"))}, nil
	}, idemlambda.WithEndpoint("hooks"), idemlambda.WithKeyHeader("X-Delivery-Id"), idemlambda.WithOptionalKey())
	if err != nil {
		t.Fatal(err)
	}
	with := albReq(false, "POST", "/hooks", "", `{"a":1}`, "x-delivery-id", "d-0001")
	without := albReq(false, "POST", "/hooks", "", `{"a":1}`)
	for i, r := range []events.ALBTargetGroupRequest{with, with, without, without} {
		if _, err := handle(e.ctx(t, time.Second), r); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if got := v.take(); !equalVerdicts(got, []idem.Verdict{idem.Executed, idem.Replayed, idem.Unkeyed, idem.Unkeyed}) || runs.get("all") != 3 {
		t.Errorf("verdicts %v, runs %d; want the keyed request once and the unkeyed ones each", got, runs.get("all"))
	}
}
