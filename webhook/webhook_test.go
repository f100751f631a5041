package webhook_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/internal/webhooktest"
	"github.com/idemgo/idem/webhook"
)

// headers is a request's headers as net/http canonicalizes them.
func headers(pairs ...string) func(string) []string {
	h := http.Header{}
	for i := 0; i+1 < len(pairs); i += 2 {
		h.Add(pairs[i], pairs[i+1])
	}
	return h.Values
}

// GitHub publishes a test vector (docs.github.com, "Validating webhook
// deliveries", Testing the webhook payload validation): secret "It's a
// Secret to Everybody", payload "Hello, World!", X-Hub-Signature-256
// sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17.
const (
	ghVectorSecret    = "It's a Secret to Everybody"
	ghVectorPayload   = "Hello, World!"
	ghVectorSignature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
)

var now = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// verifyCase is one delivery a sender must accept (ok) or refuse.
type verifyCase struct {
	name   string
	sender webhook.Sender
	header func(string) []string
	body   string
	at     time.Time
	ok     bool
}

func runVerify(t *testing.T, cases []verifyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			at := tc.at
			if at.IsZero() {
				at = now
			}
			err := tc.sender.Verify(tc.header, []byte(tc.body), at)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("Verify = %v, want the delivery accepted", err)
			case !tc.ok && !errors.Is(err, webhook.ErrSignature):
				t.Fatalf("Verify = %v, want an error wrapping ErrSignature", err)
			}
		})
	}
}

func TestGitHub(t *testing.T) {
	t.Parallel()
	gh := webhook.GitHub(ghVectorSecret)
	sig := func(v string) func(string) []string { return headers("X-Hub-Signature-256", v) }
	upper := "sha256=" + strings.ToUpper(strings.TrimPrefix(ghVectorSignature, "sha256="))
	runVerify(t, []verifyCase{
		{"the published vector", gh, sig(ghVectorSignature), ghVectorPayload, time.Time{}, true},
		{"the header in lower case, as API Gateway passes it", gh, func(n string) []string {
			if strings.EqualFold(n, "x-hub-signature-256") {
				return []string{ghVectorSignature}
			}
			return nil
		}, ghVectorPayload, time.Time{}, true},
		{"upper-case hex", gh, sig(upper), ghVectorPayload, time.Time{}, true},
		{"a tampered body", gh, sig(ghVectorSignature), "Hello, World?", time.Time{}, false},
		{"a missing header", gh, headers("X-Hub-Signature", "sha1=0a"), ghVectorPayload, time.Time{}, false},
		{"a wrong secret", webhook.GitHub("It's a Secret to Nobody"), sig(ghVectorSignature), ghVectorPayload, time.Time{}, false},
		{"rotation: the new secret beside the old", webhook.GitHub("a-new-secret", ghVectorSecret), sig(ghVectorSignature), ghVectorPayload, time.Time{}, true},
		{"rotation: the old secret beside the new", webhook.GitHub(ghVectorSecret, "a-new-secret"), sig(ghVectorSignature), ghVectorPayload, time.Time{}, true},
		{"no sha256= prefix", gh, sig(strings.TrimPrefix(ghVectorSignature, "sha256=")), ghVectorPayload, time.Time{}, false},
		{"sha1 instead", gh, sig("sha1=" + strings.TrimPrefix(ghVectorSignature, "sha256=")), ghVectorPayload, time.Time{}, false},
		{"truncated", gh, sig(ghVectorSignature[:40]), ghVectorPayload, time.Time{}, false},
		{"two headers", gh, headers("X-Hub-Signature-256", ghVectorSignature, "X-Hub-Signature-256", ghVectorSignature), ghVectorPayload, time.Time{}, false},
		{"an empty body, signed", gh, sig(hmacHex(ghVectorSecret, "")), "", time.Time{}, true},
	})
}

// Signatures as each sender documents them, computed apart (webhooktest).
var (
	hmacHex    = webhooktest.GitHubSignature
	shopifyB64 = webhooktest.ShopifySignature
)

// stripeHeader is a Stripe-Signature at t over body with secrets, then
// extra items.
func stripeHeader(t time.Time, body string, secrets []string, extra ...string) string {
	h := webhooktest.StripeSignature(t.Unix(), body, secrets...)
	for _, x := range extra {
		h += "," + x
	}
	return h
}

// Stripe publishes no test vector; each signature here is computed with
// its documented algorithm.
func TestStripe(t *testing.T) {
	t.Parallel()
	const secret, old = "whsec_2f8c4a6e0b1d3f5a7c9e1b3d5f7a9c1e", "whsec_0a1b2c3d4e5f60718293a4b5c6d7e8f9"
	body := `{"id":"evt_1PxK2mLp4RtZ1a0B","object":"event","pending_webhooks":1,"type":"payment_intent.succeeded"}`
	st := webhook.Stripe(secret)
	sig := func(v string) func(string) []string { return headers("Stripe-Signature", v) }
	signed := sig(stripeHeader(now, body, []string{secret}))
	runVerify(t, []verifyCase{
		{"valid", st, signed, body, now, true},
		{"valid, 299 s later", st, signed, body, now.Add(299 * time.Second), true},
		{"valid, 300 s later", st, signed, body, now.Add(300 * time.Second), true},
		{"stale: 301 s later", st, signed, body, now.Add(301 * time.Second), false},
		{"from the future beyond the tolerance", st, signed, body, now.Add(-301 * time.Second), false},
		{"stale, within a tolerance of 10 minutes", st.WithTolerance(10 * time.Minute), signed, body, now.Add(6 * time.Minute), true},
		{"a tampered body", st, signed, strings.Replace(body, `"pending_webhooks":1`, `"pending_webhooks":2`, 1), now, false},
		{"a tampered timestamp", st, sig(strings.Replace(stripeHeader(now, body, []string{secret}), fmt.Sprint(now.Unix()), fmt.Sprint(now.Unix()+1), 1)), body, now, false},
		{"a missing header", st, headers("Content-Type", "application/json"), body, now, false},
		{"a wrong secret", webhook.Stripe(old), signed, body, now, false},
		{"rotation: Stripe signs with both, the endpoint knows the new", st, sig(stripeHeader(now, body, []string{old, secret})), body, now, true},
		{"rotation: signed with the old, the endpoint knows both", webhook.Stripe(secret, old), sig(stripeHeader(now, body, []string{old})), body, now, true},
		{"a v0 signature only (test mode's, ignored)", st, sig(strings.Replace(stripeHeader(now, body, []string{secret}), "v1=", "v0=", 1)), body, now, false},
		{"a v0 beside a valid v1", st, sig(stripeHeader(now, body, []string{secret}, "v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39")), body, now, true},
		{"no timestamp", st, sig(strings.TrimPrefix(stripeHeader(now, body, []string{secret}), fmt.Sprintf("t=%d,", now.Unix()))), body, now, false},
		{"two timestamps", st, sig(stripeHeader(now, body, []string{secret}, fmt.Sprintf("t=%d", now.Unix()))), body, now, false},
		{"no signature", st, sig(fmt.Sprintf("t=%d", now.Unix())), body, now, false},
		{"garbage", st, sig("t=abc,v1=zz"), body, now, false},
	})
}

// Shopify publishes no test vector; each signature here is computed with
// its documented algorithm.
func TestShopify(t *testing.T) {
	t.Parallel()
	const secret = "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"
	body := `{"id":820982911946154508,"email":"jon@example.com"}`
	sh := webhook.Shopify(secret)
	sig := func(v string) func(string) []string { return headers("X-Shopify-Hmac-Sha256", v) }
	runVerify(t, []verifyCase{
		{"valid", sh, sig(shopifyB64(secret, body)), body, time.Time{}, true},
		{"a tampered body", sh, sig(shopifyB64(secret, body)), strings.Replace(body, "jon", "jo", 1), time.Time{}, false},
		{"a missing header", sh, headers("X-Shopify-Topic", "orders/create"), body, time.Time{}, false},
		{"a wrong secret", webhook.Shopify("shpss_other"), sig(shopifyB64(secret, body)), body, time.Time{}, false},
		{"rotation", webhook.Shopify("shpss_new", secret), sig(shopifyB64(secret, body)), body, time.Time{}, true},
		{"hex instead of base64", sh, sig(strings.TrimPrefix(hmacHex(secret, body), "sha256=")), body, time.Time{}, false},
	})
}

func TestHMAC(t *testing.T) {
	t.Parallel()
	spec := webhook.HMACSpec{Name: "Acme", SignatureHeader: "X-Acme-Signature", Prefix: "sha256=", KeyHeader: "X-Acme-Delivery", Window: 24 * time.Hour}
	b64 := spec
	b64.Prefix, b64.Encoding = "", webhook.Base64
	runVerify(t, []verifyCase{
		{"hex with a prefix", webhook.HMAC(spec, "s3cret"), headers("X-Acme-Signature", hmacHex("s3cret", "{}")), "{}", time.Time{}, true},
		{"hex, tampered", webhook.HMAC(spec, "s3cret"), headers("X-Acme-Signature", hmacHex("s3cret", "{}")), "{ }", time.Time{}, false},
		{"base64", webhook.HMAC(b64, "s3cret"), headers("X-Acme-Signature", shopifyB64("s3cret", "{}")), "{}", time.Time{}, true},
		{"base64, missing", webhook.HMAC(b64, "s3cret"), headers(), "{}", time.Time{}, false},
		{"base64, a wrong secret", webhook.HMAC(b64, "other"), headers("X-Acme-Signature", shopifyB64("s3cret", "{}")), "{}", time.Time{}, false},
	})
}

// Each sender's contract: its key, its fingerprint, its window.
func TestContracts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s                   webhook.Sender
		keyHeader, keyField string
		window              time.Duration
		ignores             bool // pending_webhooks is left out of the fingerprint
	}{
		{webhook.GitHub("s"), "X-GitHub-Delivery", "", 72 * time.Hour, false},
		{webhook.Stripe("s"), "", "id", 72 * time.Hour, true},
		{webhook.Shopify("s"), "X-Shopify-Event-Id", "", 4 * time.Hour, false},
		{webhook.GitHub("s").WithWindow(7 * 24 * time.Hour), "X-GitHub-Delivery", "", 7 * 24 * time.Hour, false},
	} {
		a, _ := tc.s.Selection().Fingerprint([]byte(`{"id":"evt_1","pending_webhooks":2}`))
		b, _ := tc.s.Selection().Fingerprint([]byte(`{"id":"evt_1","pending_webhooks":1}`))
		if tc.s.Err() != nil || tc.s.KeyHeader() != tc.keyHeader || tc.s.KeyField() != tc.keyField || tc.s.Window() != tc.window || (a == b) != tc.ignores {
			t.Errorf("%s: key %q %q, window %v, pending_webhooks ignored %v, err %v", tc.s.Name(), tc.s.KeyHeader(), tc.s.KeyField(), tc.s.Window(), a == b, tc.s.Err())
		}
	}
}

// A sender that cannot be used says why.
func TestSenderErrors(t *testing.T) {
	t.Parallel()
	spec := webhook.HMACSpec{Name: "Acme", SignatureHeader: "X-Acme-Signature", KeyHeader: "X-Acme-Delivery", Window: time.Hour}
	bad := func(f func(*webhook.HMACSpec)) webhook.Sender {
		s := spec
		f(&s)
		return webhook.HMAC(s, "k")
	}
	for name, s := range map[string]webhook.Sender{
		"the zero Sender":        {},
		"no secret":              webhook.GitHub(),
		"an empty secret":        webhook.Stripe("whsec_a", ""),
		"a tolerance for GitHub": webhook.GitHub("s").WithTolerance(time.Minute),
		"a zero tolerance":       webhook.Stripe("s").WithTolerance(0),
		"a zero window":          webhook.Shopify("s").WithWindow(0),
		"HMAC without a name":    bad(func(s *webhook.HMACSpec) { s.Name = "" }),
		"HMAC with a bad header": bad(func(s *webhook.HMACSpec) { s.SignatureHeader = "X Sig" }),
		"HMAC with two keys":     bad(func(s *webhook.HMACSpec) { s.KeyField = "id" }),
		"HMAC without a key":     bad(func(s *webhook.HMACSpec) { s.KeyHeader = "" }),
		"HMAC without a window":  bad(func(s *webhook.HMACSpec) { s.Window = 0 }),
		"HMAC, a bad encoding":   bad(func(s *webhook.HMACSpec) { s.Encoding = 7 }),
		"HMAC, a bad ignore":     bad(func(s *webhook.HMACSpec) { s.Ignore = []string{"a..b"} }),
	} {
		if s.Err() == nil {
			t.Errorf("%s: Err() = nil", name)
		}
		if err := s.Verify(headers(), nil, now); err == nil || errors.Is(err, webhook.ErrSignature) {
			t.Errorf("%s: Verify = %v, want the sender's error", name, err)
		}
	}
	if err := webhook.HMAC(spec, "k").Err(); err != nil {
		t.Errorf("a good spec: %v", err)
	}
}

// CheckRetention refuses a runner that forgets before the sender stops
// delivering, naming the fix; WithWindow lowers the window knowingly.
func TestCheckRetention(t *testing.T) {
	t.Parallel()
	gh := webhook.GitHub("s")
	if err := gh.CheckRetention(24 * time.Hour); err == nil || !strings.Contains(err.Error(), "idem.WithRetention(72*time.Hour)") {
		t.Errorf("CheckRetention(24h) = %v, want a refusal naming idem.WithRetention(72*time.Hour)", err)
	}
	for _, ok := range []error{gh.CheckRetention(72 * time.Hour), gh.WithWindow(24 * time.Hour).CheckRetention(24 * time.Hour), webhook.Shopify("s").CheckRetention(24 * time.Hour)} {
		if ok != nil {
			t.Errorf("CheckRetention = %v, want nil", ok)
		}
	}
}
