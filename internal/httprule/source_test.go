package httprule_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/httprule"
)

func parts(t testing.TB, spec ...string) []httprule.KeyPart {
	t.Helper()
	var ps []httprule.KeyPart
	for i := 0; i+1 < len(spec); i += 2 {
		var p httprule.KeyPart
		var err error
		if spec[i] == "header" {
			p, err = httprule.HeaderPart(spec[i+1])
		} else {
			p, err = httprule.FieldPart(spec[i+1])
		}
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

func TestFindKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		parts   []httprule.KeyPart
		headers http.Header
		body    string
		wantErr error
	}{
		{"default", nil, http.Header{"Idempotency-Key": {`"k-1"`}}, "", nil},
		{"default missing", nil, http.Header{"X-GitHub-Delivery": {"d-1"}}, "", httprule.ErrNoKey},
		{"default repeated", nil, http.Header{"Idempotency-Key": {"a", "b"}}, "", core.ErrInvalidKey},
		{"header", parts(t, "header", "X-GitHub-Delivery"), http.Header{"X-Github-Delivery": {"d-1"}}, "", nil},
		{"header missing", parts(t, "header", "X-GitHub-Delivery"), http.Header{"Idempotency-Key": {"k-1"}}, "", httprule.ErrNoKey},
		{"header repeated", parts(t, "header", "X-GitHub-Delivery"), http.Header{"X-Github-Delivery": {"d-1", "d-2"}}, "", core.ErrInvalidKey},
		{"header comma-joined", parts(t, "header", "X-GitHub-Delivery"), http.Header{"X-Github-Delivery": {"d-1,d-2"}}, "", core.ErrInvalidKey},
		{"header empty", parts(t, "header", "X-GitHub-Delivery"), http.Header{"X-Github-Delivery": {""}}, "", core.ErrInvalidKey},
		{"header with a space", parts(t, "header", "X-GitHub-Delivery"), http.Header{"X-Github-Delivery": {"d 1"}}, "", core.ErrInvalidKey},
		{"body field", parts(t, "field", "id"), nil, `{"id":"evt_1"}`, nil},
		{"nested body field, a number", parts(t, "field", "data.object.id"), nil, `{"data":{"object":{"id":12}}}`, nil},
		{"body not JSON", parts(t, "field", "id"), nil, `id=evt_1`, httprule.ErrNoKey},
		{"body field missing", parts(t, "field", "id"), nil, `{"type":"ping"}`, httprule.ErrNoKey},
		{"body field an object", parts(t, "field", "id"), nil, `{"id":{}}`, core.ErrInvalidKey},
		{"body field empty", parts(t, "field", "id"), nil, `{"id":""}`, core.ErrInvalidKey},
		{"body field with a control character", parts(t, "field", "id"), nil, `{"id":"a\u0001b"}`, core.ErrInvalidKey},
		{"composite", parts(t, "header", "X-Shopify-Shop-Domain", "header", "X-Shopify-Webhook-Id"), http.Header{"X-Shopify-Shop-Domain": {"a.myshopify.com"}, "X-Shopify-Webhook-Id": {"w-1"}}, "", nil},
		{"composite, one missing", parts(t, "header", "X-Shopify-Shop-Domain", "header", "X-Shopify-Webhook-Id"), http.Header{"X-Shopify-Webhook-Id": {"w-1"}}, "", httprule.ErrNoKey},
		{"Idempotency-Key in a composite keeps its rules", parts(t, "header", "Idempotency-Key", "field", "id"), http.Header{"Idempotency-Key": {`"a\"b"`}}, `{"id":1}`, core.ErrInvalidKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rk, err := httprule.FindKey(tc.parts, "hooks", nil, tc.headers, []byte(tc.body))
			var key string
			if err == nil {
				key, err = rk.Stored([]string{"sub=u-1"})
			}
			if tc.wantErr == nil {
				if err != nil || core.ValidateKey(key) != nil {
					t.Fatalf("= %q, %v; want a valid key", key, err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			a := httprule.KeyAnswer(tc.parts, err)
			if a.Status != http.StatusBadRequest {
				t.Errorf("KeyAnswer = %d, want 400", a.Status)
			}
		})
	}
}

// Keys from different sources never meet, whatever the values; the case of
// a header's name does not matter; the caller identity scopes them all,
// and the endpoint scopes every key but the Idempotency-Key header's.
func TestFindKeySpaces(t *testing.T) {
	t.Parallel()
	keyAt := func(endpoint string, ps []httprule.KeyPart, h http.Header, body string, identity ...string) string {
		t.Helper()
		rk, err := httprule.FindKey(ps, endpoint, nil, h, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		k, err := rk.Stored(identity)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	key := func(ps []httprule.KeyPart, h http.Header, body string, identity ...string) string {
		t.Helper()
		return keyAt("hooks", ps, h, body, identity...)
	}
	v := http.Header{"Idempotency-Key": {"abc-123"}, "X-Delivery": {"abc-123"}, "X-Other": {"abc-123"}}
	def := key(nil, v, "")
	explicit := key(parts(t, "header", "idempotency-key"), v, "")
	delivery := key(parts(t, "header", "X-Delivery"), v, "")
	lower := key(parts(t, "header", "x-delivery"), v, "")
	other := key(parts(t, "header", "X-Other"), v, "")
	field := key(parts(t, "field", "id"), v, `{"id":"abc-123"}`)
	scoped := key(parts(t, "header", "X-Delivery"), v, "", "sub=u-2")
	elsewhere := keyAt("other-hooks", parts(t, "header", "X-Delivery"), v, "")
	if keyAt("other-hooks", nil, v, "") != def {
		t.Error("the endpoint changes the Idempotency-Key header's key, which the IETF draft scopes by the caller alone")
	}
	if def != explicit {
		t.Error("WithKeyHeader(Idempotency-Key) alone is not the default key")
	}
	if delivery != lower {
		t.Error("the case of a header's name changes the key")
	}
	seen := map[string]string{}
	for name, k := range map[string]string{"default": def, "X-Delivery": delivery, "X-Other": other, "field": field, "scoped": scoped, "another endpoint": elsewhere} {
		if prev, ok := seen[k]; ok {
			t.Errorf("%s and %s give the same key", name, prev)
		}
		seen[k] = name
	}
	if a := httprule.KeyAnswer(parts(t, "header", "X-Delivery"), httprule.ErrNoKey); a.Status != 400 || string(a.Body) == "" {
		t.Errorf("KeyAnswer = %+v", a)
	}
}

// FuzzFindKey checks that no header value or body makes FindKey panic, and
// that it answers a valid key or an error it names.
func FuzzFindKey(f *testing.F) {
	for _, s := range []struct{ header, body string }{{"d-1", `{"id":"e"}`}, {"", `{"id":{}}`}, {"a,b", "x"}, {"\x00", `{"id":"\u0000"}`}, {`"q"`, `[]`}} {
		f.Add(s.header, []byte(s.body))
	}
	ps := parts(f, "header", "X-Delivery", "field", "data.id")
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		for _, p := range [][]httprule.KeyPart{nil, ps, ps[1:]} {
			rk, err := httprule.FindKey(p, "hooks", nil, http.Header{"X-Delivery": {header}, "Idempotency-Key": {header}}, body)
			var key string
			if err == nil {
				key, err = rk.Stored(nil)
			}
			switch {
			case err == nil && core.ValidateKey(key) != nil:
				t.Fatalf("key %q is not valid", key)
			case err != nil && !errors.Is(err, httprule.ErrNoKey) && !errors.Is(err, core.ErrInvalidKey):
				t.Fatalf("err %v is neither ErrNoKey nor ErrInvalidKey", err)
			}
		}
	})
}

// CheckEndpoint: a key from configured parts needs an endpoint; the
// Idempotency-Key header takes none.
func TestCheckEndpoint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		parts    []httprule.KeyPart
		endpoint string
		ok       bool
	}{
		{"default without", nil, "", true},
		{"Idempotency-Key named, without", parts(t, "header", "idempotency-key"), "", true},
		{"default with one", nil, "orders", false},
		{"a header with one", parts(t, "header", "X-GitHub-Delivery"), "github", true},
		{"a header without", parts(t, "header", "X-GitHub-Delivery"), "", false},
		{"a field without", parts(t, "field", "id"), "", false},
		{"a control character", parts(t, "field", "id"), "a\nb", false},
		{"too long", parts(t, "field", "id"), strings.Repeat("e", 129), false},
	} {
		if err := httprule.CheckEndpoint(tc.parts, tc.endpoint); (err == nil) != tc.ok {
			t.Errorf("%s: CheckEndpoint = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
