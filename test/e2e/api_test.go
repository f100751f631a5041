package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem/examples/orders"
	idemlambda "github.com/idemgo/idem/lambda"
)

const orderBody = `{"customer_id":"c-42","items":[{"sku":"book","qty":2,"price_cents":1250}]}`

// apiEvent returns an HTTP API (payload format 2.0) event for POST /orders.
func apiEvent(key, body string, headers map[string]string) events.APIGatewayV2HTTPRequest {
	h := map[string]string{
		"accept": "application/json", "content-type": "application/json", "content-length": strconv.Itoa(len(body)),
		"host": "abc123.execute-api.us-east-1.amazonaws.com", "user-agent": "curl/8.5.0",
		"x-amzn-trace-id": "Root=1-67a0c2b1-1234567890abcdef01234567", "x-forwarded-proto": "https",
	}
	if key != "" {
		h["idempotency-key"] = key
	}
	for k, v := range headers {
		h[k] = v
	}
	now := time.Now().UTC()
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "POST /orders", RawPath: "/orders", Headers: h, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: "POST /orders", AccountID: "123456789012", Stage: "$default",
			RequestID: orders.NewID("req-"), APIID: "abc123",
			DomainName: "abc123.execute-api.us-east-1.amazonaws.com", DomainPrefix: "abc123",
			Time: now.Format("02/Jan/2006:15:04:05 -0700"), TimeEpoch: now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: "POST", Path: "/orders", Protocol: "HTTP/1.1", SourceIP: "198.51.100.7", UserAgent: "curl/8.5.0",
			},
		},
	}
}

func orderID(t *testing.T, resp events.APIGatewayV2HTTPResponse) string {
	t.Helper()
	var p orders.Placed
	if err := json.Unmarshal([]byte(resp.Body), &p); err != nil || p.OrderID == "" {
		t.Fatalf("body %q: %v", resp.Body, err)
	}
	return p.OrderID
}

func wantProblem(t *testing.T, step string, resp events.APIGatewayV2HTTPResponse, status int, problem string) {
	t.Helper()
	var p idemlambda.Problem
	if resp.StatusCode != status || resp.Headers["Content-Type"] != idemlambda.ProblemContentType ||
		json.Unmarshal([]byte(resp.Body), &p) != nil || p.Type != idemlambda.ProblemTypeBase+problem || p.Status != status {
		t.Errorf("%s: got %d %v %s; want %d %s", step, resp.StatusCode, resp.Headers, resp.Body, status, problem)
	}
}

// The HTTP API function: replay, 422, 400s, a retried 5xx and a 409 from a
// concurrent request in a second sandbox; then the OrderPlaced messages it
// sent go through the consumer, with a duplicate.
func TestAPI(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	a := s.startWith("orders-api", holdTimeout, true)
	b := s.start("orders-api")

	// Replay: same key and body → same order, marked replayed, one item.
	first := s.http(a, apiEvent("0b5a3f4e-1111-4c2e-9d1a-000000000001", orderBody, nil))
	if first.StatusCode != 201 || first.Headers[idemlambda.HeaderReplayed] != "" {
		t.Fatalf("first: %d %v %s", first.StatusCode, first.Headers, first.Body)
	}
	id1 := orderID(t, first)
	replay := s.http(b, apiEvent("0b5a3f4e-1111-4c2e-9d1a-000000000001", " {\"items\":[{\"sku\":\"book\",\"qty\":2,\"price_cents\":1250}], \"customer_id\":\"c-42\"}", nil))
	if replay.StatusCode != 201 || replay.Headers[idemlambda.HeaderReplayed] != "true" || orderID(t, replay) != id1 || replay.Headers["Location"] != "/orders/"+id1 {
		t.Errorf("replay: %d %v %s; want 201 replayed with order %s", replay.StatusCode, replay.Headers, replay.Body, id1)
	}

	// 422: the key reused with another body.
	wantProblem(t, "reuse", s.http(a, apiEvent("0b5a3f4e-1111-4c2e-9d1a-000000000001", `{"customer_id":"c-42","items":[{"sku":"pen","qty":1,"price_cents":100}]}`, nil)), 422, idemlambda.ProblemKeyReused)
	// 400: missing and invalid keys.
	wantProblem(t, "missing key", s.http(a, apiEvent("", orderBody, nil)), 400, idemlambda.ProblemMissingKey)
	wantProblem(t, "invalid key", s.http(a, apiEvent(strings.Repeat("k", 300), orderBody, nil)), 400, idemlambda.ProblemInvalidKey)
	wantProblem(t, "invalid key", s.http(a, apiEvent("two words", orderBody, nil)), 400, idemlambda.ProblemInvalidKey)

	// 5xx: not stored; the retry runs the handler again and creates the order.
	failed := s.http(a, apiEvent("0b5a3f4e-2222-4c2e-9d1a-000000000002", orderBody, map[string]string{"x-test-fail": "503"}))
	if failed.StatusCode != 503 {
		t.Fatalf("hooked failure: %d %s", failed.StatusCode, failed.Body)
	}
	retried := s.http(b, apiEvent("0b5a3f4e-2222-4c2e-9d1a-000000000002", orderBody, nil))
	if retried.StatusCode != 201 || retried.Headers[idemlambda.HeaderReplayed] != "" {
		t.Fatalf("retry after 503: %d %v %s; want a fresh 201", retried.StatusCode, retried.Headers, retried.Body)
	}
	id2 := orderID(t, retried)

	// 409: a request still in flight in sandbox a; its duplicate reaches b.
	const slowKey = "0b5a3f4e-3333-4c2e-9d1a-000000000003"
	key, err := idemlambda.HTTPKey(slowKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		resp events.APIGatewayV2HTTPResponse
		err  error
	}
	slow := make(chan answer, 1)
	holdFile, release := hold(t)
	go func() {
		_, out, err := a.Invoke(context.Background(), mustJSON(t, apiEvent(slowKey, orderBody, map[string]string{"x-test-hold-file": holdFile})))
		var resp events.APIGatewayV2HTTPResponse
		if err == nil {
			err = json.Unmarshal(out, &resp)
		}
		slow <- answer{resp, err}
	}()
	held := s.waitInProgress("orders-api", key)
	conflict := s.http(b, apiEvent(slowKey, orderBody, nil))
	wantProblem(t, "concurrent", conflict, 409, idemlambda.ProblemInProgress)
	if ra, err := strconv.Atoi(conflict.Headers["Retry-After"]); err != nil || ra < 1 || ra > holdTimeout+1 {
		t.Errorf("Retry-After = %q, want whole seconds until the lease end (%v)", conflict.Headers["Retry-After"], held.LeaseUntil)
	}
	release()
	slowAnswer := <-slow
	done := slowAnswer.resp
	if slowAnswer.err != nil || done.StatusCode != 201 {
		t.Fatalf("slow request: %d %s (%v)", done.StatusCode, done.Body, slowAnswer.err)
	}
	id3 := orderID(t, done)
	// Sandbox b saw the key in progress: its memory of keys in progress may
	// answer 409 until its next recheck of the store, and says so in
	// Retry-After; a client that obeys it gets the replay.
	after := s.http(b, apiEvent(slowKey, orderBody, nil))
	for try := 0; after.StatusCode == 409 && try < 3; try++ {
		ra, err := strconv.Atoi(after.Headers["Retry-After"])
		if err != nil || ra != 1 {
			t.Fatalf("after the slow request: 409 with Retry-After %q, want 1 (the runner's next recheck, not the lease end)", after.Headers["Retry-After"])
		}
		time.Sleep(time.Duration(ra) * time.Second)
		after = s.http(b, apiEvent(slowKey, orderBody, nil))
	}
	if after.StatusCode != 201 || after.Headers[idemlambda.HeaderReplayed] != "true" || orderID(t, after) != id3 {
		t.Errorf("after the slow request: %d %v %s; want its order %s replayed", after.StatusCode, after.Headers, after.Body, id3)
	}

	// One order item per real execution.
	var ids []string
	for _, it := range s.scan(s.ordersTable) {
		ids = append(ids, it[orders.OrdersKeyAttr])
	}
	slices.Sort(ids)
	want := []string{id1, id2, id3}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("orders table = %v, want %v", ids, want)
	}

	// One OrderPlaced per order; delivered with a duplicate, one entry each.
	sent := s.sqs.bodies()
	if len(sent) != 3 {
		t.Fatalf("sent %d OrderPlaced messages, want 3: %v", len(sent), sent)
	}
	var batch []events.SQSMessage
	for i, body := range sent {
		batch = append(batch, record("sent-"+strconv.Itoa(i), body, 1))
	}
	batch = append(batch, record("sent-dup", sent[0], 1))
	consumer := s.start("orders-consumer")
	if got := s.sqsBatch(consumer, batch...); len(got) != 0 {
		t.Fatalf("consumer failures = %v", got)
	}
	entries := s.scan(s.ledgerTable)
	var ledgerOrders []string
	for _, e := range entries {
		ledgerOrders = append(ledgerOrders, e["order_id"])
	}
	slices.Sort(ledgerOrders)
	if !slices.Equal(ledgerOrders, want) {
		t.Errorf("ledger orders = %v, want one entry for each of %v", ledgerOrders, want)
	}
}

// A request whose OrderPlaced message could not be sent after its order was
// written is retried by the client: the retry writes the same order again
// (no second item) and sends the message once. A base64 body (as an HTTP API
// delivers a binary media type) is an order like any other.
func TestAPIRetryAfterPublishFailureAndBase64Body(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	a := s.start("orders-api")

	const key = "0b5a3f4e-4444-4c2e-9d1a-000000000004"
	s.sqs.refuseNext(1)
	wantProblem(t, "publish fails", s.http(a, apiEvent(key, orderBody, nil)), 500, idemlambda.ProblemInternal)
	retried := s.http(a, apiEvent(key, orderBody, nil))
	if retried.StatusCode != 201 || retried.Headers[idemlambda.HeaderReplayed] != "" {
		t.Fatalf("retry after the failed publish: %d %v %s; want a fresh 201", retried.StatusCode, retried.Headers, retried.Body)
	}
	id := orderID(t, retried)

	b64 := apiEvent("0b5a3f4e-5555-4c2e-9d1a-000000000005", base64.StdEncoding.EncodeToString([]byte(orderBody)), map[string]string{"content-type": "application/octet-stream"})
	b64.IsBase64Encoded = true
	placed := s.http(a, b64)
	if placed.StatusCode != 201 {
		t.Fatalf("base64 order: %d %s", placed.StatusCode, placed.Body)
	}
	want := []string{id, orderID(t, placed)}
	slices.Sort(want)

	var ids []string
	for _, it := range s.scan(s.ordersTable) {
		ids = append(ids, it[orders.OrdersKeyAttr])
	}
	slices.Sort(ids)
	if !slices.Equal(ids, want) {
		t.Errorf("orders table = %v, want %v", ids, want)
	}
	if sent := s.sqs.bodies(); len(sent) != 2 || !strings.Contains(sent[0], id) {
		t.Errorf("sent %v, want one OrderPlaced for %s, then one for the base64 order", sent, id)
	}
}
