package idemlambda_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/webhooktest"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/webhook"
)

// presetRig is a function URL with a sender preset over a counted store.
type presetRig struct {
	e      *env
	store  *webhooktest.CountedStore
	v      *verdictLog
	runs   counter
	handle func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error)
}

func newPresetRig(t *testing.T, sender webhook.Sender) *presetRig {
	t.Helper()
	g := &presetRig{store: webhooktest.NewCountedStore(), v: &verdictLog{}}
	g.e = &env{clock: newEnv(t).clock}
	r, err := idem.New(g.store, idem.WithClock(g.e.clock.Now), idem.WithRetention(72*time.Hour), idem.WithObserver(g.v))
	if err != nil {
		t.Fatal(err)
	}
	g.e.runner = r
	g.handle, err = idemlambda.FunctionURL(r, func(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		return events.LambdaFunctionURLResponse{StatusCode: 200, Body: fmt.Sprint(g.runs.inc("all"))}, nil
	}, idemlambda.WithClock(g.e.clock.Now), idemlambda.WithEndpoint("hooks"), idemlambda.WithWebhook(sender))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// urlRequest is a POST to a function URL with headers (name, value pairs)
// and body, base64-encoded if b64.
func urlRequest(body string, b64 bool, headers ...string) events.LambdaFunctionURLRequest {
	h := map[string]string{"content-type": "application/json"}
	for i := 0; i+1 < len(headers); i += 2 {
		h[strings.ToLower(headers[i])] = headers[i+1]
	}
	if b64 {
		body = base64.StdEncoding.EncodeToString([]byte(body))
	}
	return events.LambdaFunctionURLRequest{Version: "2.0", RawPath: "/hooks", Headers: h, Body: body, IsBase64Encoded: b64,
		RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/hooks"}}}
}

// presetStep is one delivery of a preset test and what it must get: the
// handler's answer (body), a replay of it, or 401 invalid-signature at no
// store call.
type presetStep struct {
	name     string
	req      func(g *presetRig) events.LambdaFunctionURLRequest
	advance  time.Duration // the clock moves this much before the delivery
	body     string        // "": 401 invalid-signature
	replayed bool
}

func runPresetSteps(t *testing.T, sender webhook.Sender, steps []presetStep) {
	t.Helper()
	g := newPresetRig(t, sender)
	for i, s := range steps {
		g.e.clock.Advance(s.advance)
		before := g.store.Calls()
		resp, err := g.handle(g.e.ctx(t, 10*time.Second), s.req(g))
		calls, verdicts := g.store.Calls()-before, g.v.take()
		if s.body != "" {
			if err != nil || resp.StatusCode != 200 || resp.Body != s.body || (resp.Headers[idemlambda.HeaderReplayed] == "true") != s.replayed {
				t.Errorf("step %d (%s): %d %s %v (%v); want 200 %s replayed %v", i, s.name, resp.StatusCode, resp.Body, resp.Headers, err, s.body, s.replayed)
			}
			continue
		}
		var p idemlambda.Problem
		_ = json.Unmarshal([]byte(resp.Body), &p)
		if err != nil || resp.StatusCode != 401 || p.Type != idemlambda.ProblemTypeBase+"invalid-signature" || calls != 0 || !equalVerdicts(verdicts, []idem.Verdict{idem.Unauthorized}) {
			t.Errorf("step %d (%s): %d %s (%v), %d store calls, verdicts %v; want 401 invalid-signature, no store call, [unauthorized]",
				i, s.name, resp.StatusCode, resp.Body, err, calls, verdicts)
		}
	}
}

// Each preset accepts its sender's valid signature (and a redelivery
// replays), refuses a tampered body, a missing header and a wrong secret
// (and, Stripe, a stale timestamp) with 401 before any store call, and
// accepts the new secret during a rotation.
func TestWebhookPresets(t *testing.T) {
	t.Parallel()
	const body = `{"id":"evt_1PxK2mLp4RtZ1a0B","object":"event","pending_webhooks":1,"type":"invoice.paid"}`
	t.Run("GitHub", func(t *testing.T) {
		t.Parallel()
		gh := func(guid, b, secret string, b64 bool) func(*presetRig) events.LambdaFunctionURLRequest {
			return func(*presetRig) events.LambdaFunctionURLRequest {
				return urlRequest(b, b64, "X-GitHub-Delivery", guid, "X-GitHub-Event", "push", "X-Hub-Signature-256", githubSignature(secret, b))
			}
		}
		runPresetSteps(t, webhook.GitHub("gh-new-secret", githubSecret), []presetStep{
			{"valid", gh("d-1", body, githubSecret, false), 0, "1", false},
			{"redelivered a day later", gh("d-1", body, githubSecret, false), 24 * time.Hour, "1", true},
			{"a base64 body", gh("d-2", body, githubSecret, true), 0, "2", false},
			{"rotation: the new secret", gh("d-3", body, "gh-new-secret", false), 0, "3", false},
			{"a tampered body", func(*presetRig) events.LambdaFunctionURLRequest {
				r := gh("d-4", body, githubSecret, false)(nil)
				r.Body = strings.Replace(r.Body, "invoice.paid", "invoice.voided", 1)
				return r
			}, 0, "", false},
			{"a missing header", func(*presetRig) events.LambdaFunctionURLRequest {
				return urlRequest(body, false, "X-GitHub-Delivery", "d-5")
			}, 0, "", false},
			{"a wrong secret", gh("d-6", body, "not-the-secret", false), 0, "", false},
			{"a wrong secret, a delivery id already run", gh("d-1", body, "not-the-secret", false), 0, "", false},
		})
	})
	t.Run("Stripe", func(t *testing.T) {
		t.Parallel()
		st := func(b string, secrets ...string) func(*presetRig) events.LambdaFunctionURLRequest {
			return func(g *presetRig) events.LambdaFunctionURLRequest {
				return urlRequest(b, false, "Stripe-Signature", stripeSignature(g.e.clock.Now().Unix(), b, secrets...))
			}
		}
		signedAt := func(at time.Time) func(*presetRig) events.LambdaFunctionURLRequest {
			return func(*presetRig) events.LambdaFunctionURLRequest {
				return urlRequest(body, false, "Stripe-Signature", stripeSignature(at.Unix(), body, stripeSecret))
			}
		}
		retry := strings.Replace(body, `"pending_webhooks":1`, `"pending_webhooks":0`, 1)
		runPresetSteps(t, webhook.Stripe(stripeSecret), []presetStep{
			{"valid", st(body, stripeSecret), 0, "1", false},
			{"Stripe's retry an hour later, pending_webhooks changed", st(retry, stripeSecret), time.Hour, "1", true},
			{"rotation: signed with the old and the new", st(strings.Replace(body, "evt_1", "evt_2", 1), "whsec_old", stripeSecret), 0, "2", false},
			{"stale: signed 301 s before the wrapper's clock", signedAt(t0.Add(time.Hour - 301*time.Second)), 0, "", false},
			{"a tampered body", func(g *presetRig) events.LambdaFunctionURLRequest {
				r := st(body, stripeSecret)(g)
				r.Body = strings.Replace(r.Body, "evt_1", "evt_9", 1)
				return r
			}, 0, "", false},
			{"a missing header", func(*presetRig) events.LambdaFunctionURLRequest { return urlRequest(body, false) }, 0, "", false},
			{"a wrong secret", st(body, "whsec_other"), 0, "", false},
		})
	})
	t.Run("Shopify", func(t *testing.T) {
		t.Parallel()
		sh := func(event, secret string) func(*presetRig) events.LambdaFunctionURLRequest {
			return func(*presetRig) events.LambdaFunctionURLRequest {
				return urlRequest(body, false, "X-Shopify-Event-Id", event, "X-Shopify-Webhook-Id", "w-"+event, "X-Shopify-Hmac-Sha256", shopifySignature(secret, body))
			}
		}
		runPresetSteps(t, webhook.Shopify(shopifySecret, "shpss_next"), []presetStep{
			{"valid", sh("e-1", shopifySecret), 0, "1", false},
			{"retried", sh("e-1", shopifySecret), 3 * time.Hour, "1", true},
			{"rotation: the next secret", sh("e-2", "shpss_next"), 0, "2", false},
			{"a tampered body", func(*presetRig) events.LambdaFunctionURLRequest {
				r := sh("e-3", shopifySecret)(nil)
				r.Body += " "
				return r
			}, 0, "", false},
			{"a missing header", func(*presetRig) events.LambdaFunctionURLRequest {
				return urlRequest(body, false, "X-Shopify-Event-Id", "e-4")
			}, 0, "", false},
			{"a wrong secret", sh("e-5", "shpss_other"), 0, "", false},
		})
	})
	t.Run("HMAC", func(t *testing.T) {
		t.Parallel()
		acme := webhook.HMAC(webhook.HMACSpec{Name: "Acme", SignatureHeader: "X-Acme-Signature", Prefix: "sha256=", KeyField: "id", Window: time.Hour}, "acme-key")
		ac := func(b, secret string) func(*presetRig) events.LambdaFunctionURLRequest {
			return func(*presetRig) events.LambdaFunctionURLRequest {
				return urlRequest(b, false, "X-Acme-Signature", githubSignature(secret, b))
			}
		}
		runPresetSteps(t, acme, []presetStep{
			{"valid", ac(body, "acme-key"), 0, "1", false},
			{"redelivered", ac(body, "acme-key"), time.Minute, "1", true},
			{"a wrong secret", ac(body, "other"), 0, "", false},
		})
	})
}

// What a wrapper with a sender refuses to be built with, and says why.
func TestWithWebhookConfigurations(t *testing.T) {
	t.Parallel()
	e72 := newEnv(t, idem.WithRetention(72*time.Hour))
	h := func(ctx context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 200}, nil
	}
	for _, tc := range []struct {
		name   string
		runner *idem.Runner
		opts   []idemlambda.HTTPOption
		want   string // "" for none
	}{
		{"a preset on its endpoint", e72.runner, []idemlambda.HTTPOption{idemlambda.WithEndpoint("gh"), idemlambda.WithWebhook(webhook.GitHub("s"))}, ""},
		{"no endpoint", e72.runner, []idemlambda.HTTPOption{idemlambda.WithWebhook(webhook.GitHub("s"))}, "WithEndpoint"},
		{"a key header beside", e72.runner, []idemlambda.HTTPOption{idemlambda.WithEndpoint("gh"), idemlambda.WithWebhook(webhook.GitHub("s")), idemlambda.WithKeyHeader("X-Other")}, "without WithKeyHeader"},
		{"no secret", e72.runner, []idemlambda.HTTPOption{idemlambda.WithEndpoint("gh"), idemlambda.WithWebhook(webhook.GitHub())}, "at least one secret"},
		{"an empty secret", e72.runner, []idemlambda.HTTPOption{idemlambda.WithEndpoint("gh"), idemlambda.WithWebhook(webhook.Stripe(""))}, "empty secret"},
		{"a 24-hour runner", newEnv(t).runner, []idemlambda.HTTPOption{idemlambda.WithEndpoint("gh"), idemlambda.WithWebhook(webhook.GitHub("s"))}, "idem.WithRetention(72*time.Hour)"},
		{"a 24-hour runner, the window lowered knowingly", newEnv(t).runner, []idemlambda.HTTPOption{idemlambda.WithEndpoint("gh"), idemlambda.WithWebhook(webhook.GitHub("s").WithWindow(24 * time.Hour))}, ""},
		{"Shopify on a 24-hour runner", newEnv(t).runner, []idemlambda.HTTPOption{idemlambda.WithEndpoint("shop"), idemlambda.WithWebhook(webhook.Shopify("s"))}, ""},
		{"an endpoint for Idempotency-Key", e72.runner, []idemlambda.HTTPOption{idemlambda.WithEndpoint("orders")}, "not the Idempotency-Key header"},
		{"an empty endpoint", e72.runner, []idemlambda.HTTPOption{idemlambda.WithEndpoint(""), idemlambda.WithKeyHeader("X-Delivery")}, "empty endpoint"},
		{"a key body field without an endpoint", e72.runner, []idemlambda.HTTPOption{idemlambda.WithKeyBodyField("id")}, "WithEndpoint"},
	} {
		_, err := idemlambda.HTTPAPI(tc.runner, h, tc.opts...)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %q", tc.name, err, tc.want)
		}
	}
}

// WithFingerprintSelection given beside a sender replaces the sender's: a
// Stripe retry whose pending_webhooks changed is then another request.
func TestWithWebhookExplicitSelectionWins(t *testing.T) {
	t.Parallel()
	e := newEnv(t, idem.WithRetention(72*time.Hour))
	handle, err := idemlambda.FunctionURL(e.runner, func(ctx context.Context, r events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		return events.LambdaFunctionURLResponse{StatusCode: 200}, nil
	}, idemlambda.WithFingerprintSelection(core.Selection{}), idemlambda.WithClock(e.clock.Now), idemlambda.WithEndpoint("s"), idemlambda.WithWebhook(webhook.Stripe(stripeSecret)))
	if err != nil {
		t.Fatal(err)
	}
	for i, pending := range []int{2, 1} {
		b := stripeEvent("evt_3PxK", "pi_3PxK", 100, pending)
		resp, _ := handle(e.ctx(t, 10*time.Second), signedStripe(e.clock.Now(), "/s", b, stripeSecret))
		if want := []int{200, 422}[i]; resp.StatusCode != want {
			t.Errorf("delivery %d: %d %s, want %d", i, resp.StatusCode, resp.Body, want)
		}
	}
}
