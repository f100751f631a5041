package idemlambda_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/webhooktest"
	idemlambda "github.com/idemgo/idem/lambda"
)

// Deliveries are signed with each sender's published algorithm, computed
// apart from package webhook (webhooktest).
var (
	stripeSignature  = webhooktest.StripeSignature
	githubSignature  = webhooktest.GitHubSignature
	shopifySignature = webhooktest.ShopifySignature
)

const (
	stripeSecret  = "whsec_9f8e7d6c5b4a39281706f5e4d3c2b1a0"
	githubSecret  = "gh-hook-secret-2030-01"
	shopifySecret = "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"
)

// signedStripe is a Stripe delivery of body to a function URL at path,
// signed now with secrets.
func signedStripe(now time.Time, path, body string, secrets ...string) events.LambdaFunctionURLRequest {
	r := stripeDelivery(1, body)
	r.RawPath, r.RequestContext.HTTP.Path = path, path
	r.Headers["stripe-signature"] = stripeSignature(now.Unix(), body, secrets...)
	return r
}

// signedGitHub is a GitHub delivery on an HTTP API, signed with secret.
func signedGitHub(guid, body, secret string) events.APIGatewayV2HTTPRequest {
	r := githubDelivery(guid, "issues", body)
	r.Headers["x-hub-signature-256"] = githubSignature(secret, body)
	return r
}

// One Stripe event reaches two endpoints on one table (Stripe sends the
// same evt_ id to every endpoint subscribed to it): each runs it once, and
// each replays its own answer to Stripe's retry. Behind function URLs and
// behind two routes of one HTTP API.
func TestWebhookOneEventTwoEndpoints(t *testing.T) {
	t.Parallel()
	event := stripeEvent("evt_3PxK2mLp4RtZ1a0B1cD2eF3g", "pi_3PxK2mLp4RtZ1a0B", 2500, 2)
	t.Run("function URLs", func(t *testing.T) {
		e := newEnv(t, idem.WithRetention(72*time.Hour))
		var runs counter
		mk := func(name string) func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
			h, err := idemlambda.FunctionURL(e.runner, func(ctx context.Context, r events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
				return events.LambdaFunctionURLResponse{StatusCode: 200, Body: fmt.Sprintf(`{"%s":%d}`, name, runs.inc(name))}, nil
			}, stripeRecipe(e, name, stripeSecret)...)
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		endpoints := map[string]func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error){"fulfilment": mk("fulfilment"), "ledger": mk("ledger")}
		for round, replayed := range []bool{false, true} {
			for name, handle := range endpoints {
				resp, err := handle(e.ctx(t, 10*time.Second), signedStripe(e.clock.Now(), "/", event, stripeSecret))
				if err != nil || resp.StatusCode != 200 || resp.Body != fmt.Sprintf(`{"%s":1}`, name) || (resp.Headers[idemlambda.HeaderReplayed] == "true") != replayed {
					t.Errorf("delivery %d to %s: %d %s %v (%v); want its own first answer, replayed %v", round+1, name, resp.StatusCode, resp.Body, resp.Headers, err, replayed)
				}
			}
			e.clock.Advance(time.Minute)
		}
		if runs.get("fulfilment") != 1 || runs.get("ledger") != 1 {
			t.Errorf("runs: fulfilment %d, ledger %d; want each endpoint's handler once", runs.get("fulfilment"), runs.get("ledger"))
		}
	})
	t.Run("two routes of an HTTP API", func(t *testing.T) {
		e := newEnv(t, idem.WithRetention(72*time.Hour))
		var runs counter
		route := func(path string) events.APIGatewayV2HTTPRequest {
			r := v2Req("POST", path, "", event)
			r.Headers["stripe-signature"] = stripeSignature(e.clock.Now().Unix(), event, stripeSecret)
			return r
		}
		for _, path := range []string{"/stripe/fulfilment", "/stripe/ledger"} {
			handle, err := idemlambda.HTTPAPI(e.runner, func(ctx context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				runs.inc(path)
				return events.APIGatewayV2HTTPResponse{StatusCode: 200}, nil
			}, stripeRecipe(e, path, stripeSecret)...)
			if err != nil {
				t.Fatal(err)
			}
			if resp, err := handle(e.ctx(t, 10*time.Second), route(path)); err != nil || resp.StatusCode != 200 || runs.get(path) != 1 {
				t.Errorf("%s: %d %s (%v), %d runs; want the event run there once", path, resp.StatusCode, resp.Body, err, runs.get(path))
			}
		}
	})
}

// A delivery the handler refuses for its credentials (its own signature
// check, with a mis-set secret) is answered but not stored: once the secret
// is fixed, the sender's redelivery runs instead of replaying the 401.
func TestWebhookRefusedDeliveryNotStored(t *testing.T) {
	t.Parallel()
	for _, status := range []int{401, 403} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			e, v := observedEnv(t)
			configured := "a-mis-set-secret"
			var runs counter
			handle, err := idemlambda.HTTPAPI(e.runner, func(ctx context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				runs.inc("all")
				if !hmac.Equal([]byte(r.Headers["x-hub-signature-256"]), []byte(githubSignature(configured, r.Body))) {
					return events.APIGatewayV2HTTPResponse{StatusCode: status, Body: `{"error":"bad signature"}`}, nil
				}
				return events.APIGatewayV2HTTPResponse{StatusCode: 202, Body: `{"ticket":1}`}, nil
			}, keyHeaderRecipe("github", "X-GitHub-Delivery")...)
			if err != nil {
				t.Fatal(err)
			}
			d := signedGitHub("1f6e0a70-c9a1-11ef-9a8b-3d2c1b0a9f8e", githubIssueOpened, githubSecret)
			if resp, _ := handle(e.ctx(t, 10*time.Second), d); resp.StatusCode != status {
				t.Fatalf("delivery with the secret mis-set: %d %s, want %d", resp.StatusCode, resp.Body, status)
			}
			if got := v.take(); len(got) != 1 || got[0] != refusedVerdict {
				t.Errorf("verdicts %v, want [%s]", got, refusedVerdict)
			}
			configured = githubSecret // the operator fixes the secret, then clicks Redeliver
			resp, err := handle(e.ctx(t, 10*time.Second), d)
			if err != nil || resp.StatusCode != 202 || resp.Headers[idemlambda.HeaderReplayed] == "true" || runs.get("all") != 2 {
				t.Errorf("redelivery after the fix: %d %s %v (%v), %d runs; want the handler run, 202, not a replay of the %d",
					resp.StatusCode, resp.Body, resp.Headers, err, runs.get("all"), status)
			}
		})
	}
}

// GitHub lets a delivery be redelivered for 3 days: the GitHub recipe
// either refuses a runner that forgets sooner, or replays a redelivery two
// days later. With a runner that keeps its records 3 days, it replays.
func TestWebhookLateRedeliveryWithinSendersWindow(t *testing.T) {
	t.Parallel()
	var runs counter
	h := func(ctx context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 202, Body: fmt.Sprintf(`{"build":%d}`, runs.inc("all"))}, nil
	}
	deliverTwice := func(t *testing.T, e *env, handle func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), after time.Duration) {
		t.Helper()
		d := signedGitHub("5c4b3a29-c9a2-11ef-8c7d-6e5f4a3b2c1d", githubIssueOpened, githubSecret)
		first, _ := handle(e.ctx(t, 10*time.Second), d)
		e.clock.Advance(after)
		again, _ := handle(e.ctx(t, 10*time.Second), d)
		if first.StatusCode != 202 || again.StatusCode != 202 || again.Body != first.Body || again.Headers[idemlambda.HeaderReplayed] != "true" {
			t.Errorf("redelivery %v later: %d %s %v; want the first answer (%d %s) replayed", after, again.StatusCode, again.Body, again.Headers, first.StatusCode, first.Body)
		}
	}
	e := newEnv(t) // idem.DefaultRetention: 24 hours
	if handle, err := idemlambda.HTTPAPI(e.runner, h, githubRecipe(e, "builds", githubSecret)...); err == nil {
		deliverTwice(t, e, handle, 48*time.Hour)
	} else if !strings.Contains(err.Error(), "WithRetention") {
		t.Errorf("the recipe over a 24-hour runner: %v; want a refusal that names idem.WithRetention", err)
	}
	e = newEnv(t, idem.WithRetention(72*time.Hour))
	handle, err := idemlambda.HTTPAPI(e.runner, h, githubRecipe(e, "builds", githubSecret)...)
	if err != nil {
		t.Fatal(err)
	}
	deliverTwice(t, e, handle, 71*time.Hour)
}

// A webhook's delivery id reused with another body is refused 422 with a
// problem that names the header the key came from, not Idempotency-Key.
func TestWebhookProblemNamesTheKeySource(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	handle, err := idemlambda.HTTPAPI(e.runner, func(ctx context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 202}, nil
	}, keyHeaderRecipe("github", "X-GitHub-Delivery")...)
	if err != nil {
		t.Fatal(err)
	}
	guid := "a1b2c3d4-0000-11ef-8000-00000000002a"
	if resp, _ := handle(e.ctx(t, 10*time.Second), githubDelivery(guid, "issues", githubIssueOpened)); resp.StatusCode != 202 {
		t.Fatalf("first delivery: %d %s", resp.StatusCode, resp.Body)
	}
	resp, _ := handle(e.ctx(t, 10*time.Second), githubDelivery(guid, "issues", strings.Replace(githubIssueOpened, `"number":42`, `"number":43`, 1)))
	var p idemlambda.Problem
	if err := json.Unmarshal([]byte(resp.Body), &p); err != nil || resp.StatusCode != 422 || p.Type != idemlambda.ProblemTypeBase+idemlambda.ProblemKeyReused {
		t.Fatalf("the id with another body: %d %s, want 422 %s", resp.StatusCode, resp.Body, idemlambda.ProblemKeyReused)
	}
	if text := p.Title + " " + p.Detail; !strings.Contains(text, "X-GitHub-Delivery") || strings.Contains(text, "Idempotency-Key") {
		t.Errorf("problem %q / %q: want it to name X-GitHub-Delivery, the source of the key, and not Idempotency-Key", p.Title, p.Detail)
	}
}

// Shopify documents X-Shopify-Event-Id for detecting duplicates: two
// webhooks of one event (two subscriptions of a topic to one endpoint, each
// with its own X-Shopify-Webhook-Id) run once.
func TestShopifyDuplicateWebhooksOfOneEvent(t *testing.T) {
	t.Parallel()
	e, v := observedEnv(t) // Shopify retries for 4 hours: the default retention covers it
	var runs counter
	handle, err := idemlambda.RESTAPI(e.runner, func(ctx context.Context, r events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		return events.APIGatewayProxyResponse{StatusCode: 200, Body: fmt.Sprint(runs.inc("all"))}, nil
	}, shopifyRecipe(e, "orders-create", shopifySecret)...)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"id":820982911946154500,"email":"jon@example.com","total_price":"25.00"}`
	webhookOf := func(webhookID string) events.APIGatewayProxyRequest {
		h := map[string][]string{
			"Content-Type": {"application/json"}, "X-Shopify-Topic": {"orders/create"}, "X-Shopify-Hmac-Sha256": {shopifySignature(shopifySecret, body)},
			"X-Shopify-Shop-Domain": {"shop-a.myshopify.com"}, "X-Shopify-Api-Version": {"2025-01"}, "X-Shopify-Webhook-Id": {webhookID},
			"X-Shopify-Event-Id": {"98880550-7158-44d4-b7cd-2c97c8a091b5"}, "X-Shopify-Triggered-At": {"2030-01-02T03:04:05.123456789Z"},
		}
		return events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/hooks/shopify", Resource: "/hooks/shopify", MultiValueHeaders: h, Body: body}
	}
	for _, id := range []string{"b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "0c1d2e3f-4a5b-4c6d-8e7f-901a2b3c4d5e"} {
		if resp, err := handle(e.ctx(t, 10*time.Second), webhookOf(id)); err != nil || resp.StatusCode != 200 || resp.Body != "1" {
			t.Errorf("webhook %s: %d %s (%v); want the event's first answer", id, resp.StatusCode, resp.Body, err)
		}
	}
	if got := v.take(); runs.get("all") != 1 || !equalVerdicts(got, []idem.Verdict{idem.Executed, idem.Replayed}) {
		t.Errorf("%d runs, verdicts %v; want the event run once, its duplicate replayed", runs.get("all"), got)
	}
}
