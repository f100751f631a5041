package httpidem_test

import (
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/idemgo/idem/httpidem"
	"github.com/idemgo/idem/internal/httprule"
)

// TestSecurityDocsCaller holds docs/security.md's row of httpidem's caller
// identity to the code: WithIdentity's value is the part "caller".
func TestSecurityDocsCaller(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	const row = "| httpidem | what `WithIdentity(func(*http.Request) string)` returns | `caller` |"
	if !strings.Contains(string(raw), row) {
		t.Fatalf("docs/security.md has no row %q", row)
	}
	e := newEnv(t, nil)
	var mu sync.Mutex
	var got string
	url := e.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got, _ = httpidem.StoredKey(r.Context())
		mu.Unlock()
	}), httpidem.WithIdentity(func(*http.Request) string { return "u-1" }))
	send(t, "POST", url, "k-1", `{}`)
	want, err := httprule.Key("k-1", []string{"caller=u-1"})
	mu.Lock()
	defer mu.Unlock()
	if err != nil || got != want {
		t.Errorf("stored key %s; want %s, the key of the part caller=u-1", got, want)
	}
}
