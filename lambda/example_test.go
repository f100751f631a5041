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
				return nil, err // permanent: acknowledged and logged
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
		msg("m4", `{"cents":700}`),                    // no event_id: permanent, acknowledged
	}})
	fmt.Println("redeliver:", resp.BatchItemFailures)
	resp, _ = handle(ctx, events.SQSEvent{Records: []events.SQSMessage{
		msg("m1", `{"event_id":"evt-1","cents":500}`), // redelivered after a visibility timeout
	}})
	fmt.Println("redeliver:", resp.BatchItemFailures)
	fmt.Println("ledger:", ledger)
	// Output:
	// redeliver: [{m3}]
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
