package httpidem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/httpidem"
)

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// observed collects observations; safe for concurrent use.
type observed struct {
	mu  sync.Mutex
	obs []string
}

func (o *observed) Observe(_ context.Context, ob idem.Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.obs = append(o.obs, ob.Verdict.String())
}

// The middleware logs through the runner's logger, one record per request
// it handles, and every verdict reaches the observer: the runner's, and
// its own (a missing key, a request let through without one, a panic, a
// replay it cannot answer). A safe method without a key leaves nothing.
func TestOneRecordPerRequest(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	var obs observed
	e := newEnv(t, nil, idem.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))), idem.WithObserver(&obs))
	url := e.serve(t, &shop{})
	req, _ := http.NewRequest("POST", url+"/orders", strings.NewReader(`{"fail":"panic"}`)) // the shop's first run panics
	req.Header.Set(httpidem.HeaderIdempotencyKey, "k-0")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	send(t, "POST", url+"/orders", "k-1", `{}`)
	send(t, "POST", url+"/orders", "k-1", `{}`)
	send(t, "POST", url+"/orders", "", `{}`)
	send(t, "DELETE", url+"/orders/1", "", ``)
	send(t, "GET", url+"/orders/1", "", ``)
	want := []string{"panicked", "executed", "replayed", "missing_key", "unkeyed"}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(logs.b.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if rec["wrapper"] != "net/http" || rec["method"] == nil || rec["path"] == nil {
			t.Errorf("record %v does not name the request", rec)
		}
		got = append(got, rec["verdict"].(string))
	}
	if !slices.Equal(got, want) {
		t.Errorf("log records %v, want %v", got, want)
	}
	if !slices.Equal(obs.obs, want) {
		t.Errorf("observed %v, want %v", obs.obs, want)
	}
}

// A request let through without a key whose handler panics is reported as
// panicked, as a keyed one is: one log record, one observation; the panic
// goes on to the server.
func TestUnkeyedPanicIsReported(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	var obs observed
	e := newEnv(t, nil, idem.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))), idem.WithObserver(&obs))
	url := e.serve(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("handler bug") }))
	req, _ := http.NewRequest("DELETE", url+"/orders/1", nil) // no key, none required: let through
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("answered %s, want the connection closed by the re-raised panic", resp.Status)
	}
	// The server reports before it re-raises the panic, which closes the
	// connection: both are done by the time the client has its error.
	obs.mu.Lock()
	got := slices.Clone(obs.obs)
	obs.mu.Unlock()
	if want := []string{"panicked"}; !slices.Equal(got, want) {
		t.Errorf("observed %v, want %v", got, want)
	}
	logs.mu.Lock()
	log := logs.b.String()
	logs.mu.Unlock()
	if !strings.Contains(log, `"verdict":"panicked"`) || !strings.Contains(log, "handler bug") || !strings.Contains(log, `"level":"ERROR"`) {
		t.Errorf("log = %q, want an ERROR record of the panic", log)
	}
}
