package idemlambda_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/idemtest"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/webhook"
)

// A wrapper built from a key configuration stores each record under the key
// that the configuration computes from the message or the request as the
// operator holds it (MessageKey, RequestKey): for an SNS-wrapped SQS message,
// an EventBridge event keyed by its type and a detail field, a GitHub delivery
// and a Stripe event.
func TestKeyConfigFindsTheWrappersRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sqsCases := []struct {
		name, config string
		msg          events.SQSMessage
	}{
		{"SNS-wrapped SQS message", `{"action":"ship-order","key":["body:order_id"],"envelopes":["sns"]}`,
			events.SQSMessage{MessageId: "m-1", Body: `{"Type":"Notification","MessageId":"5f1e","TopicArn":"arn:aws:sns:us-east-1:000000000000:orders",` +
				`"Message":"{\"order_id\":\"ord_7\"}","Timestamp":"2030-01-02T03:04:05.000Z","Signature":"c2ln"}`}},
		{"EventBridge event", `{"action":"print-label","key":["attribute:detail-type","body:order.id"],"envelopes":["eventbridge"],"fingerprint_select":["order.id"]}`,
			events.SQSMessage{MessageId: "m-2", Body: `{"version":"0","id":"0d3c","detail-type":"OrderPlaced","source":"shop.orders","account":"000000000000",` +
				`"time":"2030-01-02T03:04:05Z","region":"us-east-1","resources":[],"detail":{"order":{"id":"ord_8"},"at":"x"}}`}},
	}
	for _, tc := range sqsCases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			kc := mustParse(t, tc.config)
			src, err := kc.Source()
			if err != nil {
				t.Fatal(err)
			}
			opts, err := kc.BatchOptions()
			if err != nil {
				t.Fatal(err)
			}
			h, err := idemlambda.SQS(e.runner, kc.Action, src, func(context.Context, events.SQSMessage) ([]byte, error) { return []byte(`"ok"`), nil }, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if resp, err := h(e.ctx(t, time.Minute), events.SQSEvent{Records: []events.SQSMessage{tc.msg}}); err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("handler = %+v, %v", resp, err)
			}
			key, err := kc.MessageKey(context.Background(), tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if rec, err := e.store.Get(ctx, key, e.clock.Now()); err != nil || rec.Status != core.StatusSucceeded {
				t.Errorf("the record of MessageKey = %+v, %v; want the wrapper's success", rec, err)
			}
		})
	}

	t.Run("GitHub delivery", func(t *testing.T) {
		e := newEnv(t)
		kc := mustParse(t, `{"endpoint":"github-hooks","key":["header:X-GitHub-Delivery"]}`)
		opts, err := kc.HTTPOptions()
		if err != nil {
			t.Fatal(err)
		}
		h, err := idemlambda.HTTPAPI(e.runner, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{StatusCode: 202}, nil
		}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		req := githubDelivery("72d3162e-cc78-11e3-81ab-4c9367dc0958", "issues", githubIssueOpened)
		if resp, err := h(e.ctx(t, time.Minute), req); err != nil || resp.StatusCode != 202 {
			t.Fatalf("handler = %+v, %v", resp, err)
		}
		checkRequestKey(t, e, kc, req)
	})
	t.Run("Stripe event", func(t *testing.T) {
		e := newEnv(t)
		kc := mustParse(t, `{"endpoint":"payments","key":["body:id"],"fingerprint_ignore":["pending_webhooks"]}`)
		opts, err := kc.HTTPOptions()
		if err != nil {
			t.Fatal(err)
		}
		h, err := idemlambda.FunctionURL(e.runner, func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
			return events.LambdaFunctionURLResponse{StatusCode: 200}, nil
		}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		req := events.LambdaFunctionURLRequest{RawPath: "/hooks/stripe", Body: `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","type":"invoice.paid","pending_webhooks":1}`,
			Headers:        map[string]string{"stripe-signature": "t=1,v1=abc"},
			RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/hooks/stripe"}}}
		if resp, err := h(e.ctx(t, time.Minute), req); err != nil || resp.StatusCode != 200 {
			t.Fatalf("handler = %+v, %v", resp, err)
		}
		checkRequestKey(t, e, kc, req)
		// The same delivery with another pending_webhooks count replays.
		again := req
		again.Body = strings.Replace(req.Body, `"pending_webhooks":1`, `"pending_webhooks":2`, 1)
		if resp, err := h(e.ctx(t, time.Minute), again); err != nil || resp.Headers["Idempotent-Replayed"] != "true" {
			t.Errorf("redelivery = %+v, %v; want a replay", resp, err)
		}
	})
}

// A webhook sender's preset (its delivery id, its fingerprint selection),
// an invocation's tenant id and a fair queue's message group: the key
// configuration computes the scoped keys the wrappers stored.
func TestKeyConfigScopes(t *testing.T) {
	t.Parallel()
	t.Run("GitHub preset", func(t *testing.T) {
		e := newEnv(t, idem.WithRetention(webhook.GitHubWindow))
		kc := mustParse(t, `{"endpoint":"github-hooks","webhook":"github"}`)
		opts, err := kc.HTTPOptions("s3cret")
		if err != nil {
			t.Fatal(err)
		}
		h, err := idemlambda.HTTPAPI(e.runner, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{StatusCode: 202}, nil
		}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		req := idemtest.GitHubDelivery("72d3162e-cc78-11e3-81ab-4c9367dc0958", "issues", []byte(githubIssueOpened), "s3cret").HTTPAPIRequest()
		if resp, err := h(e.ctx(t, time.Minute), req); err != nil || resp.StatusCode != 202 {
			t.Fatalf("handler = %+v, %v", resp, err)
		}
		checkRequestKey(t, e, kc, req)
	})
	t.Run("tenant and message group", func(t *testing.T) {
		e := newEnv(t)
		kc := mustParse(t, `{"action":"notify","key":["body:event_id"],"message_group_tenant":true}`)
		src, _ := kc.Source()
		opts, err := kc.BatchOptions()
		if err != nil {
			t.Fatal(err)
		}
		h, err := idemlambda.SQS(e.runner, kc.Action, src, func(context.Context, events.SQSMessage) ([]byte, error) { return nil, nil }, opts...)
		if err != nil {
			t.Fatal(err)
		}
		msg := events.SQSMessage{MessageId: "m-1", Body: `{"event_id":"e-1"}`, Attributes: map[string]string{"MessageGroupId": "tenant-a"}}
		ctx := lambdacontext.NewContext(e.ctx(t, time.Minute), &lambdacontext.LambdaContext{AwsRequestID: "r-1", TenantID: "blue"})
		if resp, err := h(ctx, events.SQSEvent{Records: []events.SQSMessage{msg}}); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("handler = %+v, %v", resp, err)
		}
		for _, tc := range []struct {
			ctx   context.Context
			found bool
		}{{ctx, true}, {context.Background(), false}} {
			key, err := kc.MessageKey(tc.ctx, msg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.store.Get(context.Background(), key, e.clock.Now()); (err == nil) != tc.found {
				t.Errorf("MessageKey with the tenant in its context %v: found %v, want %v", tc.ctx != context.Background(), err == nil, tc.found)
			}
		}
	})
}

func mustParse(t *testing.T, config string) idemlambda.KeyConfig {
	t.Helper()
	kc, err := idemlambda.ParseKeyConfig([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

func checkRequestKey[Req idemlambda.HTTPRequest](t *testing.T, e *env, kc idemlambda.KeyConfig, req Req) {
	t.Helper()
	event, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	key, err := idemlambda.RequestKey[Req](context.Background(), kc, event)
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := e.store.Get(context.Background(), key, e.clock.Now()); err != nil || rec.Status != core.StatusSucceeded {
		t.Errorf("the record of RequestKey = %+v, %v; want the wrapper's success", rec, err)
	}
}

// A key configuration that no wrapper takes, or that is given to the wrong
// kind of wrapper, is an error naming what is wrong.
func TestKeyConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, config string
		use          func(idemlambda.KeyConfig) error
		want         string
	}{
		{"unknown field", `{"action":"a","keys":["body:id"]}`, nil, `unknown field "keys"`},
		{"two values", `{"action":"a"} {}`, nil, "more than one JSON value"},
		{"bad source", `{"key":["json:id"]}`, nil, `key source "json:id"`},
		{"empty argument", `{"key":["body:"]}`, nil, `key source "body:"`},
		{"bad envelope", `{"envelopes":["sqs"]}`, nil, `envelope "sqs": want sns or eventbridge`},
		{"both fingerprints", `{"fingerprint_select":["a"],"fingerprint_ignore":["b"]}`, nil, "give one"},
		{"bad path", `{"fingerprint_select":["a..b"]}`, nil, "empty member name"},
		{"bad action", `{"action":"a\u0001b"}`, nil, "action"},
		{"bad identity header", `{"identity_header":"x y"}`, nil, "not a header name"},
		{"header for a message", `{"action":"a","key":["header:X-Id"]}`, func(k idemlambda.KeyConfig) error { _, err := k.Source(); return err }, "an HTTP wrapper's, not a message's"},
		{"no source for a message", `{"action":"a"}`, func(k idemlambda.KeyConfig) error { _, err := k.Source(); return err }, "no key source"},
		{"identity header for a message", `{"action":"a","key":["dedup"],"identity_header":"x-id"}`, func(k idemlambda.KeyConfig) error { _, err := k.BatchOptions(); return err }, "HTTP wrapper's"},
		{"endpoint for a message", `{"action":"a","key":["dedup"],"endpoint":"e"}`, func(k idemlambda.KeyConfig) error { _, err := k.BatchOptions(); return err }, "HTTP wrapper's"},
		{"message group for a request", `{"message_group_tenant":true}`, func(k idemlambda.KeyConfig) error { _, err := k.HTTPOptions(); return err }, "an HTTP wrapper takes none"},
		{"unknown webhook", `{"webhook":"gitlab"}`, nil, `webhook "gitlab": want github, stripe or shopify`},
		{"webhook and key", `{"webhook":"github","key":["header:X-Id"]}`, nil, "give webhook or key, not both"},
		{"webhook without a secret", `{"webhook":"github","endpoint":"e"}`, func(k idemlambda.KeyConfig) error { _, err := k.HTTPOptions(); return err }, "needs at least one secret"},
		{"attribute for a request", `{"key":["attribute:id"]}`, func(k idemlambda.KeyConfig) error { _, err := k.HTTPOptions(); return err }, "a message's, not an HTTP request's"},
		{"action for a request", `{"action":"a"}`, func(k idemlambda.KeyConfig) error { _, err := k.HTTPOptions(); return err }, "an HTTP wrapper takes none"},
		{"message key without action", `{"key":["dedup"]}`, func(k idemlambda.KeyConfig) error {
			_, err := k.MessageKey(context.Background(), events.SQSMessage{})
			return err
		}, "action"},
		{"request key without an endpoint", `{"key":["header:X-Id"]}`, func(k idemlambda.KeyConfig) error {
			_, err := idemlambda.RequestKey[events.APIGatewayV2HTTPRequest](context.Background(), k, []byte(`{}`))
			return err
		}, "endpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kc, err := idemlambda.ParseKeyConfig([]byte(tc.config))
			if tc.use != nil {
				if err != nil {
					t.Fatalf("ParseKeyConfig: %v", err)
				}
				err = tc.use(kc)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// A message outside its envelope, or without its key's field, has no key;
// a request without its source has none either: the errors say so as the
// wrappers' do.
func TestKeyConfigKeyErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kc := idemlambda.KeyConfig{Action: "ship", Key: []string{"body:order_id"}, Envelopes: []string{"sns"}}
	if _, err := kc.MessageKey(ctx, events.SQSMessage{Body: `{"order_id":"o-1"}`}); !errors.Is(err, idemlambda.ErrNotEnveloped) {
		t.Errorf("a raw message under an SNS envelope: %v, want ErrNotEnveloped", err)
	}
	kc.Envelopes = nil
	if _, err := kc.MessageKey(ctx, events.SQSMessage{Body: `{"id":"o-1"}`}); !errors.Is(err, idemlambda.ErrMissingKey) {
		t.Errorf("a message without the field: %v, want ErrMissingKey", err)
	}
	kc.MessageGroupTenant = true
	if _, err := kc.MessageKey(ctx, events.SQSMessage{Body: `{"order_id":"o-1"}`}); !errors.Is(err, idemlambda.ErrMissingKey) {
		t.Errorf("a message without its group under message_group_tenant: %v, want ErrMissingKey", err)
	}
	github := idemlambda.KeyConfig{Endpoint: "hooks", Key: []string{"header:X-GitHub-Delivery"}}
	requestKey := func(kc idemlambda.KeyConfig, req events.APIGatewayV2HTTPRequest) error {
		event, _ := json.Marshal(req)
		_, err := idemlambda.RequestKey[events.APIGatewayV2HTTPRequest](ctx, kc, event)
		return err
	}
	req := events.APIGatewayV2HTTPRequest{Headers: map[string]string{"content-type": "application/json"}, Body: `{"id":"x"}`}
	if err := requestKey(github, req); !errors.Is(err, idemlambda.ErrMissingKey) {
		t.Errorf("a request without the header: %v, want ErrMissingKey", err)
	}
	req.Headers["x-github-delivery"] = "a,b"
	if err := requestKey(github, req); !errors.Is(err, core.ErrInvalidKey) {
		t.Errorf("a request with two delivery ids: %v, want core.ErrInvalidKey", err)
	}
	req.Body = "not json"
	if err := requestKey(idemlambda.KeyConfig{Endpoint: "hooks", Key: []string{"body:id"}}, req); !errors.Is(err, idemlambda.ErrMissingKey) {
		t.Errorf("a body that is not JSON: %v, want ErrMissingKey (the wrapper's missing-key-source)", err)
	}
	if _, err := idemlambda.RequestKey[events.APIGatewayV2HTTPRequest](ctx, github, []byte(`[1]`)); err == nil || !strings.Contains(err.Error(), "is not a events.APIGatewayV2HTTPRequest") {
		t.Errorf("an event of another type: %v", err)
	}
}

// MessageFingerprint is the fingerprint the wrapper stores: a message
// published again with only an ignored field changed has the record's own;
// another payload under the same key has another.
func TestKeyConfigMessageFingerprint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	kc := mustParse(t, `{"action":"print-label","key":["body:order.id"],"envelopes":["eventbridge"],"fingerprint_ignore":["at"]}`)
	src, _ := kc.Source()
	opts, _ := kc.BatchOptions()
	h, err := idemlambda.SQS(e.runner, kc.Action, src, func(context.Context, events.SQSMessage) ([]byte, error) { return nil, nil }, opts...)
	if err != nil {
		t.Fatal(err)
	}
	event := func(at, total string) events.SQSMessage {
		return events.SQSMessage{MessageId: "m-" + at, Body: `{"version":"0","id":"` + at + `","detail-type":"OrderPlaced","source":"shop","account":"1",` +
			`"time":"` + at + `","region":"us-east-1","resources":[],"detail":{"order":{"id":"ord_9"},"total":` + total + `,"at":"` + at + `"}}`}
	}
	if _, err := h(e.ctx(t, time.Minute), events.SQSEvent{Records: []events.SQSMessage{event("t1", "12")}}); err != nil {
		t.Fatal(err)
	}
	key, _ := kc.MessageKey(context.Background(), event("t1", "12"))
	rec, err := e.store.Get(context.Background(), key, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		msg  events.SQSMessage
		same bool
	}{{event("t1", "12"), true}, {event("t2", "12"), true}, {event("t2", "13"), false}} {
		fp, err := kc.MessageFingerprint(tc.msg)
		if err != nil || (fp == rec.Fingerprint) != tc.same {
			t.Errorf("%s: fingerprint %s, %v; the record's %s, want same %v", tc.msg.Body, fp, err, rec.Fingerprint, tc.same)
		}
	}
}

// FuzzKeyConfig: no key configuration file, however malformed, makes parsing or
// using it panic; one that parses gives a source, options or an error, and a
// message's key, when it has one, is a derived key.
func FuzzKeyConfig(f *testing.F) {
	for _, seed := range []string{
		`{"action":"ship-order","key":["body:order_id"],"envelopes":["sns"]}`,
		`{"action":"print-label","key":["attribute:detail-type","body:order.id"],"envelopes":["eventbridge"],"fingerprint_select":["order.id"]}`,
		`{"endpoint":"hooks","key":["header:X-GitHub-Delivery"],"identity_header":"x-amzn-oidc-identity","key_prefix":"hooks#"}`,
		`{"endpoint":"payments","key":["body:id"],"fingerprint_ignore":["pending_webhooks"]}`,
		`{"endpoint":"shop","webhook":"shopify"}`, `{"action":"a","key":["body:id"],"message_group_tenant":true}`,
		`{"action":"a","key":["dedup","message-id"]}`, `{}`, `null`, `{"key":null}`, `{"key":[""]}`,
	} {
		f.Add([]byte(seed), `{"order_id":"o-1","order":{"id":7},"id":"x"}`)
	}
	f.Fuzz(func(t *testing.T, config []byte, body string) {
		kc, err := idemlambda.ParseKeyConfig(config)
		if err != nil {
			return
		}
		_, _ = kc.Source()
		_, _ = kc.BatchOptions()
		_, _ = kc.HTTPOptions("secret")
		msg := events.SQSMessage{MessageId: "m-1", Body: body, MessageAttributes: map[string]events.SQSMessageAttribute{"detail-type": {StringValue: &body, DataType: "String"}}}
		if key, err := kc.MessageKey(context.Background(), msg); err == nil && !core.IsDerivedKey(key) {
			t.Errorf("MessageKey = %q, not a derived key", key)
		}
		_, _ = kc.MessageFingerprint(msg)
		event, _ := json.Marshal(events.APIGatewayV2HTTPRequest{Body: body, Headers: map[string]string{"x-github-delivery": body, "idempotency-key": body}})
		if key, err := idemlambda.RequestKey[events.APIGatewayV2HTTPRequest](context.Background(), kc, event); err == nil && !core.IsDerivedKey(key) {
			t.Errorf("RequestKey = %q, not a derived key", key)
		}
	})
}
