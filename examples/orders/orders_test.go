package orders_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/orders"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/memstore"
)

const queueARN = "arn:aws:sqs:us-east-1:123456789012:orders"

func apiRequest(key, body string, headers map[string]string) events.APIGatewayV2HTTPRequest {
	h := map[string]string{"content-type": "application/json", "idempotency-key": key}
	for k, v := range headers {
		h[k] = v
	}
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "POST /orders", RawPath: "/orders", Headers: h, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: "POST /orders", Stage: "$default", RequestID: "r-" + key,
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/orders"},
		},
	}
}

type fixture struct {
	tables *orders.MemoryTables
	queue  *orders.MemoryQueue
	api    func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
	cons   func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
	stream func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{tables: &orders.MemoryTables{}, queue: &orders.MemoryQueue{}}
	d := orders.Deps{
		Store: memstore.New(), Orders: f.tables, Ledger: f.tables, Audit: f.tables, Publisher: f.queue, TestHooks: true,
		SafetyMargin: -1, RunnerOptions: []idem.Option{idem.WithRetry(1, 0, 0)},
	}
	var err error
	if f.api, err = orders.NewAPI(d); err != nil {
		t.Fatal(err)
	}
	if f.cons, err = orders.NewConsumer(d); err != nil {
		t.Fatal(err)
	}
	if f.stream, err = orders.NewStream(d); err != nil {
		t.Fatal(err)
	}
	return f
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

const order = `{"customer_id":"c-1","items":[{"sku":"book","qty":2,"price_cents":1250}]}`

func TestAPIPlacesOnceAndPublishesOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	first, _ := f.api(ctx(t), apiRequest("key-1", order, nil))
	second, _ := f.api(ctx(t), apiRequest("key-1", order, nil))
	if first.StatusCode != 201 || second.StatusCode != 201 || second.Headers[idemlambda.HeaderReplayed] != "true" || first.Body != second.Body {
		t.Fatalf("first %d %s, second %d %v %s", first.StatusCode, first.Body, second.StatusCode, second.Headers, second.Body)
	}
	var p orders.Placed
	if err := json.Unmarshal([]byte(first.Body), &p); err != nil || !strings.HasPrefix(p.OrderID, "ord_") || p.AmountCents != 2500 {
		t.Fatalf("body %s: %+v %v", first.Body, p, err)
	}
	if got := len(f.tables.Orders()); got != 1 {
		t.Errorf("%d orders, want 1", got)
	}
	msgs := f.queue.Receive(queueARN)
	if len(msgs) != 1 || !strings.Contains(msgs[0].Body, p.OrderID) {
		t.Fatalf("queue holds %v, want one OrderPlaced for %s", msgs, p.OrderID)
	}
}

func TestAPIValidationIsStored(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i, want := range []string{"", "true"} {
		r, _ := f.api(ctx(t), apiRequest("key-2", `{"items":[]}`, nil))
		if r.StatusCode != 400 || r.Headers[idemlambda.HeaderReplayed] != want {
			t.Errorf("request %d: %d %v, want 400 replayed %q", i, r.StatusCode, r.Headers, want)
		}
	}
}

func TestAPIHookFailureIsRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r1, _ := f.api(ctx(t), apiRequest("key-3", order, map[string]string{"X-Test-Fail": "503"}))
	r2, _ := f.api(ctx(t), apiRequest("key-3", order, nil))
	if r1.StatusCode != 503 || r2.StatusCode != 201 || r2.Headers[idemlambda.HeaderReplayed] != "" {
		t.Fatalf("got %d then %d %v; want 503 then a fresh 201", r1.StatusCode, r2.StatusCode, r2.Headers)
	}
	if got := len(f.tables.Orders()); got != 1 {
		t.Errorf("%d orders, want 1", got)
	}
}

func TestConsumerOneEntryPerEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, k := range []string{"a-key-1", "a-key-2"} {
		if r, _ := f.api(ctx(t), apiRequest(k, order, nil)); r.StatusCode != 201 {
			t.Fatalf("place: %d %s", r.StatusCode, r.Body)
		}
	}
	msgs := f.queue.Receive(queueARN)
	dup := orders.SQSRecord("dup-1", msgs[0].Body, 1, queueARN) // the same event, sent again
	poison := orders.SQSRecord("poison-1", `{"type":"OrderPlaced","event_id":"evt_p","order_id":"ord_p","fail":"poison"}`, 1, queueARN)
	flaky := orders.SQSRecord("flaky-1", `{"type":"OrderPlaced","event_id":"evt_f","order_id":"ord_f","fail":"transient_once"}`, 1, queueARN)
	resp, _ := f.cons(ctx(t), events.SQSEvent{Records: append(msgs, dup, poison, flaky)})
	got := map[string]bool{}
	for _, fl := range resp.BatchItemFailures {
		got[fl.ItemIdentifier] = true
	}
	if len(got) != 2 || !got["poison-1"] || !got["flaky-1"] {
		t.Fatalf("failures %v, want poison-1 and flaky-1", resp.BatchItemFailures)
	}
	again := orders.SQSRecord("flaky-1", flaky.Body, 2, queueARN)
	resp, _ = f.cons(ctx(t), events.SQSEvent{Records: []events.SQSMessage{again, msgs[1]}})
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("redelivery failures %v", resp.BatchItemFailures)
	}
	if n := len(f.tables.Entries()); n != 3 {
		t.Errorf("%d ledger entries, want 3 (two orders, the flaky event)", n)
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{orders.EnvIdemTable: "idem", orders.EnvLedgerTable: "ledger", orders.EnvLeaseMargin: "250ms", orders.EnvSafetyMargin: "1s", orders.EnvTestHooks: "1"}
	c, err := orders.ConfigFromEnv(func(k string) string { return env[k] }, orders.ConsumerEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.IdemTable != "idem" || c.LedgerTable != "ledger" || c.LeaseMargin != 250*time.Millisecond || c.SafetyMargin != time.Second || !c.TestHooks {
		t.Errorf("config %+v", c)
	}
	if _, err := orders.ConfigFromEnv(func(k string) string { return env[k] }, orders.APIEnv); err == nil || !strings.Contains(err.Error(), orders.EnvOrdersTable) {
		t.Errorf("missing ORDERS_TABLE: err = %v", err)
	}
	env[orders.EnvLeaseMargin] = "soon"
	if _, err := orders.ConfigFromEnv(func(k string) string { return env[k] }, orders.ConsumerEnv); err == nil {
		t.Error("a bad duration was accepted")
	}
}

// flakyPublisher fails its first Publish, after the order was written.
type flakyPublisher struct {
	orders.MemoryQueue
	mu    sync.Mutex
	calls int
}

func (p *flakyPublisher) Publish(ctx context.Context, ev orders.OrderPlaced) error {
	p.mu.Lock()
	p.calls++
	first := p.calls == 1
	p.mu.Unlock()
	if first {
		return errors.New("queue unavailable")
	}
	return p.MemoryQueue.Publish(ctx, ev)
}

func TestAPIRetryAfterPublishFailureWritesOneOrder(t *testing.T) {
	t.Parallel()
	tables, queue := &orders.MemoryTables{}, &flakyPublisher{}
	api, err := orders.NewAPI(orders.Deps{Store: memstore.New(), Orders: tables, Publisher: queue, RunnerOptions: []idem.Option{idem.WithRetry(1, 0, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := api(ctx(t), apiRequest("key-pub", order, nil))
	second, _ := api(ctx(t), apiRequest("key-pub", order, nil))
	if first.StatusCode != 500 || second.StatusCode != 201 {
		t.Fatalf("got %d %s then %d %s; want 500 then 201", first.StatusCode, first.Body, second.StatusCode, second.Body)
	}
	var p orders.Placed
	if err := json.Unmarshal([]byte(second.Body), &p); err != nil {
		t.Fatal(err)
	}
	if got := tables.Orders(); len(got) != 1 || got[0].OrderID != p.OrderID {
		t.Fatalf("orders %+v, want the one order %s", got, p.OrderID)
	}
	if msgs := queue.Receive(queueARN); len(msgs) != 1 || !strings.Contains(msgs[0].Body, p.OrderID) {
		t.Fatalf("queue holds %v, want one OrderPlaced for %s", msgs, p.OrderID)
	}
}

func TestAPIBase64Body(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := apiRequest("key-b64", base64.StdEncoding.EncodeToString([]byte(order)), nil)
	req.IsBase64Encoded = true
	r, _ := f.api(ctx(t), req)
	if r.StatusCode != 201 {
		t.Fatalf("base64 order: %d %s, want 201", r.StatusCode, r.Body)
	}
	if got := len(f.tables.Orders()); got != 1 {
		t.Errorf("%d orders, want 1", got)
	}
	// The same order sent as plain JSON with the same key is the same request.
	if r, _ := f.api(ctx(t), apiRequest("key-b64", order, nil)); r.StatusCode != 201 || r.Headers[idemlambda.HeaderReplayed] != "true" {
		t.Errorf("plain retry: %d %v %s, want a replayed 201", r.StatusCode, r.Headers, r.Body)
	}
	bad := apiRequest("key-b64-bad", "%%% not base64", nil)
	bad.IsBase64Encoded = true
	r, _ = f.api(ctx(t), bad)
	if r.StatusCode != 400 || !strings.HasSuffix(problemType(r.Body), idemlambda.ProblemInvalidBody) {
		t.Errorf("bad base64: %d %s, want 400 %s", r.StatusCode, r.Body, idemlambda.ProblemInvalidBody)
	}
}

func problemType(body string) string {
	var p idemlambda.Problem
	_ = json.Unmarshal([]byte(body), &p)
	return p.Type
}

// conditionFails is a DynamoDB client whose every conditional put fails, as
// it does when the item exists.
type conditionFails struct{ calls int }

func (c *conditionFails) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.calls++
	return nil, &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem", Err: &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}}
}

func TestDynamoTablesExistingItems(t *testing.T) {
	t.Parallel()
	db := &conditionFails{}
	tables := orders.DynamoTables{Client: db, OrdersTable: "orders", LedgerTable: "ledger"}
	if err := tables.PutOrder(ctx(t), orders.Order{OrderID: orders.OrderID("k")}); err != nil {
		t.Errorf("PutOrder over its own existing order: %v, want success", err)
	}
	if err := tables.Append(ctx(t), orders.Entry{EntryID: "ent_1"}); err == nil {
		t.Error("Append over an existing entry succeeded, want an error")
	}
	if db.calls != 2 {
		t.Errorf("%d PutItem calls, want 2", db.calls)
	}
}

func TestOrderID(t *testing.T) {
	t.Parallel()
	a, b := orders.OrderID("sha256:aa"), orders.OrderID("sha256:ab")
	if a != orders.OrderID("sha256:aa") || a == b || len(a) != len("ord_")+16 || !strings.HasPrefix(a, "ord_") {
		t.Errorf("OrderID: %q, %q", a, b)
	}
	// The handler derives the id from its execution's downstream key, as
	// OrderID does from the stored key.
	r, err := idem.New(memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Do(ctx(t), "sha256:aa", []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		id, err := idem.DownstreamKey(ctx, "order")
		return []byte("ord_" + id[:16]), err
	})
	if err != nil || string(out.Result) != a {
		t.Errorf("the handler's order id = %q, %v; want OrderID's %q", out.Result, err, a)
	}
}

const ordersStreamARN = "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2026-01-01T00:00:00.000"

// orderRecord returns the n-th record of the orders table's stream: a change
// named name of the order orderID, its NewImage as orders-api writes it,
// plus extra attributes (test hooks).
func orderRecord(n int, name, orderID string, extra map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	img := map[string]events.DynamoDBAttributeValue{
		orders.OrdersKeyAttr: events.NewStringAttribute(orderID),
		"customer_id":        events.NewStringAttribute("c-1"),
		"amount_cents":       events.NewNumberAttribute("2500"),
		"items":              events.NewStringAttribute(`[{"sku":"book","qty":2,"price_cents":1250}]`),
		"placed_at":          events.NewStringAttribute("2026-01-01T12:00:00Z"),
	}
	for k, v := range extra {
		img[k] = v
	}
	return events.DynamoDBEventRecord{
		EventID: fmt.Sprintf("%032x", n), EventName: name, EventSource: "aws:dynamodb", EventVersion: "1.1",
		AWSRegion: "us-east-1", EventSourceArn: ordersStreamARN,
		Change: events.DynamoDBStreamRecord{
			Keys:           map[string]events.DynamoDBAttributeValue{orders.OrdersKeyAttr: events.NewStringAttribute(orderID)},
			NewImage:       img,
			SequenceNumber: fmt.Sprintf("%021d", 100+n),
			StreamViewType: "NEW_IMAGE",
		},
	}
}

func TestStreamOneAuditEntryPerOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	poison := map[string]events.DynamoDBAttributeValue{"test_fail": events.NewStringAttribute("poison")}
	batch := []events.DynamoDBEventRecord{
		orderRecord(1, "INSERT", "ord_1", nil),
		orderRecord(1, "INSERT", "ord_1", nil), // the same record twice
		orderRecord(2, "INSERT", "ord_2", nil),
		orderRecord(3, "MODIFY", "ord_1", nil), // not an order placed: dropped
		orderRecord(4, "INSERT", "ord_3", poison),
		orderRecord(5, "INSERT", "ord_4", nil),
	}
	seq := func(n int) []string { return []string{fmt.Sprintf("%021d", 100+n)} }
	deliveries := []struct {
		name string
		recs []events.DynamoDBEventRecord
		want []string
	}{
		{"the batch stops at the poison record", batch, seq(4)},
		{"Lambda retries from the checkpoint: the failure replays", batch[4:], seq(4)},
		{"a bisected half after the poison record", batch[5:], []string{}},
		{"the whole batch again", batch, seq(4)},
	}
	for _, dv := range deliveries {
		resp, err := f.stream(ctx(t), events.DynamoDBEvent{Records: dv.recs})
		var got []string
		for _, fl := range resp.BatchItemFailures {
			got = append(got, fl.ItemIdentifier)
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(dv.want) {
			t.Fatalf("%s: checkpoints %v, %v; want %v", dv.name, got, err, dv.want)
		}
	}
	per := map[string]int{}
	for _, e := range f.tables.AuditEntries() {
		per[e.OrderID]++
		if e.Event != "OrderPlaced" || e.CustomerID != "c-1" || e.AmountCents != 2500 {
			t.Errorf("audit entry %+v", e)
		}
	}
	if fmt.Sprint(per) != "map[ord_1:1 ord_2:1 ord_4:1]" {
		t.Errorf("audit entries per order = %v, want one for each of ord_1, ord_2 and ord_4", per)
	}
}

func TestStreamConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{orders.EnvIdemTable: "idem", orders.EnvSafetyMargin: "1s"}
	if _, err := orders.ConfigFromEnv(func(k string) string { return env[k] }, orders.StreamEnv); err == nil || !strings.Contains(err.Error(), orders.EnvAuditTable) {
		t.Errorf("missing AUDIT_TABLE: err = %v", err)
	}
	env[orders.EnvAuditTable] = "audit"
	c, err := orders.ConfigFromEnv(func(k string) string { return env[k] }, orders.StreamEnv)
	if err != nil || c.AuditTable != "audit" || c.SafetyMargin != time.Second {
		t.Errorf("config %+v, %v", c, err)
	}
	if _, err := orders.NewStream(orders.Deps{Store: memstore.New()}); err == nil {
		t.Error("NewStream without an audit table succeeded")
	}
}
