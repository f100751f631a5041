package idem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/memstore"
)

func TestStepOutsideAnExecution(t *testing.T) {
	ran := 0
	got, err := idem.Step(context.Background(), "charge", func(context.Context) ([]byte, error) {
		ran++
		return []byte("ch_1"), nil
	})
	if err != nil || string(got) != "ch_1" || ran != 1 {
		t.Fatalf("Step on a plain context = %q, %v, ran %d; want ch_1, nil, 1", got, err, ran)
	}
	if _, err := idem.DownstreamKey(context.Background(), "stripe"); !errors.Is(err, idem.ErrNoExecution) {
		t.Fatalf("DownstreamKey on a plain context = %v, want ErrNoExecution", err)
	}
	if _, err := idem.DownstreamUUID(context.Background(), "stripe"); !errors.Is(err, idem.ErrNoExecution) {
		t.Fatalf("DownstreamUUID on a plain context = %v, want ErrNoExecution", err)
	}
}

func TestStepDisabledRunsFn(t *testing.T) {
	t.Setenv(idem.EnvDisabled, "1")
	r, err := idem.New(memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	var down string
	var downErr error
	out, err := r.Do(context.Background(), "evt:disabled:1", []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		down, downErr = idem.DownstreamKey(ctx, "stripe")
		return idem.Step(ctx, "charge", func(context.Context) ([]byte, error) { ran++; return []byte("x"), nil })
	})
	if err != nil || string(out.Result) != "x" || ran != 1 {
		t.Fatalf("Do disabled = %q, %v, step ran %d; want x, nil, 1", out.Result, err, ran)
	}
	if want := core.DownstreamKey("evt:disabled:1", "stripe"); down != want || downErr != nil {
		t.Fatalf("DownstreamKey disabled = %q, %v; want %q, the key idem gives when enabled", down, downErr, want)
	}
}

// noSteps is a store without the StepRecorder capability.
type noSteps struct{ idem.Store }

func TestStepUnsupportedStoreDoesNotRun(t *testing.T) {
	r, err := idem.New(noSteps{memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	var stepErr error
	_, err = r.Do(context.Background(), "evt:unsupported:1", []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		_, stepErr = idem.Step(ctx, "charge", func(context.Context) ([]byte, error) { ran++; return nil, nil })
		return nil, stepErr
	})
	if !errors.Is(stepErr, idem.ErrStepsUnsupported) || ran != 0 {
		t.Fatalf("Step with a store without steps = %v, ran %d; want ErrStepsUnsupported, 0", stepErr, ran)
	}
	if !errors.Is(err, core.ErrPermanentFailure) {
		t.Fatalf("Do = %v, want a permanent failure", err)
	}
}

func TestStepNames(t *testing.T) {
	tests := []struct {
		name    string
		handler func(ctx context.Context, run func(name string) error) error
		want    error
		runs    int
	}{
		{"invalid name", func(ctx context.Context, run func(string) error) error { return run("send email") }, core.ErrInvalidStepName, 0},
		{"empty name", func(ctx context.Context, run func(string) error) error { return run("") }, core.ErrInvalidStepName, 0},
		{"name used twice", func(ctx context.Context, run func(string) error) error {
			if err := run("charge"); err != nil {
				return err
			}
			return run("charge")
		}, idem.ErrStepRepeated, 1},
		{"distinct names", func(ctx context.Context, run func(string) error) error {
			return errors.Join(run("charge:1"), run("charge:2"))
		}, nil, 2},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			runs := 0
			var stepErr error
			_ = f.do(fmt.Sprintf("evt:names:%d", i), `{}`, func(ctx context.Context) ([]byte, error) {
				stepErr = tc.handler(ctx, func(name string) error {
					_, err := idem.Step(ctx, name, func(context.Context) ([]byte, error) { runs++; return nil, nil })
					return err
				})
				return nil, stepErr
			})
			if !errors.Is(stepErr, tc.want) || (tc.want == nil && stepErr != nil) || runs != tc.runs {
				t.Fatalf("steps = %v, ran %d; want %v, %d", stepErr, runs, tc.want, tc.runs)
			}
		})
	}
}

// TestStepFailedFnIsNotRecorded: an error of fn is returned as it is, the
// step is not recorded, and the same name may run again in the execution.
func TestStepFailedFnIsNotRecorded(t *testing.T) {
	f := newFixture(t)
	declined := errors.New("card declined")
	runs := 0
	charge := func(context.Context) ([]byte, error) {
		runs++
		if runs == 1 {
			return nil, declined
		}
		return []byte("ch_2"), nil
	}
	var first, second error
	var got []byte
	err := f.do("evt:failedstep:1", `{}`, func(ctx context.Context) ([]byte, error) {
		_, first = idem.Step(ctx, "charge", charge)
		got, second = idem.Step(ctx, "charge", charge)
		return got, second
	})
	if !errors.Is(first, declined) || second != nil || string(got) != "ch_2" || err != nil {
		t.Fatalf("steps = %v then %q, %v; Do = %v; want the declined error, then ch_2 and nil", first, got, second, err)
	}
}

func TestStepAfterTheHandlerReturned(t *testing.T) {
	f := newFixture(t)
	var kept context.Context
	if err := f.do("evt:late:1", `{}`, func(ctx context.Context) ([]byte, error) { kept = ctx; return nil, nil }); err != nil {
		t.Fatal(err)
	}
	ran := false
	_, err := idem.Step(kept, "late", func(context.Context) ([]byte, error) { ran = true; return nil, nil })
	if !errors.Is(err, idem.ErrNoExecution) || ran {
		t.Fatalf("Step after the handler returned = %v, ran %v; want ErrNoExecution without running", err, ran)
	}
}

// TestStepAfterTheExecutionsTime: a step whose fn ends after the
// execution's time (the deadline) is not recorded, and one that would start
// after it does not run: the lease may end before the work or the write is
// done.
func TestStepAfterTheExecutionsTime(t *testing.T) {
	f := newFixture(t)
	var stepErr error
	_ = f.do("evt:overtime:1", `{}`, func(ctx context.Context) ([]byte, error) {
		_, stepErr = idem.Step(ctx, "charge", func(context.Context) ([]byte, error) {
			f.clock.Advance(31 * time.Second)
			return []byte("ch_1"), nil
		})
		return nil, stepErr
	})
	if !errors.Is(stepErr, idem.ErrLeaseLost) || core.Classify(stepErr) != core.Transient {
		t.Fatalf("Step ending after the deadline = %v, want a transient ErrLeaseLost", stepErr)
	}
	ran := false
	_ = f.do("evt:overtime:2", `{}`, func(ctx context.Context) ([]byte, error) {
		f.clock.Advance(31 * time.Second)
		_, stepErr = idem.Step(ctx, "charge", func(context.Context) ([]byte, error) { ran = true; return nil, nil })
		return nil, stepErr
	})
	if !errors.Is(stepErr, idem.ErrLeaseLost) || ran {
		t.Fatalf("Step starting after the deadline = %v, ran %v; want ErrLeaseLost without running", stepErr, ran)
	}
}

func TestStepStoreCallsCounted(t *testing.T) {
	var obs idem.Observation
	f := newFixture(t, idem.WithObserver(idem.ObserverFunc(func(_ context.Context, o idem.Observation) { obs = o })))
	err := f.do("evt:calls:1", `{}`, func(ctx context.Context) ([]byte, error) {
		for _, name := range []string{"a", "b", "c"} {
			if _, err := idem.Step(ctx, name, func(context.Context) ([]byte, error) { return nil, nil }); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	if err != nil || obs.StoreCalls != 5 {
		t.Fatalf("Do = %v with %d store calls, want nil and 5 (reserve, 3 steps, complete)", err, obs.StoreCalls)
	}
}

// TestStepsConcurrent: steps run by the handler's goroutines are all
// recorded (run with -race).
func TestStepsConcurrent(t *testing.T) {
	f := newFixture(t)
	const n = 16
	var failed *core.Record
	err := f.do("evt:concurrent:1", `{}`, func(ctx context.Context) ([]byte, error) {
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = idem.Step(ctx, fmt.Sprintf("s%d", i), func(context.Context) ([]byte, error) { return []byte{byte(i)}, nil })
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		return nil, core.MarkRetryLater(errors.New("stop here")) // a retryable failure keeps the steps
	})
	if !errors.Is(err, idem.ErrTransientFailure) {
		t.Fatalf("Do = %v, want the transient failure", err)
	}
	rec, gerr := f.store.Get(context.Background(), "evt:concurrent:1", f.clock.Now())
	failed = &rec
	if gerr != nil || len(failed.Steps) != n {
		t.Fatalf("stored failure has %d steps (%v), want %d", len(failed.Steps), gerr, n)
	}
}

func TestDownstreamKeyOfTheExecution(t *testing.T) {
	f := newFixture(t)
	var keys []string
	handler := func(ctx context.Context) ([]byte, error) {
		k, err := idem.DownstreamKey(ctx, "stripe")
		if err != nil {
			return nil, err
		}
		u, err := idem.DownstreamUUID(ctx, "stripe")
		if err != nil {
			return nil, err
		}
		keys = append(keys, k, u)
		if len(keys) == 2 {
			return nil, core.MarkTransient(errors.New("try again"))
		}
		return nil, nil
	}
	if err := f.do("evt:downstream:1", `{}`, handler); err != nil {
		t.Fatal(err)
	}
	want := []string{core.DownstreamKey("evt:downstream:1", "stripe"), core.DownstreamUUID("evt:downstream:1", "stripe")}
	if len(keys) != 4 || keys[0] != want[0] || keys[1] != want[1] || keys[2] != want[0] || keys[3] != want[1] {
		t.Fatalf("downstream keys of two tries = %q, want %q twice", keys, want)
	}
}

// failingSteps is a memstore whose first fail step writes fail
// transiently: applied with their answer lost (applied), or not applied
// (throttled).
type failingSteps struct {
	*memstore.Store
	applied bool
	fail    *int
}

func (s failingSteps) RecordStep(ctx context.Context, key, token string, step core.Step, now time.Time) error {
	if *s.fail == 0 {
		return s.Store.RecordStep(ctx, key, token, step, now)
	}
	*s.fail--
	if !s.applied {
		return core.MarkTransient(errors.New("step write throttled"))
	}
	if err := s.Store.RecordStep(ctx, key, token, step, now); err != nil {
		return err
	}
	return core.MarkTransient(errors.New("step answer lost"))
}

// TestStepWriteFailedBeforeARetry: a step whose write failed transiently
// (it may have been applied) returns the error, and the step counts as
// completed in the execution: its function never runs again. The next try
// of the call, under the same reservation, writes the step again before it
// skips it (recognised if it was applied), so that a step is skipped only
// with a result the store holds; while that write fails, the step is not
// skipped, and the failure recorded for the call keeps the step for the
// next delivery.
func TestStepWriteFailedBeforeARetry(t *testing.T) {
	tests := []struct {
		name    string
		applied bool
		fail    int   // step writes that fail
		want    error // the first call's error
	}{
		{name: "applied, answer lost", applied: true, fail: 2},
		{name: "not applied", fail: 2},
		{name: "answers lost until the call ends", applied: true, fail: 6, want: idem.ErrTransientFailure},
		{name: "not applied until the call ends", fail: 6, want: idem.ErrTransientFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			fail := tt.fail
			r, err := idem.New(failingSteps{f.store, tt.applied, &fail}, idem.WithClock(f.clock.Now), idem.WithSleep(f.clock.Sleep),
				idem.WithRetry(3, base, maxDelay), idem.WithCompletionAttempts(2))
			if err != nil {
				t.Fatal(err)
			}
			const key = "evt:failed-step:1"
			charges, tries := 0, 0
			handler := func(ctx context.Context) ([]byte, error) {
				tries++
				res, err := idem.Step(ctx, "charge", func(context.Context) ([]byte, error) { charges++; return []byte("ch_1"), nil })
				if err == nil && tries > 1 {
					rec, gerr := f.store.Get(ctx, key, f.clock.Now())
					if gerr != nil || len(rec.Steps) != 1 || string(rec.Steps[0].Result) != "ch_1" {
						t.Errorf("try %d skipped step charge with %q; the store holds %v, %v; want the step recorded", tries, res, rec, gerr)
					}
				}
				return res, err
			}
			out, err := r.Do(f.ctx(t, 30*time.Second), key, []byte(`{}`), handler)
			if charges != 1 || tt.want == nil && (err != nil || string(out.Result) != "ch_1") || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Do = %q, %v after %d tries; charge ran %d times; want ch_1 or %v, charged once", out.Result, err, tries, charges, tt.want)
			}
			if tt.want == nil {
				return
			}
			fail, tries = 0, 0
			out, err = r.Do(f.ctx(t, 30*time.Second), key, []byte(`{}`), handler)
			if err != nil || string(out.Result) != "ch_1" || charges != 1 {
				t.Fatalf("next Do = %q, %v; charge ran %d times; want ch_1 from the step the failure kept, charged once", out.Result, err, charges)
			}
		})
	}
}

// cancelledStepAnswers applies a step, then, as a caller hanging up while
// the request is in flight (or a renewal goroutine that lost the lease),
// cancels the handler's context and answers with the context's error, as
// the AWS SDK does for a request its context abandoned.
type cancelledStepAnswers struct {
	*memstore.Store
	cancel context.CancelFunc
}

func (s cancelledStepAnswers) RecordStep(ctx context.Context, key, token string, step core.Step, now time.Time) error {
	if err := s.Store.RecordStep(ctx, key, token, step, now); err != nil {
		return err
	}
	s.cancel()
	<-ctx.Done()
	return fmt.Errorf("operation error DynamoDB: UpdateItem: %w", ctx.Err())
}

// TestStepWriteCancelledAfterApplied: a step whose write was applied but
// whose answer was lost to the cancellation of the handler's context
// counts as completed: the failure recorded for the execution keeps it, and
// the next execution of the key does not run it again.
func TestStepWriteCancelledAfterApplied(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := memstore.New()
	r, err := idem.New(cancelledStepAnswers{store, cancel})
	if err != nil {
		t.Fatal(err)
	}
	charges := 0
	handler := func(ctx context.Context) ([]byte, error) {
		return idem.Step(ctx, "charge", func(context.Context) ([]byte, error) { charges++; return []byte("ch_1"), nil })
	}
	if _, err := r.Do(ctx, "evt:cancelled-step:1", []byte(`{}`), handler); !errors.Is(err, idem.ErrTransientFailure) {
		t.Fatalf("first Do = %v, want a transient failure (the caller hung up)", err)
	}
	r2, err := idem.New(store)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r2.Do(context.Background(), "evt:cancelled-step:1", []byte(`{}`), handler)
	if err != nil || string(out.Result) != "ch_1" || charges != 1 {
		t.Fatalf("second Do = %q, %v; charge ran %d times; want ch_1, nil, charged once", out.Result, err, charges)
	}
}

// TestReleaseDuringABackoffIsNotUndone: an operator releases the record of
// a call while it waits to retry in-process: the retry runs under the
// released reservation, whose writes are refused (nothing brings the
// released record back, its steps and count), and the next delivery starts
// a new record lifetime (attempt 1, no step carried).
func TestReleaseDuringABackoffIsNotUndone(t *testing.T) {
	f := newFixture(t)
	const key = "evt:released-retry:1"
	sleep := func(ctx context.Context, d time.Duration) error {
		rec, err := f.store.Get(ctx, key, f.clock.Now())
		if err != nil {
			return err
		}
		if err := f.store.Release(ctx, rec); err != nil {
			return err
		}
		return f.clock.Sleep(ctx, d)
	}
	r, err := idem.New(f.store, idem.WithClock(f.clock.Now), idem.WithSleep(sleep), idem.WithRetry(2, base, maxDelay))
	if err != nil {
		t.Fatal(err)
	}
	charges, calls := 0, 0
	handler := func(ctx context.Context) ([]byte, error) {
		res, err := idem.Step(ctx, "charge", func(context.Context) ([]byte, error) {
			charges++
			return []byte(fmt.Sprintf("ch_%d", charges)), nil
		})
		if err == nil && calls == 1 {
			return nil, core.MarkTransient(errors.New("try again"))
		}
		return res, err
	}
	calls++
	_, err = r.Do(f.ctx(t, 30*time.Second), key, []byte(`{}`), handler)
	if !errors.Is(err, idem.ErrTransientFailure) || !errors.Is(err, idem.ErrLeaseLost) || charges != 1 {
		t.Fatalf("first Do = %v, charge ran %d times; want a transient failure whose record was refused (lease lost), charged once", err, charges)
	}
	if rec, err := f.store.Get(context.Background(), key, f.clock.Now()); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("after the call: %v, %v; want no record: the release is not undone", rec, err)
	}
	calls++
	out, err := r.Do(f.ctx(t, 30*time.Second), key, []byte(`{}`), handler)
	if err != nil || out.Attempts != 1 || string(out.Result) != "ch_2" || charges != 2 {
		t.Fatalf("next Do = %q attempt %d, %v; charge ran %d times; want ch_2 at attempt 1 of a new lifetime, charged again", out.Result, out.Attempts, err, charges)
	}
}
