package httpidem_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/httpidem"
)

// parkingSleep is a runner's sleep that reports each call on entered and
// then blocks until ctx is done: a duplicate that waits in memory for the
// first request parks in it until that one finishes.
func parkingSleep(entered chan<- struct{}) func(context.Context, time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		entered <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
}

// Two real requests with one key at once, with WithWait: the second waits
// for the first and gets its answer, replayed, instead of a 409.
func TestWaitForTheFirstAnswer(t *testing.T) {
	t.Parallel()
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			entered := make(chan struct{}, 1)
			e := newEnv(t, st.new(t), idem.WithSleep(parkingSleep(entered)))
			h := newBlocking()
			url := e.serve(t, h, httpidem.WithTimeout(10*time.Second), httpidem.WithWait(5*time.Second))
			first, dup := make(chan answer, 1), make(chan answer, 1)
			go func() { first <- send(t, "POST", url+"/pay", "k-1", "block") }()
			<-h.started
			go func() { dup <- send(t, "POST", url+"/pay", "k-1", "block") }()
			<-entered // the duplicate waits for the first request
			close(h.release)
			if a := <-first; a.status != http.StatusCreated || a.body != "run 1" || a.header.Get(httpidem.HeaderReplayed) != "" {
				t.Fatalf("first: %d %s %v", a.status, a.body, a.header)
			}
			a := <-dup
			if a.status != http.StatusCreated || a.body != "run 1" || a.header.Get(httpidem.HeaderReplayed) != "true" ||
				!slices.Equal(a.header.Values("Set-Cookie"), []string{"a=1", "b=2"}) {
				t.Errorf("duplicate: %d %s %v; want the first answer replayed, with both cookies", a.status, a.body, a.header)
			}
			if n := h.runs.get("all"); n != 1 {
				t.Errorf("handler ran %d times, want 1", n)
			}
		})
	}
}

func TestWaitBadBound(t *testing.T) {
	if _, err := httpidem.Middleware(newEnv(t, nil).runner, httpidem.WithWait(-time.Second)); err == nil {
		t.Fatal("WithWait(-1s) accepted")
	}
}
