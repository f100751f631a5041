package idemlambda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/memstore"
)

// A queue subscribed to an SNS topic without raw message delivery: the key
// is a field of the published message, which is also what the handler
// reads. The event published twice (two notifications, each with its own
// MessageId, Timestamp and Signature) ships once.
func ExampleWithEnvelope() {
	runner, err := idem.New(memstore.New())
	if err != nil {
		panic(err)
	}
	handle, err := idemlambda.SQS(runner, "ship-order", idemlambda.KeyFromBodyField("order_id"),
		func(ctx context.Context, msg events.SQSMessage) ([]byte, error) {
			fmt.Println("shipping", msg.Body) // the published message, not the notification
			return nil, nil
		}, idemlambda.WithEnvelope(idemlambda.SNSEnvelope()))
	if err != nil {
		panic(err)
	}
	notification := func(snsID, published string) string {
		return `{"Type":"Notification","MessageId":"` + snsID + `","TopicArn":"arn:aws:sns:eu-west-1:123456789012:orders",` +
			`"Message":"{\"order_id\":\"o-1\",\"cents\":1250}","Timestamp":"` + published + `","SignatureVersion":"1","Signature":"c2ln` + snsID + `"}`
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, body := range []string{notification("sns-1", "2030-01-02T03:04:05.000Z"), notification("sns-2", "2030-01-02T03:09:41.000Z")} {
		resp, _ := handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: fmt.Sprint("m-", i), Body: body}}})
		fmt.Println("redeliver:", resp.BatchItemFailures)
	}
	// Output:
	// shipping {"order_id":"o-1","cents":1250}
	// redeliver: []
	// redeliver: []
}

// A topic that invokes the function directly: SNS's retries and a second
// publish of one event run the handler once.
func ExampleSNS() {
	runner, err := idem.New(memstore.New())
	if err != nil {
		panic(err)
	}
	runs := 0
	handle, err := idemlambda.SNS(runner, "send-receipt", idemlambda.KeyFromBodyField("order_id"),
		func(ctx context.Context, rec events.SNSEventRecord) ([]byte, error) {
			runs++
			return nil, nil
		})
	if err != nil {
		panic(err)
	}
	publish := func(snsID string) events.SNSEvent {
		return events.SNSEvent{Records: []events.SNSEventRecord{{EventSource: "aws:sns", SNS: events.SNSEntity{
			Type: "Notification", MessageID: snsID, Message: `{"order_id":"o-1"}`, Timestamp: time.Now(),
		}}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fmt.Println(handle(ctx, publish("sns-1")), handle(ctx, publish("sns-1")), handle(ctx, publish("sns-2")))
	fmt.Println("receipts sent:", runs)
	// Output:
	// <nil> <nil> <nil>
	// receipts sent: 1
}

// A composite key: a tenant's message attribute and an order id from the
// body. The same order id under another tenant is another event.
func ExampleKeyFromAll() {
	runner, err := idem.New(memstore.New())
	if err != nil {
		panic(err)
	}
	key := idemlambda.KeyFromAll(idemlambda.KeyFromAttribute("tenant"), idemlambda.KeyFromBodyField("order_id"))
	handle, err := idemlambda.SQS(runner, "invoice", key, func(ctx context.Context, msg events.SQSMessage) ([]byte, error) {
		fmt.Println("invoicing", *msg.MessageAttributes["tenant"].StringValue, msg.Body)
		return nil, nil
	}, idemlambda.WithConcurrency(1))
	if err != nil {
		panic(err)
	}
	msg := func(id, tenant string) events.SQSMessage {
		return events.SQSMessage{MessageId: id, Body: `{"order_id":"o-7"}`,
			MessageAttributes: map[string]events.SQSMessageAttribute{"tenant": {DataType: "String", StringValue: &tenant}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = handle(ctx, events.SQSEvent{Records: []events.SQSMessage{msg("m-1", "acme"), msg("m-2", "globex"), msg("m-3", "acme")}})
	// Output:
	// invoicing acme {"order_id":"o-7"}
	// invoicing globex {"order_id":"o-7"}
}

// A key function, here for Kinesis records whose partition key is
// "<tenant>/<event id>".
func ExampleKeyFromFunc() {
	src := idemlambda.KeyFromFunc("event id in the partition key", func(r events.KinesisEventRecord) (string, error) {
		_, id, ok := strings.Cut(r.Kinesis.PartitionKey, "/")
		if !ok {
			return "", fmt.Errorf("partition key %q has no event id", r.Kinesis.PartitionKey)
		}
		return id, nil
	})
	id, err := src.EventID(events.KinesisEventRecord{Kinesis: events.KinesisRecord{PartitionKey: "acme/evt-9"}})
	fmt.Println(id, err)
	_, err = src.EventID(events.KinesisEventRecord{Kinesis: events.KinesisRecord{PartitionKey: "acme"}})
	fmt.Println(err)
	// Output:
	// evt-9 <nil>
	// idemlambda: event has no usable idempotency key: event id in the partition key: partition key "acme" has no event id
}

// An event published again with a new timestamp in its body replays,
// because the fingerprint ignores that field; another amount under the same
// key is still refused.
func ExampleWithFingerprintSelection() {
	verdicts := idem.ObserverFunc(func(_ context.Context, o idem.Observation) { fmt.Println(o.Verdict) })
	runner, err := idem.New(memstore.New(), idem.WithObserver(verdicts))
	if err != nil {
		panic(err)
	}
	handle, err := idemlambda.SQS(runner, "ship-order", idemlambda.KeyFromBodyField("order_id"),
		func(ctx context.Context, msg events.SQSMessage) ([]byte, error) { return nil, nil },
		idemlambda.WithFingerprintSelection(core.IgnoreFields("published_at")), idemlambda.WithConcurrency(1))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = handle(ctx, events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: `{"order_id":"o-1","cents":100,"published_at":"2030-01-02T03:04:05Z"}`},
		{MessageId: "m-2", Body: `{"order_id":"o-1","cents":100,"published_at":"2030-01-02T03:20:00Z"}`},
		{MessageId: "m-3", Body: `{"order_id":"o-1","cents":999,"published_at":"2030-01-02T03:21:00Z"}`},
	}})
	// Output:
	// executed
	// replayed
	// key_reused
}

// A GitHub webhook on an HTTP API route, keyed by the delivery id GitHub
// keeps when it redelivers.
func ExampleWithKeyHeader() {
	runner, err := idem.New(memstore.New())
	if err != nil {
		panic(err)
	}
	builds := 0
	handle, err := idemlambda.HTTPAPI(runner, func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		builds++
		return events.APIGatewayV2HTTPResponse{StatusCode: 202, Body: fmt.Sprintf(`{"build":%d}`, builds)}, nil
	}, idemlambda.WithEndpoint("github-builds"), idemlambda.WithKeyHeader("X-GitHub-Delivery"))
	if err != nil {
		panic(err)
	}
	delivery := func(guid string) events.APIGatewayV2HTTPRequest {
		h := map[string]string{"content-type": "application/json", "x-github-event": "push"}
		if guid != "" {
			h["x-github-delivery"] = guid
		}
		return events.APIGatewayV2HTTPRequest{RawPath: "/hooks/github", Headers: h, Body: `{"ref":"refs/heads/main"}`,
			RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/hooks/github"}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, guid := range []string{"72d3162e-0001", "72d3162e-0001", ""} {
		resp, _ := handle(ctx, delivery(guid))
		fmt.Println(resp.StatusCode, resp.Headers[idemlambda.HeaderReplayed], resp.Body)
	}
	// Output:
	// 202  {"build":1}
	// 202 true {"build":1}
	// 400  {"type":"https://github.com/idemgo/idem#missing-key-source","title":"Missing idempotency key source","status":400,"detail":"This endpoint takes its idempotency key from the X-GitHub-Delivery header, which this request lacks (idem: request has no idempotency key: no X-GitHub-Delivery header)."}
}

// A Stripe webhook on a function URL, keyed by the event's id in the body.
func ExampleWithKeyBodyField() {
	runner, err := idem.New(memstore.New())
	if err != nil {
		panic(err)
	}
	fulfilled := 0
	handle, err := idemlambda.FunctionURL(runner, func(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		var ev struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal([]byte(req.Body), &ev)
		fulfilled++
		return events.LambdaFunctionURLResponse{StatusCode: 200, Body: ev.Type}, nil
	}, idemlambda.WithEndpoint("fulfilment"), idemlambda.WithKeyBodyField("id"))
	if err != nil {
		panic(err)
	}
	event := func(sig, body string) events.LambdaFunctionURLRequest {
		return events.LambdaFunctionURLRequest{RawPath: "/webhooks/stripe", Headers: map[string]string{"stripe-signature": sig}, Body: body,
			RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/webhooks/stripe"}}}
	}
	body := `{"id":"evt_1PxK2m","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3PxK"}}}`
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, sig := range []string{"t=1893553445,v1=aa11", "t=1893553505,v1=bb22"} { // Stripe's retry: a new signature
		resp, _ := handle(ctx, event(sig, body))
		fmt.Println(resp.StatusCode, resp.Headers[idemlambda.HeaderReplayed], resp.Body)
	}
	fmt.Println("fulfilled:", fulfilled)
	// Output:
	// 200  payment_intent.succeeded
	// 200 true payment_intent.succeeded
	// fulfilled: 1
}

// A function builds its SQS wrapper from its key configuration, the JSON
// file the idem command also reads; MessageKey then gives the key the
// wrapper stored a message's record under, as an operator's tool finds it.
func ExampleParseKeyConfig() {
	kc, err := idemlambda.ParseKeyConfig([]byte(`{"action":"ship-order","key":["body:order_id"],"envelopes":["sns"]}`))
	if err != nil {
		panic(err)
	}
	src, err := kc.Source()
	if err != nil {
		panic(err)
	}
	opts, err := kc.BatchOptions()
	if err != nil {
		panic(err)
	}
	store := memstore.New()
	runner, err := idem.New(store)
	if err != nil {
		panic(err)
	}
	handle, err := idemlambda.SQS(runner, kc.Action, src, func(context.Context, events.SQSMessage) ([]byte, error) { return nil, nil }, opts...)
	if err != nil {
		panic(err)
	}
	msg := events.SQSMessage{MessageId: "m-1", Body: `{"Type":"Notification","MessageId":"n-1","TopicArn":"arn:aws:sns:us-east-1:123456789012:orders",` +
		`"Message":"{\"order_id\":\"ord_42\"}"}`}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := handle(ctx, events.SQSEvent{Records: []events.SQSMessage{msg}}); err != nil {
		panic(err)
	}
	key, err := kc.MessageKey(ctx, msg)
	if err != nil {
		panic(err)
	}
	rec, err := store.Get(ctx, key, time.Now())
	fmt.Println(rec.Status, err, idem.HashKey(key))
	// Output: succeeded <nil> b3b09e8d8fac8a5e
}
