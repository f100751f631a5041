package idem_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// An ordinary error (one no mark and no classifier knows) is not retried in
// the call, leaves the key to run again, and the next call runs the
// handler.
func TestOrdinaryErrorRunsAgainOnTheNextCall(t *testing.T) {
	f := newFixture(t)
	h := &counter{result: []byte(`"shipped"`), errs: []error{errors.New("warehouse said no")}}
	_, err := f.runner.Do(f.ctx(t, 30*time.Second), "evt:ord-1:ship", []byte(`{}`), h.handler)
	if err == nil || h.n.Load() != 1 || len(f.clock.Sleeps()) != 0 {
		t.Fatalf("first call = %v after %d runs, sleeps %v; want an error after one run, no in-process retry", err, h.n.Load(), f.clock.Sleeps())
	}
	if errors.Is(err, core.ErrPermanentFailure) {
		t.Fatalf("first call = %v: an ordinary error is not known to be permanent", err)
	}
	rec, gerr := f.store.Get(context.Background(), "evt:ord-1:ship", f.clock.Now())
	if gerr != nil || rec.Status != core.StatusFailed || !rec.Retryable {
		t.Fatalf("record = %v, %v; want a retryable failure", rec, gerr)
	}
	out, err := f.runner.Do(f.ctx(t, 30*time.Second), "evt:ord-1:ship", []byte(`{}`), h.handler)
	if err != nil || out.Replayed || h.n.Load() != 2 || string(out.Result) != `"shipped"` {
		t.Fatalf("second call = %+v, %v after %d runs; want the handler run again, and its success", out, err, h.n.Load())
	}
}

// Its verdict is failed_unclassified, logged at ERROR with the error, and
// its error is ErrUnclassifiedFailure wrapping the handler's.
func TestOrdinaryErrorVerdict(t *testing.T) {
	var buf bytes.Buffer
	f := newFixture(t, idem.WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
	cause := errors.New("warehouse said no")
	out, err := f.runner.Do(f.ctx(t, 30*time.Second), "evt:ord-2:ship", []byte(`{}`), func(context.Context) ([]byte, error) { return nil, cause })
	if out.Verdict != idem.FailedUnclassified || idem.VerdictOf(err) != idem.FailedUnclassified ||
		!errors.Is(err, idem.ErrUnclassifiedFailure) || !errors.Is(err, cause) || out.Attempts != 1 {
		t.Fatalf("Do = %+v, %v; want failed_unclassified at attempt 1, wrapping the handler's error", out, err)
	}
	if log := buf.String(); !strings.Contains(log, `"level":"ERROR"`) || !strings.Contains(log, `"verdict":"failed_unclassified"`) ||
		!strings.Contains(log, "warehouse said no") {
		t.Errorf("log = %s, want an ERROR record of failed_unclassified naming the error", log)
	}
}

// WithUnclassifiedPermanent keeps the rule of "run once, then the
// dead-letter queue": an ordinary error is a permanent failure, replayed.
func TestUnclassifiedPermanentRunsOnce(t *testing.T) {
	f := newFixture(t, idem.WithUnclassifiedPermanent())
	h := &counter{errs: []error{errors.New("warehouse said no"), errors.New("warehouse said no")}}
	out, err := f.runner.Do(f.ctx(t, 30*time.Second), "evt:ord-3:ship", []byte(`{}`), h.handler)
	if out.Verdict != idem.FailedPermanently || !errors.Is(err, core.ErrPermanentFailure) {
		t.Fatalf("first call = %+v, %v; want failed_permanently", out, err)
	}
	out, err = f.runner.Do(f.ctx(t, 30*time.Second), "evt:ord-3:ship", []byte(`{}`), h.handler)
	if out.Verdict != idem.ReplayedFailure || h.n.Load() != 1 {
		t.Fatalf("second call = %+v, %v after %d runs; want replayed_failure, one run", out, err, h.n.Load())
	}
	// What is known stays known: a transient error is still retried.
	h2 := &counter{result: []byte(`1`), errs: []error{transient("503")}}
	if out, err := f.runner.Do(f.ctx(t, 30*time.Second), "evt:ord-4:ship", []byte(`{}`), h2.handler); err != nil || h2.n.Load() != 2 {
		t.Fatalf("transient = %+v, %v after %d runs; want success on the in-process retry", out, err, h2.n.Load())
	}
}

// In-process tries never count toward the bound of a key's executions: an
// outage that uses up every call's tries leaves WithMaxAttempts(2) two
// deliveries that run.
func TestInProcessTriesDoNotCountTowardTheBound(t *testing.T) {
	f := newFixture(t, idem.WithRetry(3, base, maxDelay), idem.WithMaxAttempts(2))
	outage := func(context.Context) ([]byte, error) { return nil, transient("warehouse 503") }
	var runs []int32
	var h counter
	run := func(ctx context.Context) ([]byte, error) { h.n.Add(1); return outage(ctx) }
	for delivery := 1; delivery <= 3; delivery++ {
		_, err := f.runner.Do(f.ctx(t, 30*time.Second), "evt:ord-5:ship", []byte(`{}`), run)
		runs = append(runs, h.n.Load())
		want := idem.ErrTransientFailure
		if delivery >= 2 {
			want = core.ErrRetriesExhausted
		}
		if !errors.Is(err, want) {
			t.Fatalf("delivery %d = %v, want %v (runs so far %v)", delivery, err, want, runs)
		}
	}
	if want := []int32{3, 6, 6}; runs[0] != want[0] || runs[1] != want[1] || runs[2] != want[2] {
		t.Errorf("runs after each delivery = %v, want %v: three tries on each of the two deliveries the bound allows", runs, want)
	}
}

// A call whose source limits its deliveries (ContextWithSourceLimit) has no
// bound of its own unless WithMaxAttempts gives one; a direct call keeps
// DefaultMaxAttempts.
func TestSourceLimitSetsNoDefaultBound(t *testing.T) {
	tests := []struct {
		name     string
		opts     []idem.Option
		limited  bool
		wantRuns int // deliveries, of 12, that ran
	}{
		{"source limited", nil, true, 12},
		{"source limited, explicit bound", []idem.Option{idem.WithMaxAttempts(3)}, true, 3},
		{"direct call", nil, false, idem.DefaultMaxAttempts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			r, err := idem.New(f.store, append([]idem.Option{idem.WithClock(f.clock.Now), idem.WithSleep(f.clock.Sleep), idem.WithRetry(1, base, maxDelay)}, tt.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			ran := 0
			outage := func(context.Context) ([]byte, error) { ran++; return nil, transient("warehouse 503") }
			for range 12 {
				ctx := f.ctx(t, 30*time.Second)
				if tt.limited {
					ctx = idem.ContextWithSourceLimit(ctx)
				}
				_, _ = r.Do(ctx, "evt:ord-6:ship", []byte(`{}`), outage)
			}
			if ran != tt.wantRuns {
				t.Errorf("%d of 12 deliveries ran, want %d", ran, tt.wantRuns)
			}
		})
	}
}

// The source's mark applies to the call made with it, not to the calls its
// handler makes.
func TestSourceLimitIsNotInherited(t *testing.T) {
	f := newFixture(t)
	r, err := idem.New(f.store, idem.WithClock(f.clock.Now), idem.WithSleep(f.clock.Sleep), idem.WithRetry(1, base, maxDelay))
	if err != nil {
		t.Fatal(err)
	}
	inner := func(context.Context) ([]byte, error) { return nil, transient("warehouse 503") }
	var last error
	outer := func(ctx context.Context) ([]byte, error) {
		_, last = r.Do(ctx, "evt:ord-7:inner", []byte(`{}`), inner)
		return nil, transient("inner failed")
	}
	for range idem.DefaultMaxAttempts + 1 {
		_, _ = r.Do(idem.ContextWithSourceLimit(f.ctx(t, 30*time.Second)), "evt:ord-7:outer", []byte(`{}`), outer)
	}
	if !errors.Is(last, core.ErrRetriesExhausted) {
		t.Errorf("the handler's own call, after %d deliveries = %v; want the default bound's core.ErrRetriesExhausted", idem.DefaultMaxAttempts+1, last)
	}
}
