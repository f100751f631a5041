package httpidem_test

import (
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/httpidem"
	"github.com/idemgo/idem/internal/webhooktest"
)

// Deliveries are signed with each sender's published algorithm, computed
// apart from package webhook (webhooktest).
var (
	stripeSignature = webhooktest.StripeSignature
	githubSignature = webhooktest.GitHubSignature
)

const (
	stripeSecret = "whsec_9f8e7d6c5b4a39281706f5e4d3c2b1a0"
	githubSecret = "gh-hook-secret-2030-01"
)

// signedGH are the headers of a GitHub delivery of body, signed with
// secret.
func signedGH(guid, body, secret string) []string {
	h := ghHeaders(guid)
	for i := 0; i+1 < len(h); i += 2 {
		if h[i] == "X-Hub-Signature-256" {
			h[i+1] = githubSignature(secret, body)
		}
	}
	return h
}

// One Stripe event reaches two endpoints of one service on one store: each
// runs it once, and replays its own answer to Stripe's retry.
func TestWebhookOneEventTwoEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, idem.WithRetention(72*time.Hour))
	var runs counter
	urls := map[string]string{}
	for _, name := range []string{"fulfilment", "ledger"} {
		urls[name] = e.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s %d", name, runs.inc(name))
		}), stripeRecipe(name, stripeSecret)...)
	}
	event := stripeBody("evt_1PxK2mLp4RtZ1a0B", 2500, 2)
	for round, replayed := range []bool{false, true} {
		for name, url := range urls {
			a := send(t, "POST", url+"/webhooks/stripe", "", event, "Content-Type", "application/json",
				"Stripe-Signature", stripeSignature(e.clock.Now().Unix(), event, stripeSecret))
			checkStep(t, round, name, a, 200, name+" 1", replayed, "")
		}
	}
	if runs.get("fulfilment") != 1 || runs.get("ledger") != 1 {
		t.Errorf("runs: fulfilment %d, ledger %d; want each endpoint's handler once", runs.get("fulfilment"), runs.get("ledger"))
	}
}

// An answer refusing the request for its credentials (the handler's own
// signature check, with a mis-set secret) is not recorded: after the fix,
// the sender's redelivery runs.
func TestWebhookRefusedDeliveryNotStored(t *testing.T) {
	t.Parallel()
	for _, status := range []int{401, 403} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			e := newEnv(t, nil)
			configured := "a-mis-set-secret"
			var runs counter
			url := e.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.inc("all")
				b, _ := io.ReadAll(r.Body)
				if !hmac.Equal([]byte(r.Header.Get("X-Hub-Signature-256")), []byte(githubSignature(configured, string(b)))) {
					http.Error(w, "bad signature", status)
					return
				}
				w.WriteHeader(http.StatusAccepted)
			}), keyHeaderRecipe("github", "X-GitHub-Delivery")...)
			headers := signedGH("1f6e0a70-c9a1-11ef-9a8b-3d2c1b0a9f8e", ghPush, githubSecret)
			if a := send(t, "POST", url+"/hooks/github", "", ghPush, headers...); a.status != status {
				t.Fatalf("delivery with the secret mis-set: %d %s, want %d", a.status, a.body, status)
			}
			configured = githubSecret
			a := send(t, "POST", url+"/hooks/github", "", ghPush, headers...)
			if a.status != 202 || a.header.Get(httpidem.HeaderReplayed) == "true" || runs.get("all") != 2 {
				t.Errorf("redelivery after the fix: %d %s %v, %d runs; want the handler run, 202, not a replay of the %d", a.status, a.body, a.header, runs.get("all"), status)
			}
		})
	}
}

// A delivery id reused with another body is refused 422 with a problem
// that names the header the key came from.
func TestWebhookProblemNamesTheKeySource(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	url := e.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) }),
		keyHeaderRecipe("github", "X-GitHub-Delivery")...)
	if a := send(t, "POST", url+"/hooks/github", "", ghPush, ghHeaders("d-0042")...); a.status != 202 {
		t.Fatalf("first delivery: %d %s", a.status, a.body)
	}
	a := send(t, "POST", url+"/hooks/github", "", strings.Replace(ghPush, "Safari", "Firefox", 1), ghHeaders("d-0042")...)
	var p httpidem.Problem
	if err := json.Unmarshal([]byte(a.body), &p); err != nil || a.status != 422 || problemType(a) != httpidem.ProblemKeyReused {
		t.Fatalf("the id with another body: %d %s, want 422 %s", a.status, a.body, httpidem.ProblemKeyReused)
	}
	if text := p.Title + " " + p.Detail; !strings.Contains(text, "X-GitHub-Delivery") || strings.Contains(text, "Idempotency-Key") {
		t.Errorf("problem %q / %q: want it to name X-GitHub-Delivery, the source of the key, and not Idempotency-Key", p.Title, p.Detail)
	}
}

// The GitHub recipe either refuses a runner that forgets a delivery before
// GitHub stops redelivering it (3 days), or replays a redelivery two days
// later; over a runner that keeps its records 3 days, it replays.
func TestWebhookLateRedeliveryWithinSendersWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil) // idem.DefaultRetention: 24 hours
	if _, err := httpidem.Middleware(e.runner, githubRecipe("builds", githubSecret)...); err != nil {
		if !strings.Contains(err.Error(), "WithRetention") {
			t.Errorf("the recipe over a 24-hour runner: %v; want a refusal that names idem.WithRetention", err)
		}
		e = newEnv(t, nil, idem.WithRetention(72*time.Hour)) // as the refusal says
	}
	var runs counter
	url := e.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, runs.inc("all")) }), githubRecipe("builds", githubSecret)...)
	h := signedGH("5c4b3a29-c9a2-11ef-8c7d-6e5f4a3b2c1d", ghPush, githubSecret)
	send(t, "POST", url+"/hooks/github", "", ghPush, h...)
	e.clock.Advance(48 * time.Hour)
	if a := send(t, "POST", url+"/hooks/github", "", ghPush, h...); a.header.Get(httpidem.HeaderReplayed) != "true" || runs.get("all") != 1 {
		t.Errorf("redelivery 48h later: %d %s, %d runs; want the first answer replayed", a.status, a.body, runs.get("all"))
	}
}
