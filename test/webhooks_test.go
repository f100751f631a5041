package test

import (
	"fmt"
	"strings"
	"testing"
)

// TestWebhookRecipesCompile builds every recipe of docs/webhooks.md (each Go block that is a
// whole program) as it is printed; the page has one per sender for Lambda and for net/http,
// and the generic one.
func TestWebhookRecipesCompile(t *testing.T) {
	md, root := readFile(t, "docs/webhooks.md")
	built := 0
	for _, f := range fences(md) {
		if f.lang != "go" || !strings.HasPrefix(f.text, "package main\n") {
			continue
		}
		buildExample(t, root, f.text, fmt.Sprintf("docs/webhooks.md's recipe at line %d", f.line))
		built++
	}
	for _, heading := range []string{"GitHub on Lambda", "GitHub on net/http", "Stripe on Lambda", "Stripe on net/http",
		"Shopify on Lambda", "Shopify on net/http", "Any other sender: an HMAC of the body"} {
		_, section, _ := strings.Cut(md, "\n### "+heading+"\n")
		section, _, _ = strings.Cut(section, "\n#")
		if !strings.Contains(section, "```go\npackage main\n") {
			t.Errorf("docs/webhooks.md has no recipe %q (a heading, then a whole program)", heading)
		}
	}
	if built < 7 {
		t.Errorf("built %d recipes, want 7", built)
	}
}
