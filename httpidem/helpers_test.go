package httpidem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/httpidem"
	"github.com/idemgo/idem/internal/fakeclock"
	"github.com/idemgo/idem/memstore"
)

// t0 is the fake clock's start: in the future, so that a deadline the
// middleware computes from it never fires by itself.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// env is a runner over a store with a fake clock, deterministic tokens and
// no backoff jitter.
type env struct {
	clock  *fakeclock.Clock
	store  idem.Store
	runner *idem.Runner
	// served, when set, receives once a request's middleware has returned
	// (its outcome recorded).
	served chan struct{}
}

func newEnv(t testing.TB, store idem.Store, opts ...idem.Option) *env {
	t.Helper()
	if store == nil {
		store = memstore.New()
	}
	e := &env{clock: fakeclock.New(t0), store: store}
	var mu sync.Mutex
	n := 0
	base := []idem.Option{
		idem.WithClock(e.clock.Now),
		idem.WithSleep(e.clock.Sleep),
		idem.WithRand(func() float64 { return 0 }),
		idem.WithTokens(func() string { mu.Lock(); defer mu.Unlock(); n++; return fmt.Sprintf("token-%d", n) }),
	}
	r, err := idem.New(store, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.runner = r
	return e
}

// serve starts a real HTTP server on 127.0.0.1 with h behind the
// middleware, behind an outer middleware that sets a fresh X-Request-Id on
// every response, as a real stack would. It returns the server's URL.
func (e *env) serve(t testing.TB, h http.Handler, opts ...httpidem.Option) string {
	t.Helper()
	mw, err := httpidem.Middleware(e.runner, append([]httpidem.Option{httpidem.WithClock(e.clock.Now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	inner := mw(h)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		id := n
		mu.Unlock()
		w.Header().Set("X-Request-Id", "req-"+strconv.Itoa(id))
		inner.ServeHTTP(w, r)
		if e.served != nil {
			e.served <- struct{}{}
		}
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the panic test's panic is expected
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// hold writes a live in-progress record for key, as another server still
// running the request would, with its lease ending at leaseUntil.
func (e *env) hold(t testing.TB, key string, payload []byte, leaseUntil time.Time) {
	t.Helper()
	fp, err := core.Fingerprint(payload)
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	rec := core.Reserve(key, fp, "other-server", nil, now, leaseUntil, time.Hour)
	if err := e.store.Reserve(context.Background(), rec, nil, now); err != nil {
		t.Fatal(err)
	}
}

// answer is a response as the client saw it.
type answer struct {
	status int
	header http.Header
	body   string
}

// send makes a request with a real client; headers are name, value pairs,
// and a key of "" sends no Idempotency-Key.
func send(t testing.TB, method, url, key, body string, headers ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(httpidem.HeaderIdempotencyKey, key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// problemType is the type name of a problem answer, or "" for another
// answer.
func problemType(a answer) string {
	if a.header.Get("Content-Type") != httpidem.ProblemContentType {
		return ""
	}
	var p httpidem.Problem
	if json.Unmarshal([]byte(a.body), &p) != nil || p.Status != a.status {
		return "malformed problem " + a.body
	}
	return strings.TrimPrefix(p.Type, httpidem.ProblemTypeBase)
}

// counter counts executions per name; safe for concurrent use.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) inc(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
	return c.n[name]
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}
