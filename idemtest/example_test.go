package idemtest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/httpidem"
	"github.com/idemgo/idem/idemtest"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/memstore"
	"github.com/idemgo/idem/webhook"
)

// An SQS batch that holds one message twice, then a redelivery of it: the
// handler runs once for its order.
func ExampleSQSMessage() {
	clock := idemtest.NewClock(time.Time{})
	runner, _ := idem.New(memstore.New(), idem.WithClock(clock.Now), idem.WithSleep(clock.Sleep))
	runs := 0
	handler, _ := idemlambda.SQS(runner, "send-receipt", idemlambda.KeyFromBodyField("order_id"),
		func(context.Context, events.SQSMessage) ([]byte, error) { runs++; return []byte(`"sent"`), nil })

	msg := idemtest.SQSMessage("m-1", `{"order_id":"o-7"}`)
	ctx, cancel := clock.Invocation(context.Background(), 30*time.Second)
	defer cancel()
	resp, _ := handler(ctx, idemtest.SQSEvent(msg, idemtest.SQSMessage("m-2", `{"order_id":"o-7"}`)))
	fmt.Println("failures:", len(resp.BatchItemFailures), "runs:", runs)
	resp, _ = handler(ctx, idemtest.SQSEvent(idemtest.Redelivered(msg, 2)))
	fmt.Println("failures:", len(resp.BatchItemFailures), "runs:", runs)
	// Output:
	// failures: 0 runs: 1
	// failures: 0 runs: 1
}

// A handler that fails transiently is retried by the runner within the
// invocation; the fake clock's Sleep lets the backoff pass at once.
func ExampleClock_Sleep() {
	clock := idemtest.NewClock(time.Time{})
	runner, _ := idem.New(memstore.New(), idem.WithClock(clock.Now), idem.WithSleep(clock.Sleep),
		idem.WithRetry(3, time.Second, 10*time.Second), idem.WithRand(func() float64 { return 0.5 }))
	calls := 0
	ctx, cancel := clock.Invocation(context.Background(), 30*time.Second)
	defer cancel()
	start := clock.Now()
	_, err := runner.Do(ctx, "evt:o-7:charge", []byte(`{}`), func(context.Context) ([]byte, error) {
		calls++
		if calls < 3 {
			return nil, core.MarkTransient(fmt.Errorf("payments: 503"))
		}
		return []byte(`"charged"`), nil
	})
	fmt.Println(err, calls, clock.Now().Sub(start) > 0)
	// Output: <nil> 3 true
}

// A GitHub delivery and its redelivery (same X-GitHub-Delivery) through an
// HTTP API with the GitHub preset: the signature is verified, and the
// second is the first's answer, replayed.
func ExampleGitHubDelivery() {
	runner, _ := idem.New(memstore.New(), idem.WithRetention(72*time.Hour))
	runs := 0
	handler, err := idemlambda.HTTPAPI(runner, func(_ context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs++
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusAccepted, Body: r.Headers["x-github-event"]}, nil
	}, idemlambda.WithWebhook(webhook.GitHub("s3cr3t")), idemlambda.WithEndpoint("github-issues"))
	if err != nil {
		fmt.Println(err)
		return
	}

	d := idemtest.GitHubDelivery("1f6e0a70-c9a1-11ef-9a8b-3d2c1b0a9f8e", "issues", []byte(`{"action":"opened"}`), "s3cr3t")
	fmt.Println(d.Header.Get("X-Hub-Signature-256"))
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, _ := handler(ctx, d.HTTPAPIRequest())
		cancel()
		fmt.Println(resp.StatusCode, resp.Body, resp.Headers[idemlambda.HeaderReplayed], runs)
	}
	// Output:
	// sha256=893b8b176c39b217756497563a1b9ba1507d371642b1edf4ee9f876b8fd74ecc
	// 202 issues  1
	// 202 issues true 1
}

// Stripe signs every attempt anew and counts its pending endpoints in the
// body: a retry of the same event, keyed by the body's id with
// pending_webhooks left out of the fingerprint (both the Stripe preset's
// doing), replays. The preset checks the signature's timestamp against the
// wrapper's clock.
func ExampleStripeDelivery() {
	clock := idemtest.NewClock(idemtest.SentAt)
	runner, _ := idem.New(memstore.New(), idem.WithClock(clock.Now), idem.WithRetention(72*time.Hour))
	runs := 0
	handler, err := idemlambda.FunctionURL(runner, func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		runs++
		return events.LambdaFunctionURLResponse{StatusCode: http.StatusOK}, nil
	}, idemlambda.WithWebhook(webhook.Stripe("whsec_test")), idemlambda.WithEndpoint("stripe-payments"), idemlambda.WithClock(clock.Now))
	if err != nil {
		fmt.Println(err)
		return
	}

	first := idemtest.StripeDelivery(idemtest.StripeEvent("evt_1", "payment_intent.succeeded", `{"id":"pi_1","amount":2500}`, 2), "whsec_test", idemtest.SentAt)
	retry := idemtest.StripeDelivery(idemtest.StripeEvent("evt_1", "payment_intent.succeeded", `{"id":"pi_1","amount":2500}`, 1), "whsec_test", idemtest.SentAt.Add(time.Hour))
	fmt.Println(first.Header.Get("Stripe-Signature") != retry.Header.Get("Stripe-Signature"))
	for i, d := range []idemtest.Delivery{first, retry} {
		clock.Set(idemtest.SentAt.Add(time.Duration(i) * time.Hour))
		ctx, cancel := clock.Invocation(context.Background(), 10*time.Second)
		resp, _ := handler(ctx, d.FunctionURLRequest())
		cancel()
		fmt.Println(resp.StatusCode, resp.Headers[idemlambda.HeaderReplayed], runs)
	}
	// Output:
	// true
	// 200  1
	// 200 true 1
}

// A Shopify webhook through net/http (httpidem) with the Shopify preset,
// keyed by the event's id (X-Shopify-Event-Id).
func ExampleShopifyDelivery() {
	runner, _ := idem.New(memstore.New())
	mw, err := httpidem.Middleware(runner, httpidem.WithWebhook(webhook.Shopify("shpss_test")), httpidem.WithEndpoint("shopify-orders"))
	if err != nil {
		fmt.Println(err)
		return
	}
	runs := 0
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { runs++; w.WriteHeader(http.StatusOK) }))

	d := idemtest.ShopifyDelivery("shop-7.myshopify.com", "orders/create", "98880550-7158-44d4-b7cd-2c97c8a091b5", []byte(`{"id":820982911946154500}`), "shpss_test")
	fmt.Println(d.Header.Get("X-Shopify-Hmac-Sha256"))
	for range 2 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, d.Request())
		fmt.Println(rec.Code, rec.Header().Get(httpidem.HeaderReplayed), runs)
	}
	// Output:
	// vRSdXjXJV7B05JijVC88t1r8qnGWjEthBj2mCZ02BfM=
	// 200  1
	// 200 true 1
}
