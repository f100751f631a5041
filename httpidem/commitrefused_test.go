package httpidem_test

import (
	"net/http"
	"testing"

	"github.com/idemgo/idem/httpidem"
	"github.com/idemgo/idem/internal/refusecommit"
	"github.com/idemgo/idem/memstore"
)

// TestCommitRefusedAnswers503: a request whose handler succeeded but whose
// commit the store refused, writing nothing (idem.CommitRefused), is
// answered 503 commit-refused with Retry-After: 1 in place of the
// handler's 201 (none of the handler's headers or body reaches the
// client), and the client's retry with the same key runs the handler
// again, at once, and gets its answer, which a later retry replays.
func TestCommitRefusedAnswers503(t *testing.T) {
	store := refusecommit.New()
	store.Refuse.Store(1)
	store.Permanent = true // no completion retry: one commit refused
	e := newEnv(t, store)
	runs, ledger := 0, 0
	url := e.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		if err := memstore.Stage(r.Context(), memstore.Write{Apply: func() { ledger++ }}); err != nil {
			t.Error(err)
		}
		w.Header().Set("Location", "/orders/1")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":1}`))
	}))

	a := send(t, http.MethodPost, url+"/orders", "k-refused", `{"n":1}`)
	if a.status != http.StatusServiceUnavailable || problemType(a) != httpidem.ProblemCommitRefused || a.header.Get("Retry-After") != "1" {
		t.Fatalf("first request = %d %q %s (Retry-After %q); want 503 commit-refused, Retry-After 1", a.status, problemType(a), a.body, a.header.Get("Retry-After"))
	}
	if a.header.Get("Location") != "" || a.header.Get("X-Request-Id") == "" || ledger != 0 {
		t.Fatalf("first request: Location %q, X-Request-Id %q, ledger %d; want the handler's header gone, the outer one kept, nothing applied",
			a.header.Get("Location"), a.header.Get("X-Request-Id"), ledger)
	}

	a = send(t, http.MethodPost, url+"/orders", "k-refused", `{"n":1}`)
	if a.status != http.StatusCreated || a.body != `{"id":1}` || a.header.Get("Location") != "/orders/1" || runs != 2 || ledger != 1 {
		t.Fatalf("retry = %d %s (Location %q), runs %d, ledger %d; want the handler's 201, run again, applied once", a.status, a.body, a.header.Get("Location"), runs, ledger)
	}
	a = send(t, http.MethodPost, url+"/orders", "k-refused", `{"n":1}`)
	if a.status != http.StatusCreated || a.header.Get("Idempotent-Replayed") != "true" || runs != 2 {
		t.Fatalf("second retry = %d (replayed %q), runs %d; want the 201 replayed", a.status, a.header.Get("Idempotent-Replayed"), runs)
	}
}
