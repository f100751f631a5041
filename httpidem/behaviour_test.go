package httpidem_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/httpidem"
	"github.com/idemgo/idem/internal/httprule"
)

// blocking is a handler that, for a request with the body "block", tells
// started and waits for release; it counts its runs.
type blocking struct {
	runs             counter
	started, release chan struct{}
}

func newBlocking() *blocking {
	return &blocking{started: make(chan struct{}, 1), release: make(chan struct{})}
}

func (b *blocking) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := b.runs.inc("all")
	buf := make([]byte, 16)
	k, _ := r.Body.Read(buf)
	if string(buf[:k]) == "block" {
		b.started <- struct{}{}
		<-b.release
	}
	w.Header().Add("Set-Cookie", "a=1")
	w.Header().Add("Set-Cookie", "b=2")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, "run %d", n)
}

// Two real requests with one key at once: the second is refused with 409
// while the first runs, and replays it afterwards.
func TestConcurrentDuplicate(t *testing.T) {
	t.Parallel()
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, st.new(t))
			h := newBlocking()
			url := e.serve(t, h, httpidem.WithTimeout(10*time.Second))
			first := make(chan answer, 1)
			go func() { first <- send(t, "POST", url+"/pay", "k-1", "block") }()
			<-h.started
			dup := send(t, "POST", url+"/pay", "k-1", "block")
			if dup.status != http.StatusConflict || problemType(dup) != httpidem.ProblemInProgress {
				t.Errorf("duplicate: %d %s, want 409 %s", dup.status, dup.body, httpidem.ProblemInProgress)
			}
			// The lease ends at the deadline (now + 10 s) plus the runner's margin (5 s).
			if got := dup.header.Get("Retry-After"); got != "15" {
				t.Errorf("Retry-After = %q, want 15", got)
			}
			close(h.release)
			if a := <-first; a.status != http.StatusCreated || a.body != "run 1" {
				t.Fatalf("first: %d %s", a.status, a.body)
			}
			again := send(t, "POST", url+"/pay", "k-1", "block")
			if again.status != http.StatusCreated || again.body != "run 1" || again.header.Get(httpidem.HeaderReplayed) != "true" ||
				!slices.Equal(again.header.Values("Set-Cookie"), []string{"a=1", "b=2"}) {
				t.Errorf("after: %d %s %v; want run 1 replayed with both cookies", again.status, again.body, again.header)
			}
			if n := h.runs.get("all"); n != 1 {
				t.Errorf("handler ran %d times, want 1", n)
			}
		})
	}
}

// A request held elsewhere gets 409 with Retry-After rounded up to whole
// seconds until the lease ends; after the lease, a retry takes it over.
func TestInProgressRetryAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	h := &shop{}
	url := e.serve(t, h)
	key, _ := httprule.Key("k-1", nil)
	payload, _ := httprule.Payload("POST", "/orders", []byte("{}"))
	e.hold(t, key, payload, e.clock.Now().Add(2300*time.Millisecond))
	for i, s := range []struct {
		advance time.Duration
		status  int
		retry   string
	}{{0, 409, "3"}, {2 * time.Second, 409, "1"}, {time.Second, 201, ""}} {
		e.clock.Advance(s.advance)
		a := send(t, "POST", url+"/orders", "k-1", "{}")
		if a.status != s.status || a.header.Get("Retry-After") != s.retry {
			t.Errorf("step %d: %d Retry-After %q; want %d %q", i, a.status, a.header.Get("Retry-After"), s.status, s.retry)
		}
	}
}

// The handler's context has the deadline now + the timeout; the key's
// lease ends at that deadline plus the runner's lease margin.
func TestDeadlineAndLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, idem.WithLease(2*time.Second, time.Hour))
	var deadline time.Time
	var lease core.Record
	url := e.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deadline, _ = r.Context().Deadline()
		key, _ := httpidem.StoredKey(r.Context())
		lease, _ = e.store.Get(r.Context(), key, e.clock.Now())
	}), httpidem.WithTimeout(7*time.Second))
	if a := send(t, "POST", url+"/x", "k-1", ""); a.status != 200 {
		t.Fatalf("status %d", a.status)
	}
	if want := t0.Add(7 * time.Second); !deadline.Equal(want) {
		t.Errorf("deadline %v, want %v", deadline, want)
	}
	if want := t0.Add(9 * time.Second); lease.Status != core.StatusInProgress || !lease.LeaseUntil.Equal(want) {
		t.Errorf("record during the handler: %s lease until %v, want in progress until %v", lease.Status, lease.LeaseUntil, want)
	}
}

// A handler that panics is not recorded as a success: the key is released
// as a retryable failure, the panic reaches net/http, and the retry runs.
func TestPanicReleasesTheKey(t *testing.T) {
	t.Parallel()
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, st.new(t))
			h := &shop{}
			url := e.serve(t, h)
			req, _ := http.NewRequest("POST", url+"/orders", strings.NewReader(`{"fail":"panic"}`))
			req.Header.Set(httpidem.HeaderIdempotencyKey, "k-1")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				t.Fatalf("the panic answered %d; want the connection closed", resp.StatusCode)
			}
			key, _ := httprule.Key("k-1", nil)
			rec, err := e.store.Get(context.Background(), key, e.clock.Now())
			if err != nil || rec.Status != core.StatusFailed || !rec.Retryable {
				t.Fatalf("record after the panic: %+v, %v; want a retryable failure", rec, err)
			}
			if a := send(t, "POST", url+"/orders", "k-1", `{"fail":"panic"}`); a.status != 201 || h.runs.get("all") != 2 {
				t.Errorf("retry: %d %s after %d runs; want 201 after 2", a.status, a.body, h.runs.get("all"))
			}
		})
	}
}

// A handler that takes the connection over is not recorded for replay.
func TestHijackIsNotReplayable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var runs counter
	// The client reads the hijacked answer before the middleware records
	// the call; the retry is sent once the first call has been recorded.
	e.served = make(chan struct{}, 2)
	url := e.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.inc("all")
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		fmt.Fprint(brw, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		brw.Flush()
	}))
	if a := send(t, "POST", url+"/raw", "k-1", ""); a.status != 200 || a.body != "ok" {
		t.Fatalf("hijacked: %d %q", a.status, a.body)
	}
	<-e.served
	a := send(t, "POST", url+"/raw", "k-1", "")
	if a.status != 500 || problemType(a) != httpidem.ProblemResponseOmitted || a.header.Get(httpidem.HeaderReplayed) != "true" || runs.get("all") != 1 {
		t.Errorf("retry: %d %s, %d runs; want a replayed 500 %s and one run", a.status, a.body, runs.get("all"), httpidem.ProblemResponseOmitted)
	}
}

// faultStore fails Reserve with err.
type faultStore struct {
	idem.Store
	err error
}

func (f *faultStore) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	return f.err
}

func TestStoreFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		err     error
		status  int
		problem string
		retry   string
	}{
		{"transient store failure is 503", core.MarkTransient(errors.New("throttled")), 503, httpidem.ProblemStoreUnavailable, "1"},
		{"permanent store failure is 500", errors.New("table not found"), 500, httpidem.ProblemInternal, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, &faultStore{err: tc.err})
			h := &shop{}
			a := send(t, "POST", e.serve(t, h)+"/orders", "k-1", "{}")
			if a.status != tc.status || problemType(a) != tc.problem || a.header.Get("Retry-After") != tc.retry || h.runs.get("all") != 0 {
				t.Errorf("got %d %s Retry-After %q after %d runs; want %d %s %q and no run", a.status, problemType(a), a.header.Get("Retry-After"), h.runs.get("all"), tc.status, tc.problem, tc.retry)
			}
		})
	}
}

// The hook sees what the middleware answers in the handler's place, with
// its verdict, and cannot unmark a replay.
func TestResponseHook(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var seen []idem.Verdict
	hook := httpidem.WithResponseHook(func(ctx context.Context, resp *httpidem.Response, v idem.Verdict) {
		seen = append(seen, v)
		resp.Header.Set("X-Idem-Verdict", v.String())
		resp.Header.Del(httpidem.HeaderReplayed)
		resp.Header["idempotent-replayed"] = []string{"false"}
		resp.Header.Add("Set-Cookie", "hooked=1")
	})
	url := e.serve(t, &shop{}, hook, httpidem.WithMaxBodyBytes(64))
	steps := []struct {
		key, body string
		status    int
		verdict   string
	}{
		{"k-1", "{}", 201, ""},
		{"k-1", "{}", 201, "replayed"},
		{"k-1", `{"a":1}`, 422, "key_reused"},
		{"", "{}", 400, "missing_key"},
		{"k-2", strings.Repeat(" ", 65), 413, "invalid_payload"},
	}
	for i, s := range steps {
		a := send(t, "POST", url+"/orders", s.key, s.body)
		if a.status != s.status || a.header.Get("X-Idem-Verdict") != s.verdict {
			t.Errorf("step %d: %d verdict %q; want %d %q", i, a.status, a.header.Get("X-Idem-Verdict"), s.status, s.verdict)
		}
		if s.verdict == "replayed" {
			if got := a.header.Values(httpidem.HeaderReplayed); !slices.Equal(got, []string{"true"}) {
				t.Errorf("step %d: %s = %q after the hook, want [true]", i, httpidem.HeaderReplayed, got)
			}
			if got := a.header.Values("Set-Cookie"); len(got) != 3 || got[2] != "hooked=1" {
				t.Errorf("step %d: Set-Cookie = %q, want the two stored and the hook's", i, got)
			}
		}
	}
	want := []idem.Verdict{idem.Replayed, idem.KeyReused, idem.MissingKey, idem.InvalidPayload}
	if !slices.Equal(seen, want) {
		t.Errorf("hook saw %v, want %v", seen, want)
	}
}

func TestStoredKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var got []string
	url := e.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, ok := httpidem.StoredKey(r.Context())
		if !ok {
			k = "(none)"
		}
		got = append(got, k)
		w.WriteHeader(http.StatusServiceUnavailable) // not stored: the retry runs again
	}), httpidem.WithIdentity(func(r *http.Request) string { return r.Header.Get("X-Test-User") }))
	send(t, "POST", url, "k-1", "", "X-Test-User", "alice")
	send(t, "POST", url, "k-1", "", "X-Test-User", "alice")
	send(t, "PUT", url, "", "")
	alice, _ := httprule.Key("k-1", []string{"caller=alice"})
	if want := []string{alice, alice, "(none)"}; !slices.Equal(got, want) {
		t.Errorf("handlers saw %q, want %q", got, want)
	}
}

func TestOptionErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	bad := map[string]httpidem.Option{
		"empty method":      httpidem.WithRequiredMethods(""),
		"nil identity":      httpidem.WithIdentity(nil),
		"zero body limit":   httpidem.WithMaxBodyBytes(0),
		"negative response": httpidem.WithMaxResponseBytes(-1),
		"zero timeout":      httpidem.WithTimeout(0),
		"nil clock":         httpidem.WithClock(nil),
		"nil hook":          httpidem.WithResponseHook(nil),
	}
	for name, o := range bad {
		if _, err := httpidem.Middleware(e.runner, o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := httpidem.Middleware(nil); err == nil {
		t.Error("nil runner accepted")
	}
	mw, err := httpidem.Middleware(e.runner, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a nil handler did not panic")
		}
	}()
	mw(nil)
}
