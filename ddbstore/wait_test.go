package ddbstore_test

import (
	"context"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
)

// TestWaitAcrossRunners: two runners over one table, as two processes. A
// duplicate that finds the key in progress polls the table (one
// strongly consistent GetItem per poll) until the first process's outcome
// is there, or takes the key over when the holder's lease ends.
func TestWaitAcrossRunners(t *testing.T) {
	integration(t)
	tests := []struct {
		name       string
		key        string
		crashed    bool // the holder never completes; its lease ends after 500 ms
		wantVerd   idem.Verdict
		wantSleeps []time.Duration
		wantPolls  int
	}{
		{name: "holder completes: replayed", key: "wait:key:completes", wantVerd: idem.Replayed,
			wantSleeps: []time.Duration{100 * time.Millisecond}, wantPolls: 1},
		{name: "holder crashed: taken over at its lease end", key: "wait:key:crashed", crashed: true, wantVerd: idem.Executed,
			wantSleeps: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond}, wantPolls: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			clock := fakeclock.New(time.Now().Truncate(time.Second))
			start := clock.Now()
			key := tt.key
			ctx := context.Background()
			holder := newRunner(t, f.store, clock)

			// The holder: a handler that runs until the waiter's first
			// poll, or a crashed holder's record.
			proceed, holderDone := make(chan struct{}), make(chan struct{})
			if tt.crashed {
				close(holderDone)
				held := core.Reserve(key, emptyFP, "tok-crashed", nil, start, start.Add(500*time.Millisecond), time.Hour)
				if err := f.store.Reserve(ctx, held, nil, start); err != nil {
					t.Fatal(err)
				}
			} else {
				started := make(chan struct{})
				go func() {
					defer close(holderDone)
					_, err := holder.Do(ctx, key, []byte(`{}`), func(context.Context) ([]byte, error) {
						close(started)
						<-proceed
						return []byte(`"holder's"`), nil
					})
					if err != nil {
						t.Errorf("holder: %v", err)
					}
				}()
				<-started
			}
			var once sync.Once
			sleep := func(ctx context.Context, d time.Duration) error {
				once.Do(func() {
					if !tt.crashed {
						close(proceed)
						<-holderDone
					}
				})
				return clock.Sleep(ctx, d)
			}
			var obs idem.Observation
			waiter := newRunnerOpts(t, f.store, clock, idem.WithSleep(sleep), idem.WithRand(func() float64 { return math.Nextafter(1, 0) }),
				idem.WithRetry(3, 100*time.Millisecond, 400*time.Millisecond), idem.WithWait(5*time.Second),
				idem.WithObserver(idem.ObserverFunc(func(_ context.Context, o idem.Observation) { obs = o })))
			f.rec.reset()
			out, err := waiter.Do(ctx, key, []byte(`{}`), func(context.Context) ([]byte, error) { return []byte(`"waiter's"`), nil })
			<-holderDone
			if err != nil || out.Verdict != tt.wantVerd || !out.Waited {
				t.Fatalf("waiter = %+v, %v; want %v after a wait", out, err, tt.wantVerd)
			}
			if want := map[bool]string{false: `"holder's"`, true: `"waiter's"`}[tt.crashed]; string(out.Result) != want || out.TookOver != tt.crashed {
				t.Errorf("result %s, took over %v; want %s, %v", out.Result, out.TookOver, want, tt.crashed)
			}
			if got := clock.Sleeps(); !slices.Equal(got, tt.wantSleeps) {
				t.Errorf("sleeps = %v, want %v", got, tt.wantSleeps)
			}
			// Each poll is one GetItem; a server that does not return the
			// blocking item with a failed condition (dynalite) costs one more
			// per conflict.
			wantGets := tt.wantPolls
			if !returnsAllOld() {
				wantGets++
			}
			if got := f.rec.count("GetItem"); got != wantGets {
				t.Errorf("GetItem calls = %d on %q, want %d", got, server(), wantGets)
			}
			if obs.StoreCalls < 1+tt.wantPolls {
				t.Errorf("observed store calls %d, want at least the reservation and %d polls", obs.StoreCalls, tt.wantPolls)
			}
		})
	}
}
