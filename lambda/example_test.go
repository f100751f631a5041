package idemlambda_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/memstore"
)

// An SQS consumer that appends one ledger entry per OrderPlaced event, keyed
// by the event_id field of the body. In a Lambda function, main would call
// lambda.Start(handle) with a ddbstore.Store instead of the memstore.
func ExampleSQS() {
	runner, err := idem.New(memstore.New(), idem.WithRetry(1, 0, 0))
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex // messages run concurrently
	ledger := map[string]int{}
	handle, err := idemlambda.SQS(runner, "append-ledger", idemlambda.KeyFromBodyField("event_id"),
		func(ctx context.Context, msg events.SQSMessage) ([]byte, error) {
			var ev struct {
				EventID string `json:"event_id"`
				Cents   int    `json:"cents"`
			}
			if err := json.Unmarshal([]byte(msg.Body), &ev); err != nil {
				return nil, err // permanent: reported until the DLQ, replayed, never run again
			}
			if ev.Cents < 0 {
				return nil, core.MarkTransient(errors.New("ledger busy")) // reported for redelivery
			}
			mu.Lock()
			defer mu.Unlock()
			ledger[ev.EventID] += ev.Cents
			return nil, nil
		})
	if err != nil {
		panic(err)
	}
	msg := func(id, body string) events.SQSMessage {
		return events.SQSMessage{MessageId: id, Body: body, EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:orders"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // Lambda sets the deadline
	defer cancel()

	resp, _ := handle(ctx, events.SQSEvent{Records: []events.SQSMessage{
		msg("m1", `{"event_id":"evt-1","cents":500}`),
		msg("m2", `{"event_id":"evt-1","cents":500}`), // the same event, sent twice
		msg("m3", `{"event_id":"evt-2","cents":-1}`),  // fails transiently
		msg("m4", `{"cents":700}`),                    // no event_id: missing_key, reported
	}})
	fmt.Println("redeliver:", resp.BatchItemFailures)
	resp, _ = handle(ctx, events.SQSEvent{Records: []events.SQSMessage{
		msg("m1", `{"event_id":"evt-1","cents":500}`), // redelivered after a visibility timeout
	}})
	fmt.Println("redeliver:", resp.BatchItemFailures)
	fmt.Println("ledger:", ledger)
	// Output:
	// redeliver: [{m3} {m4}]
	// redeliver: []
	// ledger: map[evt-1:500]
}

// An HTTP API route whose retries with the same Idempotency-Key get the
// first response back, marked as replayed.
func ExampleHTTPAPI() {
	runner, err := idem.New(memstore.New())
	if err != nil {
		panic(err)
	}
	orders := 0
	handle, err := idemlambda.HTTPAPI(runner, func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		orders++
		return events.APIGatewayV2HTTPResponse{
			StatusCode: 201,
			Headers:    map[string]string{"Content-Type": "application/json"},
			Body:       fmt.Sprintf(`{"order_id":"ord-%d"}`, orders),
		}, nil
	})
	if err != nil {
		panic(err)
	}
	req := func(key, body string) events.APIGatewayV2HTTPRequest {
		return events.APIGatewayV2HTTPRequest{
			RouteKey: "POST /orders", RawPath: "/orders", Body: body,
			Headers: map[string]string{"idempotency-key": key, "content-type": "application/json"},
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/orders"},
			},
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, r := range []events.APIGatewayV2HTTPRequest{
		req("8e03978e-40d5-43e8-bc93-6894a57f9324", `{"sku":"book"}`),
		req("8e03978e-40d5-43e8-bc93-6894a57f9324", `{"sku":"book"}`),
		req("8e03978e-40d5-43e8-bc93-6894a57f9324", `{"sku":"pen"}`),
		req("", `{"sku":"book"}`),
	} {
		resp, _ := handle(ctx, r)
		fmt.Println(resp.StatusCode, resp.Headers[idemlambda.HeaderReplayed], resp.Headers["Content-Type"])
	}
	fmt.Println("orders created:", orders)
	// Output:
	// 201  application/json
	// 201 true application/json
	// 422  application/problem+json
	// 400  application/problem+json
	// orders created: 1
}

// An ALB target group with multi-value headers: the handler answers in
// MultiValueHeaders, and a retry gets both cookies back, marked as replayed
// (by the hook's header too), with keys scoped by the user the ALB
// authenticated.
func ExampleALB() {
	runner, err := idem.New(memstore.New())
	if err != nil {
		panic(err)
	}
	logins := 0
	handle, err := idemlambda.ALB(runner, func(ctx context.Context, req events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		logins++
		return events.ALBTargetGroupResponse{
			StatusCode: 200, StatusDescription: "200 OK",
			MultiValueHeaders: map[string][]string{"set-cookie": {fmt.Sprintf("session=s%d", logins), "theme=dark"}},
		}, nil
	},
		idemlambda.WithIdentityHeader("x-amzn-oidc-identity"),
		idemlambda.WithResponseHook(func(ctx context.Context, r *events.ALBTargetGroupResponse, v idem.Verdict) {
			r.MultiValueHeaders["x-idem"] = []string{v.String()}
		}))
	if err != nil {
		panic(err)
	}
	req := events.ALBTargetGroupRequest{HTTPMethod: "POST", Path: "/login", MultiValueHeaders: map[string][]string{
		"idempotency-key":      {"2f6c1e0a-7d3b-4a5e-9c1f-0b8d2e4a6c10"},
		"x-amzn-oidc-identity": {"user-42"},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 2 {
		resp, _ := handle(ctx, req)
		h := resp.MultiValueHeaders
		fmt.Println(resp.StatusCode, h["set-cookie"], h[idemlambda.HeaderReplayed], h["x-idem"])
	}
	fmt.Println("logins:", logins)
	// Output:
	// 200 [session=s1 theme=dark] [] []
	// 200 [session=s1 theme=dark] [true] [replayed]
	// logins: 1
}

// A Step Functions task (or any direct invocation) made idempotent by a key
// function over the input.
func ExampleTyped() {
	runner, err := idem.New(memstore.New())
	if err != nil {
		panic(err)
	}
	type refund struct {
		PaymentID string `json:"payment_id"`
		Cents     int    `json:"cents"`
	}
	type receipt struct {
		RefundID string `json:"refund_id"`
	}
	refunds := 0
	handle, err := idemlambda.Typed(runner,
		func(in refund) (string, error) { return idemlambda.EventKey(in.PaymentID, "refund") },
		func(ctx context.Context, in refund) (receipt, error) {
			refunds++
			return receipt{RefundID: fmt.Sprintf("re_%d", refunds)}, nil
		})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, _ := handle(ctx, refund{PaymentID: "pay_42", Cents: 1500})
	b, _ := handle(ctx, refund{PaymentID: "pay_42", Cents: 1500}) // the state machine retried
	_, err = handle(ctx, refund{PaymentID: "pay_42", Cents: 9900})
	fmt.Println(a.RefundID, b.RefundID, refunds, errors.Is(err, core.ErrKeyReused))
	// Output:
	// re_1 re_1 1 true
}

// A Kinesis consumer that books one payment per PaymentCaptured event, keyed
// by the payment_id field of the record's data. A record that fails
// transiently stops its shard: its sequence number is the checkpoint Lambda
// retries from, and the records after it wait for it.
func ExampleKinesis() {
	runner, err := idem.New(memstore.New(), idem.WithRetry(1, 0, 0))
	if err != nil {
		panic(err)
	}
	booked := []string{}
	ledgerDown := true
	handle, err := idemlambda.Kinesis(runner, "book-payment", idemlambda.KinesisKeyFromDataField("payment_id"),
		func(ctx context.Context, rec events.KinesisEventRecord) ([]byte, error) {
			var ev struct {
				PaymentID string `json:"payment_id"`
			}
			if err := json.Unmarshal(rec.Kinesis.Data, &ev); err != nil {
				return nil, err // permanent: reported until the DLQ, replayed, never run again
			}
			if ev.PaymentID == "pay-3" && ledgerDown {
				return nil, core.MarkTransient(errors.New("ledger busy")) // the shard's checkpoint
			}
			booked = append(booked, ev.PaymentID) // records of a shard run one at a time
			return nil, nil
		})
	if err != nil {
		panic(err)
	}
	rec := func(seq, data string) events.KinesisEventRecord {
		return events.KinesisEventRecord{
			EventID: "shardId-000000000000:" + seq, EventSourceArn: "arn:aws:kinesis:eu-west-1:123456789012:stream/payments",
			Kinesis: events.KinesisRecord{SequenceNumber: seq, PartitionKey: "p", Data: []byte(data)},
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // Lambda sets the deadline
	defer cancel()

	batch := []events.KinesisEventRecord{
		rec("101", `{"payment_id":"pay-1"}`),
		rec("102", `{"payment_id":"pay-2"}`),
		rec("103", `{"payment_id":"pay-3"}`), // fails transiently
		rec("104", `{"payment_id":"pay-4"}`),
	}
	resp, _ := handle(ctx, events.KinesisEvent{Records: batch})
	fmt.Println("checkpoint:", resp.BatchItemFailures)
	ledgerDown = false
	resp, _ = handle(ctx, events.KinesisEvent{Records: batch}) // the whole batch again (a bisection or a retry)
	fmt.Println("checkpoint:", resp.BatchItemFailures)
	fmt.Println("booked:", booked)
	// Output:
	// checkpoint: [{103}]
	// checkpoint: []
	// booked: [pay-1 pay-2 pay-3 pay-4]
}

// A DynamoDB Streams consumer that sends one welcome mail per new customer,
// keyed by the item's keys: a record redelivered, or the same item seen
// again, replays instead of mailing twice.
func ExampleDynamoDBStream() {
	runner, err := idem.New(memstore.New())
	if err != nil {
		panic(err)
	}
	mails := 0
	handle, err := idemlambda.DynamoDBStream(runner, "welcome-mail", idemlambda.DynamoDBKeyFromItemKeys(),
		func(ctx context.Context, rec events.DynamoDBEventRecord) ([]byte, error) {
			if rec.EventName != "INSERT" {
				return nil, nil
			}
			mails++ // send the mail, with the call's stored key as the mail API's idempotency key
			return json.Marshal(map[string]string{"mailed": rec.Change.NewImage["email"].String()})
		})
	if err != nil {
		panic(err)
	}
	insert := func(eventID, seq, customer string) events.DynamoDBEventRecord {
		return events.DynamoDBEventRecord{
			EventID: eventID, EventName: "INSERT",
			EventSourceArn: "arn:aws:dynamodb:eu-west-1:123456789012:table/customers/stream/2030-01-01T00:00:00.000",
			Change: events.DynamoDBStreamRecord{
				SequenceNumber: seq,
				Keys:           map[string]events.DynamoDBAttributeValue{"customer_id": events.NewStringAttribute(customer)},
				NewImage: map[string]events.DynamoDBAttributeValue{
					"customer_id": events.NewStringAttribute(customer),
					"email":       events.NewStringAttribute(customer + "@example.com"),
				},
			},
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, batch := range [][]events.DynamoDBEventRecord{
		{insert("e1", "100", "c-1"), insert("e2", "200", "c-2")},
		{insert("e2", "200", "c-2"), insert("e3", "300", "c-3")}, // c-2 redelivered
	} {
		resp, _ := handle(ctx, events.DynamoDBEvent{Records: batch})
		fmt.Println("checkpoint:", resp.BatchItemFailures)
	}
	fmt.Println("mails sent:", mails)
	// Output:
	// checkpoint: []
	// checkpoint: []
	// mails sent: 3
}
