package webhook_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/webhook"
)

// TestSendersTable: the senders table of docs/webhooks.md says of each
// preset what the code does: its signature header, its duplicate id, the
// body field it leaves out of the fingerprint, its window.
func TestSendersTable(t *testing.T) {
	b, err := os.ReadFile("../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	presets := map[string]struct {
		s         webhook.Sender
		signature string
	}{
		"webhook.GitHub":  {webhook.GitHub("s"), webhook.HeaderGitHubSignature},
		"webhook.Stripe":  {webhook.Stripe("s"), webhook.HeaderStripeSignature},
		"webhook.Shopify": {webhook.Shopify("s"), webhook.HeaderShopifyHMAC},
	}
	row := regexp.MustCompile("(?m)^\\| `(webhook\\.[A-Za-z]+)` \\| (.+) \\| (header|body field) `([^`]+)` \\| (.+) \\| ([0-9a-z]+) \\|$")
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		p, ok := presets[m[1]]
		if !ok {
			t.Errorf("the table names %s, which is no preset", m[1])
			continue
		}
		seen[m[1]] = true
		if !strings.Contains(m[2], "`"+p.signature) {
			t.Errorf("%s: signature %q does not name %s", m[1], m[2], p.signature)
		}
		if key := map[string]string{"header": p.s.KeyHeader(), "body field": p.s.KeyField()}[m[3]]; key != m[4] {
			t.Errorf("%s: the table's duplicate id is %s %s, the code's %q %q", m[1], m[3], m[4], p.s.KeyHeader(), p.s.KeyField())
		}
		field := strings.Trim(m[5], "`")
		if m[5] == "nothing" {
			field = "pending_webhooks"
		}
		a, _ := p.s.Selection().Fingerprint([]byte(`{"` + field + `":1}`))
		c, _ := p.s.Selection().Fingerprint([]byte(`{"` + field + `":2}`))
		if (a == c) != (m[5] != "nothing") {
			t.Errorf("%s: the table says %q changes between deliveries; the fingerprint ignores %s: %v", m[1], m[5], field, a == c)
		}
		if w, err := time.ParseDuration(m[6]); err != nil || w != p.s.Window() {
			t.Errorf("%s: window %s, the code's %v", m[1], m[6], p.s.Window())
		}
	}
	for name := range presets {
		if !seen[name] {
			t.Errorf("the table has no row for %s", name)
		}
	}
	if !strings.Contains(string(b), "v1=` hex HMAC-SHA256 of `<t>.<body>`; "+strconv.Itoa(int(webhook.StripeTolerance/time.Second))+" s tolerance") {
		t.Errorf("the table does not give Stripe's tolerance as %v", webhook.StripeTolerance)
	}
}
