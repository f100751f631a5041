package httpidem_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/httpidem"
	"github.com/idemgo/idem/internal/webhooktest"
	"github.com/idemgo/idem/webhook"
)

// take returns the verdicts observed since the last take.
func (o *observed) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	got := o.obs
	o.obs = nil
	return got
}

// The GitHub and Stripe presets through the middleware: a valid delivery
// runs and its redelivery replays; a tampered body, a missing header, a
// wrong secret, a stale Stripe timestamp and an unsigned PUT are 401
// invalid-signature before any store call, under the verdict unauthorized;
// a rotated secret is accepted.
func TestWebhookPresets(t *testing.T) {
	t.Parallel()
	st := webhooktest.NewCountedStore()
	v := &observed{}
	e := newEnv(t, st, idem.WithRetention(72*time.Hour), idem.WithObserver(v))
	var runs counter
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, runs.inc("all")) })
	gh := e.serve(t, h, githubRecipe("github", "gh-next-secret", githubSecret)...)
	stripe := e.serve(t, h, stripeRecipe("stripe", stripeSecret)...)
	body := stripeBody("evt_1PxK2mLp4RtZ1a0B", 2500, 1)
	for i, s := range []struct {
		name, method, url, body string
		headers                 []string
		want                    string // "": 401 invalid-signature
		replayed                bool
	}{
		{"GitHub, valid", "POST", gh, ghPush, signedGH("d-1", ghPush, githubSecret), "1", false},
		{"GitHub, redelivered", "POST", gh, ghPush, signedGH("d-1", ghPush, githubSecret), "1", true},
		{"GitHub, the next secret", "POST", gh, ghPush, signedGH("d-2", ghPush, "gh-next-secret"), "2", false},
		{"GitHub, a tampered body", "POST", gh, ghPush + " ", signedGH("d-3", ghPush, githubSecret), "", false},
		{"GitHub, a missing header", "POST", gh, ghPush, []string{"X-GitHub-Delivery", "d-4"}, "", false},
		{"GitHub, a wrong secret", "POST", gh, ghPush, signedGH("d-5", ghPush, "other"), "", false},
		{"GitHub, an unsigned PUT", "PUT", gh, ghPush, nil, "", false},
		{"Stripe, valid", "POST", stripe, body, []string{"Stripe-Signature", stripeSignature(e.clock.Now().Unix(), body, stripeSecret)}, "3", false},
		{"Stripe, stale", "POST", stripe, body, []string{"Stripe-Signature", stripeSignature(e.clock.Now().Unix()-301, body, stripeSecret)}, "", false},
	} {
		before := st.Calls()
		a := send(t, s.method, s.url+"/hooks", "", s.body, s.headers...)
		calls, got := st.Calls()-before, v.take()
		if s.want != "" {
			checkStep(t, i, s.name, a, 200, s.want, s.replayed, "")
			continue
		}
		if a.status != 401 || problemType(a) != "invalid-signature" || calls != 0 || len(got) != 1 || got[0] != idem.Unauthorized.String() {
			t.Errorf("step %d (%s): %d %s, %d store calls, verdicts %v; want 401 invalid-signature, no store call, [unauthorized]", i, s.name, a.status, a.body, calls, got)
		}
	}
}

// What Middleware refuses to be built with, and says why.
func TestWithWebhookConfigurations(t *testing.T) {
	t.Parallel()
	r72 := newEnv(t, nil, idem.WithRetention(72*time.Hour)).runner
	for _, tc := range []struct {
		name   string
		runner *idem.Runner
		opts   []httpidem.Option
		want   string
	}{
		{"a preset on its endpoint", r72, githubRecipe("gh", "s"), ""},
		{"no endpoint", r72, []httpidem.Option{httpidem.WithWebhook(webhook.GitHub("s"))}, "WithEndpoint"},
		{"a body field beside", r72, append(githubRecipe("gh", "s"), httpidem.WithKeyBodyField("id")), "without WithKeyHeader or WithKeyBodyField"},
		{"no secret", r72, githubRecipe("gh"), "at least one secret"},
		{"a 24-hour runner", newEnv(t, nil).runner, stripeRecipe("st", "s"), "idem.WithRetention(72*time.Hour)"},
		{"an endpoint for Idempotency-Key", r72, []httpidem.Option{httpidem.WithEndpoint("orders")}, "not the Idempotency-Key header"},
		{"a key header without an endpoint", r72, []httpidem.Option{httpidem.WithKeyHeader("X-Delivery")}, "WithEndpoint"},
	} {
		_, err := httpidem.Middleware(tc.runner, tc.opts...)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %q", tc.name, err, tc.want)
		}
	}
}
