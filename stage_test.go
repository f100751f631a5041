package idem_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/memstore"
)

// ledger is the business data of the staging tests: the entries that
// staged writes applied.
type ledger struct{ entries []string }

func (l *ledger) add(entry string) memstore.Write {
	return memstore.Write{Apply: func() { l.entries = append(l.entries, entry) }}
}

// stagingCounter counts the completions of a memstore.Store by kind.
type stagingCounter struct {
	*memstore.Store
	completes, staged atomic.Int32
}

func (s *stagingCounter) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	s.completes.Add(1)
	return s.Store.Complete(ctx, rec)
}

func (s *stagingCounter) CompleteStaged(ctx context.Context, rec core.Record, staged []any) (core.Record, error) {
	s.staged.Add(1)
	return s.Store.CompleteStaged(ctx, rec, staged)
}

// plainStore is a store without the staging capability.
type plainStore struct{ idem.Store }

func newStagingFixture(t *testing.T, opts ...idem.Option) (*fixture, *stagingCounter) {
	f := newFixture(t)
	cs := &stagingCounter{Store: f.store}
	all := append([]idem.Option{
		idem.WithClock(f.clock.Now), idem.WithSleep(f.clock.Sleep),
		idem.WithRand(func() float64 { return 0 }), idem.WithRetry(3, base, maxDelay), idem.WithMaxAttempts(5),
	}, opts...)
	r, err := idem.New(cs, all...)
	if err != nil {
		t.Fatal(err)
	}
	f.runner = r
	return f, cs
}

func TestStagedWritesCommitWithTheSuccess(t *testing.T) {
	f, cs := newStagingFixture(t)
	var l ledger
	out, err := f.runner.Do(f.ctx(t, 30*time.Second), "order:001", []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		if err := memstore.Stage(ctx, l.add("debit"), l.add("credit")); err != nil {
			return nil, err
		}
		if len(l.entries) != 0 {
			t.Errorf("entries %v applied at Stage, want none before the commit", l.entries)
		}
		return []byte(`{"ok":true}`), nil
	})
	if err != nil || out.Verdict != idem.Executed {
		t.Fatalf("Do = %+v, %v; want executed", out, err)
	}
	if len(l.entries) != 2 || l.entries[0] != "debit" || l.entries[1] != "credit" {
		t.Fatalf("entries = %v, want [debit credit]", l.entries)
	}
	if cs.staged.Load() != 1 || cs.completes.Load() != 0 {
		t.Fatalf("CompleteStaged %d, Complete %d; want 1 and 0", cs.staged.Load(), cs.completes.Load())
	}
}

func TestNoStagedWritesCompletesPlainly(t *testing.T) {
	f, cs := newStagingFixture(t)
	if err := f.do("order:002", `{}`, func(ctx context.Context) ([]byte, error) { return []byte(`1`), nil }); err != nil {
		t.Fatal(err)
	}
	if cs.staged.Load() != 0 || cs.completes.Load() != 1 {
		t.Fatalf("CompleteStaged %d, Complete %d; want 0 and 1", cs.staged.Load(), cs.completes.Load())
	}
}

func TestStagedConditionFailureIsThePermanentFailureOfTheHandler(t *testing.T) {
	f, _ := newStagingFixture(t)
	var l ledger
	insufficient := errors.New("insufficient funds")
	h := func(ctx context.Context) ([]byte, error) {
		err := memstore.Stage(ctx, l.add("debit"), memstore.Write{Cond: func() error { return insufficient }})
		return []byte(`{"ok":true}`), err
	}
	out, err := f.runner.Do(f.ctx(t, 30*time.Second), "order:003", []byte(`{}`), h)
	var sw *idem.StagedWriteError
	if out.Verdict != idem.FailedPermanently || !errors.As(err, &sw) || sw.Index != 1 ||
		!errors.Is(err, idem.ErrStagedConditionFailed) || !errors.Is(err, insufficient) || !errors.Is(err, core.ErrPermanentFailure) {
		t.Fatalf("Do = %+v, %v; want failed_permanently with the staged write 1's condition", out, err)
	}
	if len(l.entries) != 0 {
		t.Fatalf("entries = %v, want none (the commit was refused as a whole)", l.entries)
	}
	rec, err := f.store.Get(context.Background(), "order:003", f.clock.Now())
	if err != nil || rec.Status != core.StatusFailed || rec.Retryable {
		t.Fatalf("record = %+v, %v; want a permanent failure", rec, err)
	}
}

func TestTransientStagedConditionRetriesWithAnEmptyStage(t *testing.T) {
	f, _ := newStagingFixture(t)
	var l ledger
	var tries atomic.Int32
	h := func(ctx context.Context) ([]byte, error) {
		n := tries.Add(1)
		w := l.add("debit")
		if n == 1 {
			w.Cond = func() error { return core.MarkTransient(errors.New("balance locked")) }
		}
		return []byte(`1`), memstore.Stage(ctx, w)
	}
	out, err := f.runner.Do(f.ctx(t, 30*time.Second), "order:004", []byte(`{}`), h)
	if err != nil || out.Verdict != idem.Executed || out.Attempts != 1 || tries.Load() != 2 {
		t.Fatalf("Do = %+v, %v after %d tries; want executed at attempt 1 after 2 tries", out, err, tries.Load())
	}
	if len(l.entries) != 1 {
		t.Fatalf("entries = %v, want one debit (the first try's stage discarded)", l.entries)
	}
}

func TestFailureDiscardsStagedWrites(t *testing.T) {
	tests := []struct {
		name string
		herr error
		want idem.Verdict
	}{
		{"permanent failure", core.MarkPermanent(errors.New("bad order")), idem.FailedPermanently},
		{"unclassified failure", errors.New("bad order"), idem.FailedUnclassified},
		{"transient failure then success", core.MarkTransient(errors.New("503")), idem.Executed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := newStagingFixture(t)
			var l ledger
			var tries atomic.Int32
			h := func(ctx context.Context) ([]byte, error) {
				n := tries.Add(1)
				if err := memstore.Stage(ctx, l.add("try")); err != nil {
					return nil, err
				}
				if n == 1 {
					return nil, tt.herr
				}
				return []byte(`1`), nil
			}
			out, _ := f.runner.Do(f.ctx(t, 30*time.Second), "order:005", []byte(`{}`), h)
			if out.Verdict != tt.want {
				t.Fatalf("verdict = %s, want %s", out.Verdict, tt.want)
			}
			want := int(tries.Load()) - 1 // every try but the failed first
			if len(l.entries) != want {
				t.Fatalf("entries = %v after %d tries, want %d", l.entries, tries.Load(), want)
			}
		})
	}
}

func TestStageRefusals(t *testing.T) {
	f, _ := newStagingFixture(t)
	var leaked context.Context
	var malformed, empty error
	err := f.do("order:006", `{}`, func(ctx context.Context) ([]byte, error) {
		leaked = ctx
		malformed = idem.Stage(ctx, "not a memstore.Write")
		empty = memstore.Stage(ctx, memstore.Write{})
		return []byte(`1`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var sw *idem.StagedWriteError
	if !errors.As(malformed, &sw) || sw.Index != 0 {
		t.Errorf("Stage of a string = %v, want *StagedWriteError at 0", malformed)
	}
	if !errors.As(empty, &sw) {
		t.Errorf("Stage of an empty Write = %v, want *StagedWriteError", empty)
	}
	if err := memstore.Stage(leaked, memstore.Write{Apply: func() {}}); !errors.Is(err, idem.ErrStageClosed) {
		t.Errorf("Stage after the handler returned = %v, want ErrStageClosed", err)
	}
	if err := memstore.Stage(context.Background(), memstore.Write{Apply: func() {}}); !errors.Is(err, idem.ErrNoStaging) {
		t.Errorf("Stage outside a handler = %v, want ErrNoStaging", err)
	}
	r, err := idem.New(plainStore{memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	var plain error
	_, _ = r.Do(context.Background(), "order:007", []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		plain = memstore.Stage(ctx, memstore.Write{Apply: func() {}})
		return nil, nil
	})
	if !errors.Is(plain, idem.ErrNoStaging) {
		t.Errorf("Stage over a store without staging = %v, want ErrNoStaging", plain)
	}
}
