package httpidem_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/httpidem"
	"github.com/idemgo/idem/memstore"
)

// sessionStack is a server whose outer middleware refreshes the caller's
// session cookie on every response (before the idempotency middleware
// runs), and whose handler sets a cookie of its own. Callers are named by
// X-User; keys are scoped by X-Tenant (a tenant-level identity, so two
// users of one tenant share a key space). It returns the server's URL and
// the stored key of the first keyed request.
func sessionStack(t *testing.T, e *env) (url string, storedKey func() string) {
	t.Helper()
	mw, err := httpidem.Middleware(e.runner, httpidem.WithClock(e.clock.Now),
		httpidem.WithIdentity(func(r *http.Request) string { return r.Header.Get("X-Tenant") }))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var key string
	var runs counter
	inner := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if k, ok := httpidem.StoredKey(r.Context()); ok && key == "" {
			key = k
		}
		mu.Unlock()
		http.SetCookie(w, &http.Cookie{Name: "cart", Value: fmt.Sprintf("c-%d", runs.inc("all")), Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"order":"o-1"}`))
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "s-" + r.Header.Get("X-User"), Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode})
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() string { mu.Lock(); defer mu.Unlock(); return key }
}

// Item 4: an outer middleware's Set-Cookie is not recorded, and a replay
// adds the handler's recorded cookies to the caller's own: user B replaying
// user A's request (one tenant, one key) never receives A's session.
func TestOuterCookiesNotReplayed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	url, _ := sessionStack(t, e)
	a := send(t, "POST", url, "k-1", `{"item":"book"}`, "X-User", "alice", "X-Tenant", "t-1")
	b := send(t, "POST", url, "k-1", `{"item":"book"}`, "X-User", "bob", "X-Tenant", "t-1")
	if want := []string{"session=s-alice; HttpOnly; Secure; SameSite=Strict", "cart=c-1; HttpOnly; Secure; SameSite=Lax"}; !slices.Equal(a.header.Values("Set-Cookie"), want) {
		t.Errorf("first answer's cookies = %q; want %q", a.header.Values("Set-Cookie"), want)
	}
	if b.header.Get(httpidem.HeaderReplayed) != "true" {
		t.Fatalf("second answer is not a replay: %d %v", b.status, b.header)
	}
	if want := []string{"session=s-bob; HttpOnly; Secure; SameSite=Strict", "cart=c-1; HttpOnly; Secure; SameSite=Lax"}; !slices.Equal(b.header.Values("Set-Cookie"), want) {
		t.Errorf("replay's cookies = %q; want %q (bob's own session, then the handler's recorded cookie)", b.header.Values("Set-Cookie"), want)
	}
}

// A response recorded by a release before this rule may hold an outer
// middleware's cookie beside the handler's: its cookies are not replayed.
func TestLegacyRecordCookiesNotReplayed(t *testing.T) {
	t.Parallel()
	first := newEnv(t, nil)
	url, storedKey := sessionStack(t, first)
	send(t, "POST", url, "k-1", `{"item":"book"}`, "X-User", "alice", "X-Tenant", "t-1")
	key := storedKey()
	ctx := context.Background()
	rec, err := first.store.Get(ctx, key, first.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The record as the releases before wrote it: the outer session
	// cookie recorded beside the handler's.
	legacy := `{"v":1,"shape":"net/http","response":{"statusCode":201,"header":{"Set-Cookie":["session=s-alice; HttpOnly; Secure; SameSite=Strict","cart=c-1; HttpOnly; Secure; SameSite=Lax"]},"body":"eyJvcmRlciI6Im8tMSJ9"}}`
	store := memstore.New()
	now := first.clock.Now()
	res := core.Reserve(key, rec.Fingerprint, "tok", nil, now, now.Add(time.Minute), time.Hour)
	if err := store.Reserve(ctx, res, nil, now); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Complete(ctx, core.Succeed(res, []byte(legacy), now, time.Hour)); err != nil {
		t.Fatal(err)
	}
	second := newEnv(t, store)
	url2, _ := sessionStack(t, second)
	b := send(t, "POST", url2, "k-1", `{"item":"book"}`, "X-User", "bob", "X-Tenant", "t-1")
	if b.header.Get(httpidem.HeaderReplayed) != "true" || b.body != `{"order":"o-1"}` {
		t.Fatalf("not the replay of the stored response: %d %v %s", b.status, b.header, b.body)
	}
	if want := []string{"session=s-bob; HttpOnly; Secure; SameSite=Strict"}; !slices.Equal(b.header.Values("Set-Cookie"), want) {
		t.Errorf("replay of a legacy record: cookies %q; want %q (none of the recorded ones)", b.header.Values("Set-Cookie"), want)
	}
}
