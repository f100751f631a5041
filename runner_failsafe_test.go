package idem_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// These tests guard the fail-safe rules: each reproduces a way the defaults
// once lost an event or ran a key twice.

// A retention shorter than the lease must not let a second execution start
// while the first holds a live lease.
func TestShortRetentionNeverFreesALiveLease(t *testing.T) {
	f := newFixture(t, idem.WithRetention(time.Minute))
	started, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	slow := func(ctx context.Context) ([]byte, error) {
		if runs.Add(1) == 1 {
			close(started)
			<-release
		}
		return []byte(`"done"`), nil
	}
	ctx := f.ctx(t, 15*time.Minute)
	done := make(chan error, 1)
	go func() {
		_, err := f.runner.Do(ctx, "evt:r1:notify", []byte(`{}`), slow)
		done <- err
	}()
	<-started
	f.clock.Advance(2 * time.Minute) // retention over, lease live
	_, err := f.runner.Do(ctx, "evt:r1:notify", []byte(`{}`), slow)
	close(release)
	if !errors.Is(err, core.ErrInProgress) {
		t.Errorf("second call past retention = %v, want core.ErrInProgress", err)
	}
	if err := <-done; err != nil {
		t.Errorf("first call = %v", err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

// Without a deadline, an in-process retry must not start when the lease has
// less left than a try needs.
func TestNoRetryAtTheEndOfTheLease(t *testing.T) {
	const lease = 15 * time.Minute
	f := newFixture(t, idem.WithLease(5*time.Second, lease))
	var runs atomic.Int32
	h := func(ctx context.Context) ([]byte, error) {
		if runs.Add(1) == 1 {
			f.clock.Advance(lease - 200*time.Millisecond) // a long first try
			return nil, transient("throttled")
		}
		return []byte(`"late"`), nil
	}
	_, err := f.runner.Do(context.Background(), "evt:r2:notify", []byte(`{}`), h)
	if !errors.Is(err, idem.ErrTransientFailure) {
		t.Errorf("Do = %v, want ErrTransientFailure (no room left for a retry)", err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1: a retry would outlive the lease", n)
	}
	rec, err := f.store.Get(context.Background(), "evt:r2:notify", f.clock.Now())
	if err != nil || rec.Status != core.StatusFailed || !rec.Retryable {
		t.Errorf("stored %v (%v), want a retryable failure for a later delivery", rec, err)
	}
}

var errCrash = errors.New("simulated crash")

// crashingDo runs Do and turns a panic of the handler into errCrash: the
// process died mid-execution, nothing after the panic ran.
func crashingDo(ctx context.Context, r *idem.Runner, key string, fn idem.Handler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errCrash
		}
	}()
	_, err = r.Do(ctx, key, []byte(`{}`), fn)
	return err
}

// WithMaxAttempts bounds the executions of a key, crashed holders
// included; a call's in-process retries are one execution.
func TestMaxAttemptsBoundsExecutionsAcrossCrashes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		crashOn func(run int32) bool
	}{
		{"crash during an in-process retry", func(run int32) bool { return run == 2 }},
		{"every execution crashes", func(int32) bool { return true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, idem.WithMaxAttempts(3), idem.WithRetry(3, base, maxDelay), idem.WithLease(time.Second, time.Minute))
			var runs atomic.Int32
			var executed []int // the deliveries that ran the handler
			delivery := 0
			h := func(ctx context.Context) ([]byte, error) {
				if len(executed) == 0 || executed[len(executed)-1] != delivery {
					executed = append(executed, delivery)
				}
				if tc.crashOn(runs.Add(1)) {
					panic(errCrash)
				}
				return nil, transient("unavailable")
			}
			var last error
			for ; delivery < 10; delivery++ {
				last = crashingDo(f.ctx(t, 30*time.Second), f.runner, "evt:r3:notify", h)
				f.clock.Advance(40 * time.Second) // past any lease
			}
			if len(executed) != 3 || runs.Load() > 3*3 {
				t.Errorf("deliveries %v ran the handler (%d runs) with WithMaxAttempts(3) and 3 tries a call; want 3 deliveries", executed, runs.Load())
			}
			if !errors.Is(last, core.ErrRetriesExhausted) {
				t.Errorf("last delivery = %v, want core.ErrRetriesExhausted", last)
			}
		})
	}
}

// Cancellation of the caller's context is no verdict on the handler.
func TestCancellationIsNeverStoredAsPermanent(t *testing.T) {
	for _, tc := range []struct {
		name string
		ret  func(ctx context.Context) error
	}{
		{"handler returns ctx.Err()", func(ctx context.Context) error { return ctx.Err() }},
		{"handler returns its own error after cancellation", func(ctx context.Context) error { return errors.New("query aborted") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx, cancel := context.WithCancel(f.ctx(t, 30*time.Second))
			var runs atomic.Int32
			_, err := f.runner.Do(ctx, "evt:r4:notify", []byte(`{}`), func(ctx context.Context) ([]byte, error) {
				runs.Add(1)
				cancel()
				return nil, tc.ret(ctx)
			})
			if errors.Is(err, core.ErrPermanentFailure) {
				t.Fatalf("cancelled call = %v, want no permanent failure", err)
			}
			out, err := f.runner.Do(f.ctx(t, 30*time.Second), "evt:r4:notify", []byte(`{}`), func(context.Context) ([]byte, error) {
				runs.Add(1)
				return []byte(`"ok"`), nil
			})
			if err != nil || out.Replayed || runs.Load() != 2 {
				t.Errorf("redelivery = %+v %v after %d runs, want a new execution", out, err, runs.Load())
			}
		})
	}
}

// The result cache must not share its buffer with callers.
func TestCacheCopiesResults(t *testing.T) {
	f := newFixture(t, idem.WithCache(16))
	buf := []byte(`"original"`)
	ctx := f.ctx(t, 30*time.Second)
	if _, err := f.runner.Do(ctx, "evt:r5:notify", []byte(`{}`), func(context.Context) ([]byte, error) { return buf, nil }); err != nil {
		t.Fatal(err)
	}
	copy(buf, `"mutated!"`) // a handler reusing a pooled buffer
	out, err := f.runner.Do(ctx, "evt:r5:notify", []byte(`{}`), nil2)
	if err != nil || string(out.Result) != `"original"` {
		t.Fatalf("replay after the handler reused its buffer = %q %v", out.Result, err)
	}
	copy(out.Result, `"edited!!"`) // a caller editing its Outcome
	out, _ = f.runner.Do(ctx, "evt:r5:notify", []byte(`{}`), nil2)
	if string(out.Result) != `"original"` {
		t.Fatalf("replay after a caller edited Outcome.Result = %q", out.Result)
	}
}

func nil2(context.Context) ([]byte, error) { return nil, errors.New("must not run") }

// Keys may be user data: a conflict's message carries its hash only.
func TestConflictErrorHidesTheKey(t *testing.T) {
	const key = "evt:customer-jane_example.com:notify"
	err := &idem.ConflictError{Existing: core.Record{Key: key, Status: core.StatusSucceeded}}
	if msg := err.Error(); strings.Contains(msg, "jane") || !strings.Contains(msg, idem.HashKey(key)) {
		t.Fatalf("ConflictError.Error() = %q, want the key's hash and not the key", msg)
	}
}
