package httprule_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/httprule"
)

// FuzzFingerprintUnchanged checks that the one-pass fingerprint of a
// request is exactly the fingerprint of its Payload, as the wrappers stored
// it before, and fails where Payload fails; and, under a selection, of its
// SelectedPayload (what a durable function started for the request
// receives).
func FuzzFingerprintUnchanged(f *testing.F) {
	for _, s := range []struct{ method, path, body string }{
		{"POST", "/orders", `{"b":1,"a":[true,null]}`},
		{"POST", "/orders", "plain text"},
		{"PUT", "/x/\xff", "\xff\x00binary"},
		{"POST", "/<&>", ""},
		{"PATCH", "/p", "  "},
		{"POST", "/p", `{"a":1,"a":2}`},
		{"POST", "/p", strings.Repeat("[", httprule.MaxBodyDepth+1)},
		{"POST", "/\u2028", `"\ud800"`},
		{"POST", "/stripe", `{"id":"evt_1","pending_webhooks":2,"a":{"b":1,"c":[2]}}`},
	} {
		f.Add(s.method, s.path, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		got, err := httprule.Fingerprint(method, path, body, core.Selection{})
		p, perr := httprule.Payload(method, path, body)
		if perr != nil {
			if err == nil || !errors.Is(err, core.ErrInvalidPayload) {
				t.Fatalf("Payload refused %q (%v), Fingerprint gave %q, %v", body, perr, got, err)
			}
			return
		}
		want, werr := core.Fingerprint(p)
		if werr != nil || err != nil || got != want {
			t.Fatalf("%q %q %q: Fingerprint %q, %v; Payload %s fingerprints %q, %v", method, path, body, got, err, p, want, werr)
		}
		sel := core.IgnoreFields("pending_webhooks", "a.b")
		got, err = httprule.Fingerprint(method, path, body, sel)
		p, perr = httprule.SelectedPayload(method, path, body, sel)
		if want, werr = core.Fingerprint(p); perr != nil || werr != nil || err != nil || got != want {
			t.Fatalf("%q %q %q under %v: Fingerprint %q, %v; SelectedPayload %s (%v) fingerprints %q, %v", method, path, body, sel, got, err, p, perr, want, werr)
		}
	})
}

func TestFingerprintSelection(t *testing.T) {
	t.Parallel()
	sel := core.IgnoreFields("pending_webhooks")
	a, err1 := httprule.Fingerprint("POST", "/stripe", []byte(`{"id":"evt_1","pending_webhooks":2}`), sel)
	b, err2 := httprule.Fingerprint("POST", "/stripe", []byte(`{"pending_webhooks":1,"id":"evt_1"}`), sel)
	c, err3 := httprule.Fingerprint("POST", "/other", []byte(`{"id":"evt_1","pending_webhooks":2}`), sel)
	if err1 != nil || err2 != nil || err3 != nil || a != b || a == c {
		t.Fatalf("= %s %s %s (%v %v %v): want the first two equal (an ignored field changed) and the third apart (another path)", a, b, c, err1, err2, err3)
	}
	if _, err := httprule.Fingerprint("POST", "/p", []byte(`{"x":1}`), core.SelectFields("id")); !errors.Is(err, core.ErrFieldAbsent) || !errors.Is(err, core.ErrInvalidPayload) {
		t.Fatalf("absent selected field: err = %v", err)
	}
}
