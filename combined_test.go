package idem_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
	"github.com/idemgo/idem/memstore"
)

// The tests of this file run capabilities together: steps, waits and
// takeovers under lease renewal.

// TestStepUnderRenewal: a step called after the first reservation's lease
// has ended, while renewals hold the key, runs and is recorded; once the
// lease is lost, a step neither runs nor is recorded.
func TestStepUnderRenewal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fail     func(n int) error // the renewals' answers (nil: the store's)
		wantRuns int
		wantErr  error
	}{
		{"after three renewals: run and recorded", nil, 1, nil},
		{"after the lease was lost: refused", func(int) error { return fmt.Errorf("taken over: %w", idem.ErrLeaseLost) }, 0, idem.ErrLeaseLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRenewFixture(t)
			f.store.fail = tc.fail
			key := "evt:renew:step"
			runs := 0
			var stepErr error
			var steps []core.Step
			_, _ = f.r.Do(context.Background(), key, []byte(`{}`), func(ctx context.Context) ([]byte, error) {
				for range 3 { // t0+30s: past the first reservation's lease (t0+22s)
					if f.run(ctx, 1, every) != nil {
						break
					}
				}
				var res []byte
				res, stepErr = idem.Step(ctx, "charge", func(context.Context) ([]byte, error) {
					runs++
					return []byte(`"ch_1"`), nil
				})
				if rec, err := f.store.Get(context.Background(), key, f.clock.Now()); err == nil {
					steps = rec.Steps
				}
				return res, stepErr
			})
			if runs != tc.wantRuns || !errors.Is(stepErr, tc.wantErr) || (tc.wantErr == nil && stepErr != nil) {
				t.Fatalf("Step at t0+30s ran %d times and returned %v; want %d runs and %v", runs, stepErr, tc.wantRuns, tc.wantErr)
			}
			if wantSteps := tc.wantRuns; len(steps) != wantSteps {
				t.Errorf("stored steps after the step = %v, want %d", steps, wantSteps)
			}
		})
	}
}

// overlap checks that no handler's context is live once another execution
// of its key has started: each tracked handler, when it starts, finds the
// contexts of the running handlers of its key done. Safe for concurrent
// use; mu guards running and violations.
type overlap struct {
	clock      *fakeclock.Clock
	mu         sync.Mutex
	running    map[string][]*tracked
	violations []string
}

type tracked struct {
	name string
	ctx  context.Context
}

func newOverlap(clock *fakeclock.Clock) *overlap {
	return &overlap{clock: clock, running: map[string][]*tracked{}}
}

// track returns fn, checked against the other handlers of key tracked.
func (o *overlap) track(key, name string, fn idem.Handler) idem.Handler {
	return func(ctx context.Context) ([]byte, error) {
		me := &tracked{name: name, ctx: ctx}
		o.mu.Lock()
		for _, other := range o.running[key] {
			if other.ctx.Err() == nil {
				o.violations = append(o.violations, fmt.Sprintf("%s started at %s while the context of %s was live",
					name, o.clock.Now().Format(time.TimeOnly), other.name))
			}
		}
		o.running[key] = append(o.running[key], me)
		o.mu.Unlock()
		defer func() {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.running[key] = deleteTracked(o.running[key], me)
		}()
		return fn(ctx)
	}
}

func deleteTracked(all []*tracked, me *tracked) []*tracked {
	for i, x := range all {
		if x == me {
			return append(all[:i], all[i+1:]...)
		}
	}
	return all
}

func (o *overlap) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, v := range o.violations {
		t.Error(v)
	}
}

// TestNoOverlapUnderRenewal: under lease renewal, a holder's context is
// cancelled before another execution of its key can start, whether the
// holder took the key over after waiting for it or its renewals fail. A
// second runner tries the key every second while the holder runs; the
// invariant is checked each time a handler starts.
func TestNoOverlapUnderRenewal(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []idem.Option
		// setup prepares the store (crashed holders) and the renewals.
		setup func(t *testing.T, f *renewFixture, key, fp string)
		// wantOther is the verdict the second runner's last try gets.
		wantOther idem.Verdict
	}{
		{
			name: "waited, took a crashed holder's key over, renewed",
			opts: []idem.Option{idem.WithWait(time.Minute)},
			setup: func(t *testing.T, f *renewFixture, key, fp string) {
				rec := core.Reserve(key, fp, "crashed", nil, t0, t0.Add(15*time.Second), time.Hour)
				if err := f.store.Reserve(context.Background(), rec, nil, t0); err != nil {
					t.Fatal(err)
				}
			},
			wantOther: idem.InProgress,
		},
		{
			name: "renewals fail until the lease's end: cancelled, then taken over",
			setup: func(_ *testing.T, f *renewFixture, _, _ string) {
				f.store.fail = func(int) error { return core.MarkTransient(errors.New("unreachable")) }
			},
			wantOther: idem.Executed,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRenewFixture(t, tc.opts...)
			o := newOverlap(f.clock)
			key, payload := "evt:overlap:1", []byte(`{"n":1}`)
			fp, err := core.Fingerprint(payload)
			if err != nil {
				t.Fatal(err)
			}
			tc.setup(t, f, key, fp)
			other, err := idem.New(f.store.Store, idem.WithClock(f.clock.Now), idem.WithLease(margin, time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			started, release := make(chan context.Context, 1), make(chan struct{})
			done := make(chan error, 1)
			go func() {
				_, err := f.r.Do(context.Background(), key, payload, o.track(key, "the holder", func(ctx context.Context) ([]byte, error) {
					started <- ctx
					select {
					case <-release:
						return []byte(`"holder"`), nil
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}))
				done <- err
			}()
			hctx := driveUntilStarted(t, f.clock, started, done)
			var last idem.Verdict
			for range 40 {
				_ = f.clock.WaitBlocked(hctx, 1) // the renewals are due again, or the holder was cancelled
				out, _ := other.Do(context.Background(), key, payload, o.track(key, "the second runner", func(context.Context) ([]byte, error) {
					return []byte(`"other"`), nil
				}))
				if last = out.Verdict; last == idem.Executed {
					break
				}
				f.clock.Advance(time.Second)
			}
			close(release)
			holderErr := <-done
			o.check(t)
			if last != tc.wantOther {
				t.Errorf("the second runner's last verdict = %s, want %s (the holder's Do returned %v)", last, tc.wantOther, holderErr)
			}
		})
	}
}

// driveUntilStarted moves the clock by a second each time a goroutine waits
// on it, until a handler sends its context on started. The call fails the
// test if it ends first (its error on done).
func driveUntilStarted(t *testing.T, clock *fakeclock.Clock, started <-chan context.Context, done <-chan error) context.Context {
	t.Helper()
	for range 600 {
		blocked := make(chan error, 1)
		wctx, cancel := context.WithCancel(context.Background())
		go func() { blocked <- clock.WaitBlocked(wctx, 1) }()
		select {
		case ctx := <-started:
			cancel()
			return ctx
		case err := <-done:
			cancel()
			t.Fatalf("the call ended before its handler started: %v", err)
		case err := <-blocked:
			cancel()
			if err != nil {
				t.Fatalf("waiting for a goroutine to block on the clock: %v", err)
			}
			clock.Advance(time.Second)
		}
	}
	t.Fatal("the handler did not start within 600 s of the fake clock")
	return nil
}

// TestLostLeaseMessage: a lease that ends before its first renewal could
// be tried (the renewal came too late) is reported without a missing
// error in the message: in the context's cause, Do's error and the log.
func TestLostLeaseMessage(t *testing.T) {
	var logs bytes.Buffer
	f := newRenewFixture(t, idem.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	var cause error
	_, err := f.r.Do(context.Background(), "evt:renew:late", []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		if err := f.clock.WaitBlocked(ctx, 1); err != nil {
			return nil, err
		}
		f.clock.Advance(term) // past the lease's end less the margin before the renewal ran
		<-ctx.Done()
		cause = context.Cause(ctx)
		return nil, ctx.Err()
	})
	if !errors.Is(cause, idem.ErrLeaseLost) || !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("cause %v, Do's error %v; want both wrapping ErrLeaseLost", cause, err)
	}
	for what, msg := range map[string]string{"cause": cause.Error(), "Do's error": err.Error(), "log": logs.String()} {
		if strings.Contains(msg, "%!") || !strings.Contains(msg, "without a renewal") {
			t.Errorf("%s = %q; want the lease's end without a renewal, and no formatting error", what, msg)
		}
	}
}

// TestWaitThroughRenewals: with renewal on, a waiting call waits for its
// whole bound while the holder (another process) renews its lease, and
// replays the holder's outcome.
func TestWaitThroughRenewals(t *testing.T) {
	const interval = 500 * time.Millisecond
	clock := fakeclock.New(t0)
	store := memstore.New()
	r, err := idem.New(store, idem.WithClock(clock.Now), idem.WithSleep(clock.Block), idem.WithRand(func() float64 { return 0.5 }),
		idem.WithLease(margin, time.Hour), idem.WithLeaseRenewal(interval), idem.WithWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(waitPayload)
	held := holdKey(t, store, t0.Add(2*interval+margin))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		out idem.Outcome
		err error
	}
	done := make(chan result, 1)
	runs := 0
	go func() {
		out, err := r.Do(ctx, waitKey, payload, func(context.Context) ([]byte, error) { runs++; return []byte(`"mine"`), nil })
		done <- result{out, err}
		cancel()
	}()
	// The holder renews every interval and succeeds at t0+3s.
	for step := time.Duration(0); ; step += 100 * time.Millisecond {
		if clock.WaitBlocked(ctx, 1) != nil {
			break
		}
		now := clock.Now()
		switch {
		case step == 3*time.Second:
			if _, err := store.Complete(context.Background(), core.Succeed(held, []byte(`"done"`), now, time.Hour)); err != nil {
				t.Fatal(err)
			}
		case step < 3*time.Second && step%interval == 0:
			if held, err = store.RenewLease(context.Background(), held, now.Add(2*interval+margin), now); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(100 * time.Millisecond)
	}
	got := <-done
	if got.err != nil || got.out.Verdict != idem.Replayed || !got.out.Waited || string(got.out.Result) != `"done"` || runs != 0 {
		t.Fatalf("Do = %s, %v, waited %v, result %q after %d runs; want the holder's outcome replayed after waiting, no run",
			got.out.Verdict, got.err, got.out.Waited, got.out.Result, runs)
	}
}

// capabilities are the rows' names of the table of pairs in
// docs/effectively-once.md ("Capabilities together").
var capabilities = []string{"one-write reservation", "staged completion", "steps", "downstream keys",
	"lease renewal", "bounded wait", "large results", "local cache", "memory of keys in progress", "redisstore"}

// TestCapabilityPairs checks the table of pairs of docs/effectively-once.md:
// every pair of capabilities once, each answered yes or no, and every test
// it names a test function of the module or a case of storetest.
func TestCapabilityPairs(t *testing.T) {
	page, err := os.ReadFile("docs/effectively-once.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(page), "| pair | combine | what the combination promises | tested by |\n| --- | --- | --- | --- |\n")
	if !ok {
		t.Fatal("docs/effectively-once.md has no table of pairs")
	}
	known := testNames(t)
	seen := map[string]bool{}
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), " | ")
		if len(cells) != 4 {
			t.Errorf("row %q: %d cells, want 4", line, len(cells))
			continue
		}
		pair, combine, tests := strings.TrimSpace(cells[0]), cells[1], cells[3]
		seen[pair] = true
		if combine != "yes" && combine != "**no**" {
			t.Errorf("%s: combine %q, want yes or **no**", pair, combine)
		}
		names := backticked(tests)
		if len(names) == 0 {
			t.Errorf("%s: no test named", pair)
		}
		for _, name := range names {
			if !known[name] {
				t.Errorf("%s: %s is neither a test function nor a storetest case", pair, name)
			}
		}
	}
	for i, a := range capabilities {
		for _, b := range capabilities[i+1:] {
			if pair := a + " + " + b; !seen[pair] {
				t.Errorf("the table has no row %q", pair)
			}
			delete(seen, a+" + "+b)
		}
	}
	for pair := range seen {
		t.Errorf("the table's row %q is not a pair of %q", pair, capabilities)
	}
}

// backticked returns the `quoted` words of s.
func backticked(s string) []string {
	var out []string
	for i, part := range strings.Split(s, "`") {
		if i%2 == 1 {
			out = append(out, part)
		}
	}
	return out
}

// testNames are the module's test functions (func TestX in its _test.go
// files) and storetest's cases ({"Name", in storetest).
func testNames(t *testing.T) map[string]bool {
	t.Helper()
	known := map[string]bool{}
	funcs, cases := regexp.MustCompile(`(?m)^func (Test\w+)\(`), regexp.MustCompile(`(?m)^\t\{"(\w+)", `)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		re := funcs
		if strings.HasPrefix(path, "storetest"+string(filepath.Separator)) && !strings.HasSuffix(path, "_test.go") {
			re = cases
		} else if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			known[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return known
}
