package idem_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

func TestObserverSeesEveryCall(t *testing.T) {
	var mu sync.Mutex
	var seen []idem.Observation
	obs := idem.ObserverFunc(func(_ context.Context, o idem.Observation) {
		mu.Lock()
		seen = append(seen, o)
		mu.Unlock()
	})
	f := newFixture(t, idem.WithObserver(obs), idem.WithCache(8))
	ok := func(context.Context) ([]byte, error) { f.clock.Advance(20 * time.Millisecond); return []byte(`1`), nil }
	for range 2 {
		if err := f.do("evt:o1:a", `{}`, ok); err != nil {
			t.Fatal(err)
		}
	}
	_ = f.do("bad key", `{}`, ok)
	if len(seen) != 3 {
		t.Fatalf("%d observations, want 3", len(seen))
	}
	first, dup, bad := seen[0], seen[1], seen[2]
	if first.Verdict != idem.Executed || first.StoreCalls != 2 || first.Duration != 20*time.Millisecond || first.KeyHash != idem.HashKey("evt:o1:a") {
		t.Errorf("first call observed as %+v, want executed with 2 store writes in 20ms", first)
	}
	if dup.Verdict != idem.Replayed || !dup.Cached || dup.StoreCalls != 0 {
		t.Errorf("duplicate observed as %+v, want a cached replay without store calls", dup)
	}
	if bad.Verdict != idem.InvalidKey || !errors.Is(bad.Err, core.ErrInvalidKey) {
		t.Errorf("bad key observed as %+v", bad)
	}
}

func TestDisabledByEnvironment(t *testing.T) {
	t.Setenv(idem.EnvDisabled, "true")
	var logs bytes.Buffer
	f := newFixture(t, idem.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	h := &counter{result: []byte(`1`), errs: []error{nil, nil, transient("busy")}}
	for range 2 {
		if out, err := f.runner.Do(f.ctx(t, time.Minute), "evt:d1:a", []byte(`{}`), h.handler); err != nil || out.Replayed {
			t.Fatalf("unprotected call = %+v %v", out, err)
		}
	}
	// A transient error stays transient: a queue redelivers the event.
	if _, err := f.runner.Do(f.ctx(t, time.Minute), "evt:d1:a", []byte(`{}`), h.handler); !errors.Is(err, idem.ErrTransientFailure) {
		t.Fatalf("unprotected transient failure = %v, want ErrTransientFailure", err)
	}
	if h.n.Load() != 3 || f.store.Len() != 0 {
		t.Fatalf("handler ran %d times, store holds %d records; want 3 runs, nothing stored", h.n.Load(), f.store.Len())
	}
	if n := strings.Count(logs.String(), "idem: DISABLED"); n > 1 {
		t.Fatalf("the warning was logged %d times, want at most once per process", n)
	}
}
