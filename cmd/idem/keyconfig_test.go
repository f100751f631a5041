package main

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	idemlambda "github.com/idemgo/idem/lambda"
)

// The records of messages and requests keyed by envelopes, composite keys,
// headers and body fields, written by the wrappers as docs/lambda.md's recipes
// build them on a store with a key prefix, are found from the message or the
// request as the operator holds it, with the function's key configuration as a
// file (--key-config) or as flags.
func TestInspectConfiguredKeys(t *testing.T) {
	t.Parallel()
	const prefix = "shop#"
	f := newFixture(t, ddbstore.WithKeyPrefix(prefix))
	runner, err := idem.New(f.store)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	refuse := func(context.Context, events.SQSMessage) ([]byte, error) {
		return nil, core.MarkPermanent(errors.New("warehouse refused"))
	}

	// An SQS queue subscribed to an SNS topic without raw message delivery.
	sns, err := idemlambda.SQS(runner, "ship-order", idemlambda.KeyFromBodyField("order_id"), refuse,
		idemlambda.WithEnvelope(idemlambda.SNSEnvelope()))
	if err != nil {
		t.Fatal(err)
	}
	snsMsg := events.SQSMessage{MessageId: "m-sns", Body: `{"Type":"Notification","MessageId":"5f1e","TopicArn":"arn:aws:sns:us-east-1:000000000000:orders",` +
		`"Message":"{\"order_id\":\"ord_7\",\"total\":12}","Timestamp":"2026-12-03T10:00:00.000Z","Signature":"c2ln"}`}
	if resp, _ := sns(ctx, events.SQSEvent{Records: []events.SQSMessage{snsMsg}}); len(resp.BatchItemFailures) != 1 {
		t.Fatalf("SNS-wrapped message: %+v, want it reported", resp)
	}

	// An EventBridge rule that targets a queue, keyed by the detail-type and an id in
	// the detail.
	eb, err := idemlambda.SQS(runner, "print-label",
		idemlambda.KeyFromAll(idemlambda.KeyFromAttribute("detail-type"), idemlambda.KeyFromBodyField("order.id")), refuse,
		idemlambda.WithEnvelope(idemlambda.EventBridgeEnvelope()))
	if err != nil {
		t.Fatal(err)
	}
	ebMsg := events.SQSMessage{MessageId: "m-eb", Body: `{"version":"0","id":"0d3c","detail-type":"OrderPlaced","source":"shop.orders",` +
		`"account":"000000000000","time":"2026-12-03T10:00:00Z","region":"us-east-1","resources":[],"detail":{"order":{"id":"ord_8"}}}`}
	if resp, _ := eb(ctx, events.SQSEvent{Records: []events.SQSMessage{ebMsg}}); len(resp.BatchItemFailures) != 1 {
		t.Fatalf("EventBridge event: %+v, want it reported", resp)
	}

	// A GitHub webhook behind an HTTP API, keyed by its delivery header.
	created := func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 202, Body: `{"ok":true}`}, nil
	}
	gh, err := idemlambda.HTTPAPI(runner, created, idemlambda.WithKeyHeader("X-GitHub-Delivery"), idemlambda.WithEndpoint("github-hooks"))
	if err != nil {
		t.Fatal(err)
	}
	ghReq := events.APIGatewayV2HTTPRequest{RawPath: "/hooks/github", Body: `{"action":"opened","number":7}`,
		Headers:        map[string]string{"x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958", "x-github-event": "pull_request"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/hooks/github"}}}
	if resp, err := gh(ctx, ghReq); err != nil || resp.StatusCode != 202 {
		t.Fatalf("GitHub delivery: %+v, %v", resp, err)
	}

	// A Stripe webhook behind a function URL, keyed by the event's id in the body.
	paid := func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		return events.LambdaFunctionURLResponse{StatusCode: 200, Body: `{"received":true}`}, nil
	}
	stripe, err := idemlambda.FunctionURL(runner, paid, idemlambda.WithKeyBodyField("id"), idemlambda.WithEndpoint("payments"),
		idemlambda.WithFingerprintSelection(core.IgnoreFields("pending_webhooks")))
	if err != nil {
		t.Fatal(err)
	}
	stripeReq := events.LambdaFunctionURLRequest{RawPath: "/hooks/stripe",
		Body:           `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"invoice.paid","pending_webhooks":2,"data":{"object":{"id":"in_1"}}}`,
		Headers:        map[string]string{"stripe-signature": "t=1,v1=abc", "content-type": "application/json"},
		RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/hooks/stripe"}}}
	if resp, err := stripe(ctx, stripeReq); err != nil || resp.StatusCode != 200 {
		t.Fatalf("Stripe event: %+v, %v", resp, err)
	}

	file := func(v any) string {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return writeFile(t, "event.json", string(raw))
	}
	tests := []struct {
		name   string
		event  []string // the event flags
		config string   // the function's key configuration file
		flags  []string // the same as flags
		state  string
	}{
		{"SNS-wrapped SQS message", []string{"--sqs-event", file(events.SQSEvent{Records: []events.SQSMessage{snsMsg}})},
			`{"action":"ship-order","key":["body:order_id"],"envelopes":["sns"],"key_prefix":"shop#"}`,
			[]string{"--action", "ship-order", "--key-source", "body:order_id", "--envelope", "sns"}, stateFailedPermanent},
		{"EventBridge event", []string{"--sqs-event", file(events.SQSEvent{Records: []events.SQSMessage{ebMsg}})},
			`{"action":"print-label","key":["attribute:detail-type","body:order.id"],"envelopes":["eventbridge"],"key_prefix":"shop#"}`,
			[]string{"--action", "print-label", "--key-source", "attribute:detail-type", "--key-source", "body:order.id", "--envelope", "eventbridge"}, stateFailedPermanent},
		{"GitHub delivery", []string{"--http-event", file(ghReq), "--kind", "httpapi"},
			`{"endpoint":"github-hooks","key":["header:X-GitHub-Delivery"],"key_prefix":"shop#"}`,
			[]string{"--endpoint", "github-hooks", "--key-source", "header:X-GitHub-Delivery"}, stateSucceeded},
		{"Stripe event", []string{"--http-event", file(stripeReq), "--kind", "url"},
			`{"endpoint":"payments","key":["body:id"],"fingerprint_ignore":["pending_webhooks"],"key_prefix":"shop#"}`,
			[]string{"--endpoint", "payments", "--key-source", "body:id"}, stateSucceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			config := writeFile(t, "keys.json", tc.config)
			byFile := append(append([]string{"inspect", "--table", f.table, "--json"}, tc.event...), "--key-config", config)
			byFlags := append(append([]string{"inspect", "--table", f.table, "--json", "--key-prefix", prefix}, tc.event...), tc.flags...)
			var hashes []string
			for _, args := range [][]string{byFile, byFlags} {
				v := decodeJSON[inspectView](t, mustCmd(t, exitOK, time.Now(), nil, args...).stdout)
				if !v.Found || v.Record.State != tc.state || !core.IsDerivedKey(v.Key) {
					t.Errorf("%v: %+v, want a %s record and its key", args, v, tc.state)
				}
				hashes = append(hashes, v.KeyHash)
			}
			if hashes[0] != hashes[1] {
				t.Errorf("the file and the flags find key hashes %v", hashes)
			}
		})
	}
	// A wrapper given WithWebhook(webhook.Stripe(secret)) keys by the same body field: the
	// sender's name finds the record too.
	preset := decodeJSON[inspectView](t, mustCmd(t, exitOK, time.Now(), nil, "inspect", "--table", f.table, "--json", "--key-prefix", prefix,
		"--http-event", file(stripeReq), "--kind", "url", "--endpoint", "payments", "--webhook", "stripe").stdout)
	if !preset.Found || preset.Record.State != stateSucceeded {
		t.Errorf("--webhook stripe: %+v, want the Stripe event's record", preset)
	}
}
