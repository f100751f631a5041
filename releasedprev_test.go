package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
	"github.com/idemgo/idem/memstore"
)

// releasingStore is a store without the Acquirer capability, with steps,
// where an operator releases a retryable failure just after it refused a
// reservation: between a call's refused reservation (which read the
// failure) and its Reserve over that failure.
type releasingStore struct {
	s        *memstore.Store
	released int
}

func (r *releasingStore) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	err := r.s.Reserve(ctx, rec, prev, now)
	var ce *idem.ConflictError
	if errors.As(err, &ce) && ce.Existing.Status == core.StatusFailed && ce.Existing.Retryable {
		if rerr := r.s.Release(ctx, ce.Existing); rerr != nil {
			return rerr
		}
		r.released++
	}
	return err
}

func (r *releasingStore) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	return r.s.Complete(ctx, rec)
}

func (r *releasingStore) Get(ctx context.Context, key string, now time.Time) (core.Record, error) {
	return r.s.Get(ctx, key, now)
}

func (r *releasingStore) RecordStep(ctx context.Context, key, token string, step core.Step, now time.Time) error {
	return r.s.RecordStep(ctx, key, token, step, now)
}

// TestRetryOverAReleasedRecordStartsAfresh: a retry decided on a retryable
// failure with a step, which an operator releases before the retry's
// reservation over it, runs as the release meant: from nothing, at attempt
// 1, its step run again (the store refuses the reservation over the record
// that went, and the runner decides again), not resumed with the released
// record's step and count.
func TestRetryOverAReleasedRecordStartsAfresh(t *testing.T) {
	clock := fakeclock.New(t0)
	store := &releasingStore{s: memstore.New()}
	r, err := idem.New(store, idem.WithClock(clock.Now), idem.WithSleep(clock.Sleep), idem.WithRetry(1, base, maxDelay),
		idem.WithMaxAttempts(5), idem.WithRetention(time.Hour), idem.WithLease(time.Second, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	charges := 0
	handler := func(fail bool) idem.Handler {
		return func(ctx context.Context) ([]byte, error) {
			if _, err := idem.Step(ctx, "charge", func(context.Context) ([]byte, error) {
				charges++
				return []byte(`"ch_1"`), nil
			}); err != nil {
				return nil, err
			}
			if fail {
				return nil, core.MarkTransient(errors.New("mail server busy"))
			}
			return []byte(`"sent"`), nil
		}
	}
	if out, err := r.Do(context.Background(), "evt:released:1", []byte(`{}`), handler(true)); out.Verdict != idem.FailedTransiently {
		t.Fatalf("first call = %v, %v; want failed_transiently", out.Verdict, err)
	}
	clock.Advance(time.Second)
	out, err := r.Do(context.Background(), "evt:released:1", []byte(`{}`), handler(false))
	if err != nil || out.Verdict != idem.Executed || store.released != 1 {
		t.Fatalf("retry = %v, %v (%d releases); want executed after one release", out.Verdict, err, store.released)
	}
	if out.Attempts != 1 || charges != 2 {
		t.Errorf("retry over the released failure: attempt %d, the step ran %d times in all; want attempt 1 and the step run again (2): "+
			"the release is undone if the retry carries the released record's count and step", out.Attempts, charges)
	}
	got, err := store.Get(context.Background(), "evt:released:1", clock.Now())
	if err != nil || got.Status != core.StatusSucceeded || got.Attempts != 1 {
		t.Errorf("stored = %v, %v; want succeeded at attempt 1", got, err)
	}
}
