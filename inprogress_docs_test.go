package idem_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
	"github.com/idemgo/idem/memstore"
)

// TestInProgressMemoryDocsNameTheRecheck: an answer from the memory of keys
// in progress, for a key held elsewhere, carries the runner's next recheck
// as RetryAt, not the lease end; every page that says what that answer
// carries says so.
func TestInProgressMemoryDocsNameTheRecheck(t *testing.T) {
	clock := fakeclock.New(t0)
	store := memstore.New()
	held := holdElsewhere(t, store, "evt:docs:charge", `{}`, t0, stormLease)
	r, err := idem.New(store, idem.WithClock(clock.Now), idem.WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	never := func(context.Context) ([]byte, error) { return nil, errors.New("must not run") }
	if _, err := r.Do(context.Background(), "evt:docs:charge", []byte(`{}`), never); !errors.Is(err, core.ErrInProgress) {
		t.Fatalf("first duplicate = %v, want in progress", err)
	}
	clock.Advance(100 * time.Millisecond)
	out, err := r.Do(context.Background(), "evt:docs:charge", []byte(`{}`), never)
	var ipe *core.InProgressError
	if !errors.As(err, &ipe) || !out.Cached || !ipe.RetryAt.Equal(t0.Add(idem.DefaultInProgressRecheck)) || !ipe.RetryAt.Before(held.LeaseUntil) {
		t.Fatalf("second duplicate = %+v, %v; want in progress from memory, RetryAt the next recheck %v (the lease ends at %v)",
			out, err, t0.Add(idem.DefaultInProgressRecheck), held.LeaseUntil)
	}
	for _, p := range []struct{ file, start, end string }{
		{"docs/effectively-once.md", "| one-write reservation + memory of keys in progress |", "\n"},
		{"docs/errors-and-retries.md", "What it costs and saves:", "\n\n"},
		{"docs/writing-a-store.md", "- [ ] `RunnerStorm`:", "\n"},
	} {
		b, err := os.ReadFile(p.file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		i := strings.Index(text, p.start)
		if i < 0 {
			t.Errorf("%s: no passage starting %q", p.file, p.start)
			continue
		}
		passage := text[i:]
		if j := strings.Index(passage, p.end); j >= 0 {
			passage = passage[:j]
		}
		if !strings.Contains(passage, "next recheck") {
			t.Errorf("%s: the passage on the memory's answer does not say it carries the next recheck:\n%s", p.file, passage)
		}
	}
}
