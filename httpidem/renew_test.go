package httpidem_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/httpidem"
	"github.com/idemgo/idem/internal/fakeclock"
	"github.com/idemgo/idem/memstore"
)

// TestLeaseRenewal: behind a runner with idem.WithLeaseRenewal, a request
// whose handler runs for many leases keeps its key (a duplicate gets 409
// with a Retry-After within one lease term, not the whole timeout), and its
// response is recorded and replayed.
func TestLeaseRenewal(t *testing.T) {
	const every, margin = 10 * time.Second, 2 * time.Second
	clock := fakeclock.New(t0)
	runner, err := idem.New(memstore.New(), idem.WithClock(clock.Now), idem.WithSleep(clock.Block),
		idem.WithLease(margin, time.Hour), idem.WithLeaseRenewal(every))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httpidem.Middleware(runner, httpidem.WithClock(clock.Now), httpidem.WithTimeout(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	request := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/exports", strings.NewReader(`{"report":"q4"}`))
		r.Header.Set("Idempotency-Key", "export-q4-2030")
		return r
	}
	var h http.Handler
	var duplicate *httptest.ResponseRecorder
	runs := 0
	h = mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		for range 6 { // a minute: the first lease (22 s) ended long ago
			if err := clock.WaitBlocked(r.Context(), 1); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			clock.Advance(every)
		}
		_ = clock.WaitBlocked(r.Context(), 1)
		duplicate = httptest.NewRecorder()
		h.ServeHTTP(duplicate, request())
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"export":"done"}`))
	}))
	first := httptest.NewRecorder()
	h.ServeHTTP(first, request())
	if first.Code != http.StatusCreated || runs != 1 {
		t.Fatalf("first request = %d %s after %d runs, want 201", first.Code, first.Body, runs)
	}
	if retry := duplicate.Header().Get("Retry-After"); duplicate.Code != http.StatusConflict || retry != "22" {
		t.Errorf("duplicate during the handler = %d with Retry-After %q, want 409 with 22 (one lease term)", duplicate.Code, retry)
	}
	replay := httptest.NewRecorder()
	h.ServeHTTP(replay, request().WithContext(context.Background()))
	if replay.Code != http.StatusCreated || replay.Header().Get("Idempotent-Replayed") != "true" || runs != 1 {
		t.Errorf("a retry afterwards = %d (replayed %q) after %d runs, want the recorded 201", replay.Code, replay.Header().Get("Idempotent-Replayed"), runs)
	}
}
