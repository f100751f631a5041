package httpidem_test

import (
	"net/http"
	"testing"

	"github.com/idemgo/idem/httpidem"
)

// TestIETFDraft walks the status codes of the IETF Idempotency-Key draft
// (draft-ietf-httpapi-idempotency-key-header-06), sections "Idempotency
// Enforcement Scenarios" and "Error Scenarios", over a real server, one
// row per scenario, in the order a client meets them.
func TestIETFDraft(t *testing.T) {
	t.Parallel()
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, st.new(t))
			h := newBlocking()
			url := e.serve(t, h) + "/payments"
			const key = `"8e03978e-40d5-43e8-bc93-6894a57f9324"` // the draft's example, an sf-string
			var first answer
			rows := []struct {
				scenario string
				do       func() answer
				status   int
				problem  string
				replayed bool
			}{
				{"first request: processed normally", func() answer {
					first = send(t, "POST", url, key, `{"amount":100}`)
					return first
				}, http.StatusCreated, "", false},
				{"duplicate request, first completed: the previous result", func() answer {
					return send(t, "POST", url, key, `{"amount":100}`)
				}, http.StatusCreated, "", true},
				{"concurrent request, the first still being processed: 409 Conflict", func() answer {
					done := make(chan answer, 1)
					go func() { done <- send(t, "POST", url, "second-key", "block") }()
					<-h.started
					a := send(t, "POST", url, "second-key", "block")
					close(h.release)
					<-done
					return a
				}, http.StatusConflict, httpidem.ProblemInProgress, false},
				{"key reused with a different payload: 422 Unprocessable Content", func() answer {
					return send(t, "POST", url, key, `{"amount":999}`)
				}, http.StatusUnprocessableEntity, httpidem.ProblemKeyReused, false},
				{"key missing for an operation that requires it: 400 Bad Request", func() answer {
					return send(t, "POST", url, "", `{"amount":100}`)
				}, http.StatusBadRequest, httpidem.ProblemMissingKey, false},
				{"key that is not a valid sf-string: 400 Bad Request", func() answer {
					return send(t, "POST", url, `"unterminated`, `{"amount":100}`)
				}, http.StatusBadRequest, httpidem.ProblemInvalidKey, false},
			}
			for _, row := range rows {
				a := row.do()
				if a.status != row.status || problemType(a) != row.problem || (a.header.Get(httpidem.HeaderReplayed) == "true") != row.replayed {
					t.Errorf("%s: got %d %s %v; want %d %q replayed %v", row.scenario, a.status, a.body, a.header, row.status, row.problem, row.replayed)
				}
				if row.status == http.StatusConflict && a.header.Get("Retry-After") == "" {
					t.Errorf("%s: no Retry-After", row.scenario)
				}
				if row.replayed && a.body != first.body {
					t.Errorf("%s: body %q, want the first %q", row.scenario, a.body, first.body)
				}
			}
			if n := h.runs.get("all"); n != 2 {
				t.Errorf("handler ran %d times, want 2 (the first request and the one the 409 refused a copy of)", n)
			}
		})
	}
}
