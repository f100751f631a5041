package httpidem_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/httpidem"
)

// shop is the handler under test. Its answer is driven by the body's
// fields: "status" (default 201); "fail": "once" (the first run answers
// once_status, default 503, with Retry-After: 7), "panic" (the first run
// panics), "flush" (streams), "big" (writes 1 KiB). It counts its runs and
// numbers its answers, and says how many body bytes it read.
type shop struct{ runs counter }

func (s *shop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.runs.inc("all")
	raw, _ := io.ReadAll(r.Body)
	var b struct {
		Status int    `json:"status"`
		Fail   string `json:"fail"`
		Once   int    `json:"once_status"`
	}
	_ = json.Unmarshal(raw, &b)
	switch {
	case b.Fail == "once" && n == 1:
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(or(b.Once, http.StatusServiceUnavailable))
		fmt.Fprint(w, `{"error":"try again"}`)
		return
	case b.Fail == "panic" && n == 1:
		panic("the database is on fire")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Location", fmt.Sprintf("/orders/%d", n))
	h.Add("Set-Cookie", fmt.Sprintf("session=s%d; Path=/; HttpOnly", n))
	h.Add("Set-Cookie", "cart=empty; Path=/")
	h.Add("Vary", "Accept")
	h.Add("Vary", "Origin")
	w.WriteHeader(or(b.Status, http.StatusCreated))
	switch b.Fail {
	case "flush":
		fmt.Fprintf(w, `{"order":%d,`, n)
		http.NewResponseController(w).Flush()
		fmt.Fprint(w, `"streamed":true}`)
	case "big":
		fmt.Fprintf(w, `{"order":%d,"pad":%q}`, n, strings.Repeat("x", 1024))
	default:
		fmt.Fprintf(w, `{"order":%d,"read":%d}`, n, len(raw))
	}
}

// or is v, or def when v is 0.
func or(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func TestMiddleware(t *testing.T) {
	type step struct {
		method, path, key, body string
		headers                 []string
		advance                 time.Duration
		status                  int
		problem                 string
		body2                   string // expected body, when not a problem
		replayed                bool
		retry                   string
		runs                    int
	}
	body := `{"sku":"book","qty":1}`
	post := func(key, b string, status int, want string, replayed bool, runs int) step {
		return step{method: "POST", path: "/orders", key: key, body: b, status: status, body2: want, replayed: replayed, runs: runs}
	}
	refused := func(method, path, key, b string, status int, problem string, runs int, headers ...string) step {
		return step{method: method, path: path, key: key, body: b, headers: headers, status: status, problem: problem, runs: runs}
	}
	tests := []struct {
		name    string
		runOpts []idem.Option
		opts    []httpidem.Option
		prepare func(t *testing.T, e *env)
		steps   []step
	}{
		{name: "first request executes, its retry replays", steps: []step{
			post("k-1", body, 201, `{"order":1,"read":22}`, false, 1),
			post("k-1", body, 201, `{"order":1,"read":22}`, true, 1),
			post("k-1", " {\"qty\": 1, \"sku\": \"book\"}\n", 201, `{"order":1,"read":22}`, true, 1),
		}},
		{name: "another key executes again", steps: []step{
			post("k-1", body, 201, `{"order":1,"read":22}`, false, 1),
			post("k-2", body, 201, `{"order":2,"read":22}`, false, 2),
		}},
		{name: "a missing key is 400 for POST and PATCH; other methods pass through", steps: []step{
			refused("POST", "/orders", "", body, 400, httpidem.ProblemMissingKey, 0),
			refused("PATCH", "/orders/1", "", body, 400, httpidem.ProblemMissingKey, 0),
			{method: "PUT", path: "/orders/1", body: body, status: 201, body2: `{"order":1,"read":22}`, runs: 1},
			{method: "PUT", path: "/orders/1", body: body, status: 201, body2: `{"order":2,"read":22}`, runs: 2},
		}},
		{name: "a key on PUT is honoured, on GET ignored", steps: []step{
			{method: "PUT", path: "/orders/1", key: "k-1", body: body, status: 201, body2: `{"order":1,"read":22}`, runs: 1},
			{method: "PUT", path: "/orders/1", key: "k-1", body: body, status: 201, body2: `{"order":1,"read":22}`, replayed: true, runs: 1},
			{method: "GET", path: "/orders/1", key: "k-9", status: 201, body2: `{"order":2,"read":0}`, runs: 2},
			{method: "GET", path: "/orders/1", key: "k-9", status: 201, body2: `{"order":3,"read":0}`, runs: 3},
			{method: "GET", path: "/orders/1", key: "not a key", status: 201, body2: `{"order":4,"read":0}`, runs: 4},
		}},
		{name: "required methods are configurable", opts: []httpidem.Option{httpidem.WithRequiredMethods("PUT")}, steps: []step{
			refused("PUT", "/orders/1", "", body, 400, httpidem.ProblemMissingKey, 0),
			post("", body, 201, `{"order":1,"read":22}`, false, 1),
			post("k-1", body, 201, `{"order":2,"read":22}`, false, 2),
			post("k-1", body, 201, `{"order":2,"read":22}`, true, 2),
		}},
		{name: "invalid or repeated keys are 400", steps: []step{
			refused("POST", "/orders", "has space", body, 400, httpidem.ProblemInvalidKey, 0),
			refused("POST", "/orders", strings.Repeat("k", httpidem.MaxKeyLen+1), body, 400, httpidem.ProblemInvalidKey, 0),
			refused("POST", "/orders", "k-1,k-2", body, 400, httpidem.ProblemInvalidKey, 0),
			refused("POST", "/orders", `""`, body, 400, httpidem.ProblemInvalidKey, 0),
			refused("POST", "/orders", "k-1", body, 400, httpidem.ProblemInvalidKey, 0, "Idempotency-Key", "k-2"),
			post(strings.Repeat("k", httpidem.MaxKeyLen), body, 201, `{"order":1,"read":22}`, false, 1),
		}},
		{name: "a quoted key is the same key", steps: []step{
			post(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, body, 201, `{"order":1,"read":22}`, false, 1),
			post(`8e03978e-40d5-43e8-bc93-6894a57f9324`, body, 201, `{"order":1,"read":22}`, true, 1),
		}},
		{name: "the same key with another body, path or method is 422", steps: []step{
			post("k-1", body, 201, `{"order":1,"read":22}`, false, 1),
			refused("POST", "/orders", "k-1", `{"sku":"book","qty":2}`, 422, httpidem.ProblemKeyReused, 1),
			refused("POST", "/orders", "k-1", "qty=2", 422, httpidem.ProblemKeyReused, 1),
			refused("POST", "/carts", "k-1", body, 422, httpidem.ProblemKeyReused, 1),
			refused("PATCH", "/orders", "k-1", body, 422, httpidem.ProblemKeyReused, 1),
			post("k-1", body, 201, `{"order":1,"read":22}`, true, 1),
		}},
		{name: "keys are scoped by caller", opts: []httpidem.Option{httpidem.WithIdentity(func(r *http.Request) string { return r.Header.Get("X-Test-User") })}, steps: []step{
			{method: "POST", path: "/orders", key: "k-1", body: body, headers: []string{"X-Test-User", "alice"}, status: 201, body2: `{"order":1,"read":22}`, runs: 1},
			{method: "POST", path: "/orders", key: "k-1", body: body, headers: []string{"X-Test-User", "bob"}, status: 201, body2: `{"order":2,"read":22}`, runs: 2},
			{method: "POST", path: "/orders", key: "k-1", body: body, headers: []string{"X-Test-User", "alice"}, status: 201, body2: `{"order":1,"read":22}`, replayed: true, runs: 2},
			post("k-1", body, 201, `{"order":3,"read":22}`, false, 3),
		}},
		{name: "4xx answers are stored and replayed", steps: []step{
			post("k-1", `{"status":409}`, 409, `{"order":1,"read":14}`, false, 1),
			post("k-1", `{"status":409}`, 409, `{"order":1,"read":14}`, true, 1),
		}},
		{name: "5xx is not stored: the retry runs again, then replays", steps: []step{
			{method: "POST", path: "/orders", key: "k-1", body: `{"fail":"once"}`, status: 503, body2: `{"error":"try again"}`, retry: "7", runs: 1},
			post("k-1", `{"fail":"once"}`, 201, `{"order":2,"read":15}`, false, 2),
			post("k-1", `{"fail":"once"}`, 201, `{"order":2,"read":15}`, true, 2),
		}},
		{name: "429 and 408 are not stored", steps: []step{
			{method: "POST", path: "/orders", key: "k-1", body: `{"fail":"once","once_status":429}`, status: 429, body2: `{"error":"try again"}`, retry: "7", runs: 1},
			post("k-1", `{"fail":"once","once_status":429}`, 201, `{"order":2,"read":33}`, false, 2),
			{method: "POST", path: "/orders", key: "k-2", body: `{"status":408}`, status: 408, body2: `{"order":3,"read":14}`, runs: 3},
			{method: "POST", path: "/orders", key: "k-2", body: `{"status":408}`, status: 408, body2: `{"order":4,"read":14}`, runs: 4},
		}},
		{name: "5xx retries use up the attempts, then retries-exhausted", runOpts: []idem.Option{idem.WithMaxAttempts(2)}, steps: []step{
			post("k-1", `{"status":502}`, 502, `{"order":1,"read":14}`, false, 1),
			post("k-1", `{"status":502}`, 502, `{"order":2,"read":14}`, false, 2),
			refused("POST", "/orders", "k-1", `{"status":502}`, 500, httpidem.ProblemRetriesExhausted, 2),
		}},
		{name: "a body over the limit is 413, with or without Content-Length", opts: []httpidem.Option{httpidem.WithMaxBodyBytes(30)}, steps: []step{
			post("k-1", body, 201, `{"order":1,"read":22}`, false, 1),
			refused("POST", "/orders", "k-2", strings.Repeat(" ", 31), 413, httpidem.ProblemBodyTooLarge, 1),
			refused("POST", "/orders", "k-2", strings.Repeat(" ", 40), 413, httpidem.ProblemBodyTooLarge, 1, "Transfer-Encoding", "chunked"),
		}},
		{name: "JSON nested too deep is 400", steps: []step{
			refused("POST", "/orders", "k-1", strings.Repeat("[", httpidem.MaxBodyDepth+1)+strings.Repeat("]", httpidem.MaxBodyDepth+1), 400, httpidem.ProblemInvalidBody, 0),
		}},
		{name: "a streamed answer reaches the client but is not replayable", steps: []step{
			post("k-1", `{"fail":"flush"}`, 201, `{"order":1,"streamed":true}`, false, 1),
			{method: "POST", path: "/orders", key: "k-1", body: `{"fail":"flush"}`, status: 500, problem: httpidem.ProblemResponseOmitted, replayed: true, runs: 1},
		}},
		{name: "an answer over the response limit reaches the client but is not replayable", opts: []httpidem.Option{httpidem.WithMaxResponseBytes(512)}, steps: []step{
			post("k-0", body, 201, `{"order":1,"read":22}`, false, 1),
			post("k-0", body, 201, `{"order":1,"read":22}`, true, 1),
			post("k-1", `{"fail":"big"}`, 201, `{"order":2,"pad":"`+strings.Repeat("x", 1024)+`"}`, false, 2),
			{method: "POST", path: "/orders", key: "k-1", body: `{"fail":"big"}`, status: 500, problem: httpidem.ProblemResponseOmitted, replayed: true, runs: 2},
		}},
	}
	for _, st := range stores {
		for _, tc := range tests {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, st.new(t), tc.runOpts...)
				h := &shop{}
				url := e.serve(t, h, tc.opts...)
				if tc.prepare != nil {
					tc.prepare(t, e)
				}
				fresh := map[string]answer{} // the last fresh answer per key and caller
				for i, s := range tc.steps {
					e.clock.Advance(s.advance)
					a := send(t, s.method, url+s.path, s.key, s.body, s.headers...)
					if a.status != s.status || problemType(a) != s.problem || (s.problem == "" && a.body != s.body2) {
						t.Fatalf("step %d: got %d %s %s; want %d %q %s", i, a.status, problemType(a), a.body, s.status, s.problem, s.body2)
					}
					if got := a.header.Get(httpidem.HeaderReplayed) == "true"; got != s.replayed {
						t.Errorf("step %d: replayed = %v want %v (%v)", i, got, s.replayed, a.header)
					}
					if got := a.header.Get("Retry-After"); got != s.retry {
						t.Errorf("step %d: Retry-After = %q want %q", i, got, s.retry)
					}
					if got := h.runs.get("all"); got != s.runs {
						t.Errorf("step %d: handler ran %d times in all, want %d", i, got, s.runs)
					}
					switch {
					case s.replayed && s.problem == "":
						wantReplay(t, i, fresh[strings.Trim(s.key, `"`)+strings.Join(s.headers, ",")], a)
					case s.problem == "":
						fresh[strings.Trim(s.key, `"`)+strings.Join(s.headers, ",")] = a
					}
				}
			})
		}
	}
}

// wantReplay checks that replay has every header the handler set on
// first, with all their values, and the outer middleware's fresh ones.
func wantReplay(t *testing.T, step int, first, replay answer) {
	t.Helper()
	for _, name := range []string{"Content-Type", "Location", "Set-Cookie", "Vary"} {
		if !slices.Equal(replay.header.Values(name), first.header.Values(name)) || len(first.header.Values(name)) == 0 {
			t.Errorf("step %d: %s = %q, first answer had %q", step, name, replay.header.Values(name), first.header.Values(name))
		}
	}
	if len(replay.header.Values("Set-Cookie")) != 2 {
		t.Errorf("step %d: Set-Cookie = %q, want both cookies", step, replay.header.Values("Set-Cookie"))
	}
	if id := replay.header.Get("X-Request-Id"); id == "" || id == first.header.Get("X-Request-Id") {
		t.Errorf("step %d: X-Request-Id %q replayed from the first answer (%q), want the outer middleware's own", step, id, first.header.Get("X-Request-Id"))
	}
}
