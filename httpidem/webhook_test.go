package httpidem_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/httpidem"
)

// ghHeaders are the headers of a GitHub webhook delivery (X-GitHub-Delivery
// is the delivery's id, kept on a redelivery).
func ghHeaders(guid string) []string {
	h := []string{
		"Content-Type", "application/json", "User-Agent", "GitHub-Hookshot/5d2c8a1", "X-GitHub-Event", "push",
		"X-GitHub-Hook-ID", "481516234", "X-GitHub-Hook-Installation-Target-ID", "90817263",
		"X-GitHub-Hook-Installation-Target-Type", "repository",
		"X-Hub-Signature-256", "sha256=9f2b1c0d3e4a5b6c7d8e9f0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e",
	}
	if guid != "" {
		h = append(h, "X-GitHub-Delivery", guid)
	}
	return h
}

const ghPush = `{"ref":"refs/heads/main","before":"6113728f27ae82c7b1a177c8d03f9e96e0adf246","after":"0000000000000000000000000000000000000000",` +
	`"repository":{"id":79929171,"full_name":"example/shop"},"pusher":{"name":"octo-dev","email":"octo-dev@example.com"},` +
	`"commits":[{"id":"6113728f27ae82c7b1a177c8d03f9e96e0adf246","message":"Fix checkout on Safari","timestamp":"2030-01-02T03:04:05Z"}]}`

// A GitHub webhook through the middleware, keyed by X-GitHub-Delivery.
func TestGitHubWebhook(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var runs counter
	url := e.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, "build %d of %d bytes", runs.inc("all"), len(b))
	}), httpidem.WithEndpoint("github"), httpidem.WithKeyHeader("X-GitHub-Delivery"))
	want := fmt.Sprintf("build 1 of %d bytes", len(ghPush))
	steps := []struct {
		name     string
		guid     string
		status   int
		body     string
		replayed bool
		problem  string
	}{
		{"delivery", "1f6e0a70-c9a1-11ef-9a8b-3d2c1b0a9f8e", 202, want, false, ""},
		{"redelivery", "1f6e0a70-c9a1-11ef-9a8b-3d2c1b0a9f8e", 202, want, true, ""},
		{"another delivery", "5c4b3a29-c9a2-11ef-8c7d-6e5f4a3b2c1d", 202, fmt.Sprintf("build 2 of %d bytes", len(ghPush)), false, ""},
		{"no X-GitHub-Delivery", "", 400, "", false, httpidem.ProblemMissingKeySource},
	}
	for i, s := range steps {
		checkStep(t, i, s.name, send(t, "POST", url+"/hooks/github", "", ghPush, ghHeaders(s.guid)...), s.status, s.body, s.replayed, s.problem)
	}
	// A repeated header is refused, as a repeated Idempotency-Key is.
	a := send(t, "POST", url+"/hooks/github", "", ghPush, append(ghHeaders("d-1"), "X-GitHub-Delivery", "d-2")...)
	if a.status != 400 || problemType(a) != httpidem.ProblemInvalidKeySource {
		t.Errorf("two X-GitHub-Delivery headers: %d %s", a.status, a.body)
	}
}

func stripeBody(id string, amount, pending int) string {
	return fmt.Sprintf(`{"id":%q,"object":"event","api_version":"2024-06-20","created":1893553445,`+
		`"data":{"object":{"id":"pi_3PxK2mLp4RtZ1a0B","object":"payment_intent","amount":%d,"currency":"eur","status":"succeeded"}},`+
		`"livemode":false,"pending_webhooks":%d,"request":{"id":"req_8HrT3kLm2PqW9x","idempotency_key":null},"type":"payment_intent.succeeded"}`, id, amount, pending)
}

// A Stripe event through the middleware, keyed by its id in the body: the
// handler gets the whole body; a retry whose pending_webhooks changed
// replays; a PUT (not a required method) without a key passes through.
func TestStripeWebhook(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var runs counter
	url := e.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "run %d, %d bytes", runs.inc("all"), len(b))
	}), httpidem.WithEndpoint("stripe"), httpidem.WithKeyBodyField("id"), httpidem.WithFingerprintSelection(core.IgnoreFields("pending_webhooks")))
	sig := func(n int) []string {
		return []string{"Content-Type", "application/json; charset=utf-8", "User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
			"Stripe-Signature", fmt.Sprintf("t=%d,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8b%d", 1893553445+n, n)}
	}
	first := stripeBody("evt_1PxK2mLp4RtZ1a0B", 2500, 2)
	steps := []struct {
		name, body string
		status     int
		want       string
		replayed   bool
		problem    string
	}{
		{"delivery", first, 200, fmt.Sprintf("run 1, %d bytes", len(first)), false, ""},
		{"retry, pending_webhooks changed", stripeBody("evt_1PxK2mLp4RtZ1a0B", 2500, 1), 200, fmt.Sprintf("run 1, %d bytes", len(first)), true, ""},
		{"another event", stripeBody("evt_1PxK9zYx8WvU7t6S", 900, 1), 200, fmt.Sprintf("run 2, %d bytes", len(first)-1), false, ""},
		{"no id", `{"object":"event"}`, 400, "", false, httpidem.ProblemMissingKeySource},
		{"the id reused with another amount", stripeBody("evt_1PxK2mLp4RtZ1a0B", 9999, 1), 422, "", false, httpidem.ProblemKeyReused},
	}
	for i, s := range steps {
		checkStep(t, i, s.name, send(t, "POST", url+"/webhooks/stripe", "", s.body, sig(i)...), s.status, s.want, s.replayed, s.problem)
	}
	if a := send(t, "PUT", url+"/webhooks/stripe", "", `{"object":"event"}`); a.status != 200 || a.body != fmt.Sprintf("run 3, %d bytes", len(`{"object":"event"}`)) {
		t.Errorf("PUT without an id: %d %q; want it passed through with its body", a.status, a.body)
	}
}

// checkStep compares the answer a to step i of a webhook test: a problem of
// type problem, or status, body and the replay marker.
func checkStep(t *testing.T, i int, name string, a answer, status int, body string, replayed bool, problem string) {
	t.Helper()
	if problem != "" {
		if a.status != status || problemType(a) != problem {
			t.Errorf("step %d (%s): %d %s; want %d %s", i, name, a.status, a.body, status, problem)
		}
		return
	}
	if a.status != status || a.body != body || (a.header.Get(httpidem.HeaderReplayed) == "true") != replayed {
		t.Errorf("step %d (%s): %d %q %v; want %d %q replayed %v", i, name, a.status, a.body, a.header, status, body, replayed)
	}
}
