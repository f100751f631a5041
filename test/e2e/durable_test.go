package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem/internal/devserver"
	"github.com/idemgo/idem/internal/invokeserver"
	"github.com/idemgo/idem/internal/webhooktest"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/lambda/durable"
)

const (
	// durableARN is the durable function's qualified ARN (its alias live).
	durableARN = "arn:aws:lambda:us-east-1:123456789012:function:fulfil:live"
	// githubSecret is the durable-webhook function's GitHub secret.
	githubSecret = "It's a Secret to Everybody"
)

// startDispatcher runs the dispatcher name under its own RIE instance,
// invoking the durable function durableARN on srv, the local Invoke API, as
// it would Lambda's (AWS_ENDPOINT_URL_LAMBDA).
func startDispatcher(t *testing.T, name string, srv *invokeserver.Server) *devserver.RIE {
	t.Helper()
	return runFunction(t, setup(t), name, functionTimeout, []string{
		"DURABLE_FUNCTION_ARN=" + durableARN,
		"AWS_ENDPOINT_URL_LAMBDA=" + srv.URL,
		"GITHUB_WEBHOOK_SECRET=" + githubSecret,
	})
}

// twoSandboxes starts a local Invoke API and two sandboxes of the
// dispatcher name that invoke it.
func twoSandboxes(t *testing.T, name string) (s *stack, srv *invokeserver.Server, a, b *devserver.RIE) {
	t.Helper()
	srv = invokeserver.Start()
	t.Cleanup(srv.Close)
	return &stack{t: t}, srv, startDispatcher(t, name, srv), startDispatcher(t, name, srv)
}

// orderMessage is an SQS message of the orders queue with id and body.
func orderMessage(id, body string) events.SQSMessage {
	return events.SQSMessage{
		MessageId: id, Body: body, EventSource: "aws:sqs", EventSourceARN: queueARN, AWSRegion: "us-east-1",
		Attributes: map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1767268800000"},
	}
}

// startedCounts checks the server's executions started and invocations.
func startedCounts(t *testing.T, what string, srv *invokeserver.Server, started, invocations int) {
	t.Helper()
	if s, n := srv.Started(), len(srv.Invocations()); s != started || n != invocations {
		t.Errorf("%s: %d executions started by %d invocations, want %d by %d", what, s, n, started, invocations)
	}
}

// The example dispatcher (examples/durable/dispatcher), run as Lambda runs
// it, starts one execution per order across duplicates in a batch and
// redeliveries to the same and to another sandbox; a redelivery with
// another payload is reported, refused by Lambda; a throttled start is
// retried and starts once. Each verdict is in the function's log.
func TestDurableDispatcher(t *testing.T) {
	t.Parallel()
	s, srv, a, b := twoSandboxes(t, "durable-dispatcher")

	first := []events.SQSMessage{
		orderMessage("m-1", `{"order_id":"o-1","amount":10}`),
		orderMessage("m-2", `{"order_id":"o-2","amount":20}`),
		orderMessage("m-3", "{ \"amount\": 10,\n \"order_id\": \"o-1\" }"), // o-1 again, sent otherwise
		orderMessage("m-4", `{"order_id":"o-3","amount":30}`),
	}
	if failed := s.sqsBatch(a, first...); len(failed) != 0 {
		t.Fatalf("first batch: reported %v, want none", failed)
	}
	startedCounts(t, "first batch", srv, 3, 3)
	if failed := s.sqsBatch(a, first...); len(failed) != 0 {
		t.Errorf("redelivery to the same sandbox: reported %v, want none", failed)
	}
	startedCounts(t, "redelivery to the same sandbox", srv, 3, 3)
	if failed := s.sqsBatch(b, first[:2]...); len(failed) != 0 {
		t.Errorf("redelivery to another sandbox: reported %v, want none", failed)
	}
	startedCounts(t, "redelivery to another sandbox", srv, 3, 5)

	// o-3 with another amount, where only Lambda knows the name.
	changed := orderMessage("m-5", `{"order_id":"o-3","amount":31}`)
	if failed := s.sqsBatch(b, changed); fmt.Sprint(failed) != "[m-5]" {
		t.Errorf("another payload: reported %v, want [m-5]", failed)
	}
	srv.Fail(invokeserver.Throttle)
	if failed := s.sqsBatch(b, orderMessage("m-6", `{"order_id":"o-4","amount":40}`)); len(failed) != 0 {
		t.Errorf("throttled once: reported %v, want none", failed)
	}
	var got []int
	for _, inv := range srv.Invocations()[5:] {
		got = append(got, inv.Status)
	}
	if fmt.Sprint(got) != "[409 429 202]" {
		t.Errorf("statuses of Lambda's answers = %v, want [409 429 202]", got)
	}
	startedCounts(t, "in all", srv, 4, 8)
	if v := verdicts(a.Log(), "sqs"); v["executed"] != 3 || v["replayed"] != 5 {
		t.Errorf("first sandbox's verdicts %v, want executed 3 and replayed 5", v)
	}
	if v := verdicts(b.Log(), "sqs"); v["executed"] != 3 || v["key_reused"] != 1 {
		t.Errorf("second sandbox's verdicts %v, want executed 3 and key_reused 1", v)
	}
}

// githubDelivery is a function URL request carrying a GitHub delivery of
// body with id, signed with secret.
func githubDelivery(id, body, secret string) events.LambdaFunctionURLRequest {
	req := events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: "/", Body: body,
		Headers: map[string]string{
			"content-type": "application/json", "user-agent": "GitHub-Hookshot/a1b2c3d",
			"x-github-event": "push", "x-github-delivery": id,
			"x-hub-signature-256": webhooktest.GitHubSignature(secret, body),
		},
	}
	req.RequestContext.HTTP.Method, req.RequestContext.HTTP.Path = "POST", "/"
	return req
}

// functionURL sends req to r and returns its answer, headers lower-case.
func functionURL(s *stack, r *devserver.RIE, req events.LambdaFunctionURLRequest) events.LambdaFunctionURLResponse {
	s.t.Helper()
	var resp events.LambdaFunctionURLResponse
	if body := s.invoke(r, req); json.Unmarshal(body, &resp) != nil || resp.StatusCode == 0 {
		s.t.Fatalf("function URL answer %s", body)
	}
	h := map[string]string{}
	for k, v := range resp.Headers {
		h[strings.ToLower(k)] = v
	}
	resp.Headers = h
	return resp
}

// problemType is the problem type of an answer, "" for none.
func problemType(resp events.LambdaFunctionURLResponse) string {
	var p struct{ Type string }
	if json.Unmarshal([]byte(resp.Body), &p) != nil {
		return ""
	}
	return strings.TrimPrefix(p.Type, idemlambda.ProblemTypeBase)
}

// A GitHub webhook's dispatcher behind a function URL, run as Lambda runs
// it: a delivery starts one execution, its redeliveries reach it from the
// same sandbox (replayed) and another one; a delivery whose signature does
// not verify, and a body over the asynchronous limit, start nothing; another
// body under a delivery id is 422. The durable function receives the body,
// the delivery id and the forwarded event type.
func TestDurableWebhookDispatcher(t *testing.T) {
	t.Parallel()
	s, srv, a, b := twoSandboxes(t, "durable-webhook")
	const body = `{"after":"6113728f27ae82c7b1a177c8d03f9e96e0adf246","ref":"refs/heads/main"}` // canonical: as received

	resp := functionURL(s, a, githubDelivery("d-1", body, githubSecret))
	var started durable.Started
	if resp.StatusCode != 202 || json.Unmarshal([]byte(resp.Body), &started) != nil || started.ExecutionARN == "" {
		t.Fatalf("first delivery: %+v, want 202 with the execution", resp)
	}
	if again := functionURL(s, a, githubDelivery("d-1", body, githubSecret)); again.StatusCode != 202 || again.Body != resp.Body || again.Headers["idempotent-replayed"] != "true" {
		t.Errorf("redelivery to the same sandbox: %+v, want the first answer, replayed", again)
	}
	if other := functionURL(s, b, githubDelivery("d-1", body, githubSecret)); other.StatusCode != 202 || other.Body != resp.Body {
		t.Errorf("redelivery to another sandbox: %+v, want 202 %s", other, resp.Body)
	}
	startedCounts(t, "redeliveries", srv, 1, 2)
	raw, _ := srv.Payload(started.ExecutionName)
	var got struct {
		Headers map[string]string `json:"headers"`
		Key     map[string]string `json:"key"`
		Request struct {
			JSON json.RawMessage `json:"json"`
		} `json:"request"`
	}
	if json.Unmarshal(raw, &got) != nil || got.Headers["x-github-event"] != "push" || got.Key["header:x-github-delivery"] != "d-1" ||
		string(got.Request.JSON) != body {
		t.Errorf("the durable function received %s; want the body, the delivery id and the event type", raw)
	}

	for _, c := range []struct {
		name    string
		req     events.LambdaFunctionURLRequest
		status  int
		problem string
	}{
		{"wrong secret", githubDelivery("d-2", body, "another secret"), 401, idemlambda.ProblemInvalidSignature},
		{"over the limit", githubDelivery("d-3", `{"pad":"`+strings.Repeat("x", durable.MaxPayload)+`"}`, githubSecret), 413, durable.ProblemBodyTooLarge},
	} {
		if resp := functionURL(s, b, c.req); resp.StatusCode != c.status || problemType(resp) != c.problem {
			t.Errorf("%s: %d %s, want %d %s", c.name, resp.StatusCode, problemType(resp), c.status, c.problem)
		}
	}
	startedCounts(t, "refused deliveries", srv, 1, 2)
	changed := strings.Replace(body, "main", "dev", 1)
	if resp := functionURL(s, b, githubDelivery("d-1", changed, githubSecret)); resp.StatusCode != 422 || problemType(resp) != idemlambda.ProblemKeyReused {
		t.Errorf("another body: %d %s, want 422 %s", resp.StatusCode, problemType(resp), idemlambda.ProblemKeyReused)
	}
	if v := verdicts(b.Log(), "http"); v["executed"] != 1 || v["unauthorized"] != 1 || v["invalid_payload"] != 1 || v["key_reused"] != 1 {
		t.Errorf("second sandbox's verdicts %v, want executed, unauthorized, invalid_payload and key_reused once each", v)
	}
}
