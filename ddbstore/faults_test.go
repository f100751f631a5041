package ddbstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/fakeclock"
	"github.com/idemgo/idem/storetest"
)

// TestConformanceFaults runs storetest's fault-injection suite: each
// subtest's store has a client of its own whose recorder asks the subtest's
// storetest.Faults what to do with each GetItem and PutItem (kitFaults).
// The SDK does not retry (RetryMaxAttempts 1).
func TestConformanceFaults(t *testing.T) {
	integration(t)
	runFaults(t)
}

// runFaults runs storetest.RunFaults over stores configured with opts on a
// table of their own.
func runFaults(t *testing.T, opts ...ddbstore.Option) {
	t.Helper()
	f := newFixture(t, opts...)
	if !atomicServer() {
		t.Logf("%s does not apply conditional writes atomically under concurrency: each subtest's calls are serialized", server())
	}
	storetest.RunFaults(t, func(t *testing.T, faults *storetest.Faults) idem.Store {
		rec := newRecorder()
		rec.kit = faults
		s, err := ddbstore.New(newClient(t, rec, 1), f.table, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if !atomicServer() {
			return &serialized{s: s}
		}
		return s
	})
}

// emptyFP is the fingerprint of the payload `{}`.
var emptyFP = func() string {
	s, err := core.Fingerprint([]byte(`{}`))
	if err != nil {
		panic(err)
	}
	return s
}()

// testLease is the lease of the runners of these tests (their contexts have
// no deadline).
const testLease = time.Minute

func newRunner(t testing.TB, s idem.Store, c *fakeclock.Clock) *idem.Runner {
	return newRunnerOpts(t, s, c)
}

func newRunnerOpts(t testing.TB, s idem.Store, c *fakeclock.Clock, opts ...idem.Option) *idem.Runner {
	t.Helper()
	r, err := idem.New(s, append([]idem.Option{idem.WithClock(c.Now), idem.WithSleep(c.Sleep),
		idem.WithRand(func() float64 { return 0.5 }), idem.WithLease(0, testLease)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Request bodies of the store's two kinds of PutItem differ in their
// condition expressions.
const (
	reservePut  = "attribute_not_exists"
	completePut = "#tok = :tok"
)

// outcome classes of a Do call.
type class string

const (
	executed    class = "executed"
	replayed    class = "replayed"
	storeErr    class = "transient store error"
	notRecorded class = "outcome not recorded"
	inProgress  class = "in progress"
)

func classify(t *testing.T, out idem.Outcome, err error) class {
	t.Helper()
	switch {
	case err == nil && out.Replayed:
		return replayed
	case err == nil:
		return executed
	case errors.Is(err, idem.ErrOutcomeNotRecorded):
		return notRecorded
	case errors.Is(err, core.ErrInProgress):
		return inProgress
	case core.Classify(err, core.DefaultClassifiers...) == core.Transient:
		var se *ddbstore.Error
		if !errors.As(err, &se) {
			t.Fatalf("transient error %v is not a *ddbstore.Error", err)
		}
		return storeErr
	}
	t.Fatalf("unexpected error: %v", err)
	return ""
}

// TestFaultsThroughRunner injects faults into the store's requests, before
// they are sent or after the server answered them (the ambiguous case), and
// runs the same key three times through an idem.Runner: the faulted call,
// a duplicate while its lease is live, and one after the lease ended.
// Whatever the fault, the handler never runs twice while a lease is live,
// and a recorded success is never lost; it runs a second time only after an
// outcome that could not be recorded, once the lease has ended.
//
// storetest.RunFaults (TestConformanceFaults) checks these rules for one
// shape of each fault (kitFaults); the cases here are DynamoDB's other
// shapes of them: ThrottlingException, HTTP 500 and 503 (applied or not),
// and connection resets, which the store cannot tell apart from resets after
// the request was applied.
func TestFaultsThroughRunner(t *testing.T) {
	integration(t)
	cases := []struct {
		name   string
		faults []fault
		want   [3]class // the three calls
		runs   int32    // handler executions in all
	}{
		{"reserve ThrottlingException", []fault{{Op: "UpdateItem", Match: reservePut, Kind: throttleOther, Times: 1}}, [3]class{storeErr, executed, replayed}, 1},
		{"reserve 500 not applied", []fault{{Op: "UpdateItem", Match: reservePut, Kind: serverError, Times: 1}}, [3]class{storeErr, executed, replayed}, 1},
		{"reserve 503 not applied", []fault{{Op: "UpdateItem", Match: reservePut, Kind: unavailable, Times: 1}}, [3]class{storeErr, executed, replayed}, 1},
		{"reserve reset before send", []fault{{Op: "UpdateItem", Match: reservePut, Kind: reset, Times: 1}}, [3]class{storeErr, executed, replayed}, 1},
		// Applied, answer lost: the store's check finds its own token.
		{"reserve 500 after apply", []fault{{Op: "UpdateItem", Match: reservePut, Kind: serverError, After: true, Times: 1}}, [3]class{executed, replayed, replayed}, 1},
		{"reserve reset after apply", []fault{{Op: "UpdateItem", Match: reservePut, Kind: reset, After: true, Times: 1}}, [3]class{executed, replayed, replayed}, 1},
		// Applied, answer lost, and the check fails too: the reservation
		// is orphaned; the key waits for the lease to end, then runs once.
		{"reserve reset after apply, check 503", []fault{
			{Op: "UpdateItem", Match: reservePut, Kind: reset, After: true, Times: 1},
			{Op: "GetItem", Kind: unavailable, Times: 1}}, [3]class{storeErr, inProgress, executed}, 1},
		// Completion faults: the runner retries the completion.
		{"complete ThrottlingException once", []fault{{Op: "PutItem", Match: completePut, Kind: throttleOther, Times: 1}}, [3]class{executed, replayed, replayed}, 1},
		{"complete 500 once", []fault{{Op: "PutItem", Match: completePut, Kind: serverError, Times: 1}}, [3]class{executed, replayed, replayed}, 1},
		{"complete reset before send once", []fault{{Op: "PutItem", Match: completePut, Kind: reset, Times: 1}}, [3]class{executed, replayed, replayed}, 1},
		{"complete 500 after apply once", []fault{{Op: "PutItem", Match: completePut, Kind: serverError, After: true, Times: 1}}, [3]class{executed, replayed, replayed}, 1},
		{"complete reset after apply once", []fault{{Op: "PutItem", Match: completePut, Kind: reset, After: true, Times: 1}}, [3]class{executed, replayed, replayed}, 1},
		{"complete timeout after apply twice", []fault{{Op: "PutItem", Match: completePut, Kind: timeout, After: true, Times: 2}}, [3]class{executed, replayed, replayed}, 1},
		// Completion never gets through: outcome not recorded; the key is
		// in progress until the lease ends, then runs again.
		{"complete 503 always", []fault{{Op: "PutItem", Match: completePut, Kind: unavailable, Times: -1}}, [3]class{notRecorded, inProgress, executed}, 2},
		{"complete reset before send always", []fault{{Op: "PutItem", Match: completePut, Kind: reset, Times: -1}}, [3]class{notRecorded, inProgress, executed}, 2},
		// Completion applied but every answer lost: the store's check (one
		// consistent GetItem) finds it, so the call reports it executed.
		{"complete 500 after apply always", []fault{{Op: "PutItem", Match: completePut, Kind: serverError, After: true, Times: -1}}, [3]class{executed, replayed, replayed}, 1},
		// ... and when the check fails too: reported as not recorded, yet
		// the outcome is there and is replayed.
		{"complete 500 after apply always, check 503", []fault{
			{Op: "PutItem", Match: completePut, Kind: serverError, After: true, Times: -1},
			{Op: "GetItem", Kind: unavailable, Times: -1}}, [3]class{notRecorded, replayed, replayed}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			clock := fakeclock.New(time.Now().Truncate(time.Second))
			r := newRunner(t, f.store, clock)
			var runs atomic.Int32
			handler := func(context.Context) ([]byte, error) {
				n := runs.Add(1)
				return fmt.Appendf(nil, `"run %d"`, n), nil
			}
			ctx := context.Background()
			key := "fault:key:1"
			for _, fl := range tc.faults {
				f.rec.inject(fl)
			}
			var got [3]class
			var results [3][]byte
			out, err := r.Do(ctx, key, []byte(`{}`), handler)
			got[0], results[0] = classify(t, out, err), out.Result
			f.rec.clearFaults()
			t.Logf("call 1: %s (%v)", got[0], err)

			clock.Advance(time.Second)
			out, err = r.Do(ctx, key, []byte(`{}`), handler)
			got[1], results[1] = classify(t, out, err), out.Result
			if n := runs.Load(); n > 1 {
				t.Fatalf("handler ran %d times while the first lease was live", n)
			}

			clock.Advance(testLease + time.Second)
			out, err = r.Do(ctx, key, []byte(`{}`), handler)
			got[2], results[2] = classify(t, out, err), out.Result

			if got != tc.want || runs.Load() != tc.runs {
				t.Fatalf("calls = %v, runs %d; want %v, runs %d", got, runs.Load(), tc.want, tc.runs)
			}
			// A success, once returned, is what every later call replays.
			var first []byte
			for i, c := range got {
				if c != executed && c != replayed {
					continue
				}
				if first == nil {
					first = results[i]
				} else if string(results[i]) != string(first) {
					t.Fatalf("call %d result %s, want %s", i+1, results[i], first)
				}
			}
			rec, err := f.store.Get(ctx, key, clock.Now())
			if err != nil || rec.Status != core.StatusSucceeded {
				t.Fatalf("final record = %v, %v; want succeeded", rec, err)
			}
		})
	}
}

// TestFaultsOnRead injects faults into GetItem: Store.Get reports them as
// transient store errors, and a duplicate whose conflict needs a read (on
// servers without ALL_OLD) fails without running the handler again.
func TestFaultsOnRead(t *testing.T) {
	integration(t)
	for _, kind := range []faultKind{throttle, serverError, unavailable, reset, timeout} {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			clock := fakeclock.New(time.Now().Truncate(time.Second))
			r := newRunner(t, f.store, clock)
			ctx := context.Background()
			var runs atomic.Int32
			handler := func(context.Context) ([]byte, error) { runs.Add(1); return []byte(`"done"`), nil }
			mustDo(t, ctx, r, "read:key:1", handler)

			f.rec.inject(fault{Op: "GetItem", Kind: kind, Times: -1})
			_, err := f.store.Get(ctx, "read:key:1", clock.Now())
			want := ddbstore.ErrUnavailable
			if kind == throttle {
				want = ddbstore.ErrThrottled
			}
			if !errors.Is(err, want) || core.Classify(err) != core.Transient {
				t.Fatalf("Get = %v (%v), want transient %v", err, core.Classify(err), want)
			}

			out, err := r.Do(ctx, "read:key:1", []byte(`{}`), handler)
			if returnsAllOld() {
				if err != nil || !out.Replayed {
					t.Fatalf("duplicate = %+v, %v; want a replay (the conflict carries the record)", out, err)
				}
			} else if c := classify(t, out, err); c != storeErr {
				t.Fatalf("duplicate = %s, want a transient store error", c)
			}
			f.rec.clearFaults()
			if out, err := r.Do(ctx, "read:key:1", []byte(`{}`), handler); err != nil || !out.Replayed {
				t.Fatalf("after the fault = %+v, %v; want a replay", out, err)
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
		})
	}
}

// TestSDKRetryOfAppliedWrites lets the SDK itself retry (RetryMaxAttempts 3)
// writes whose first answer was lost after they were applied: the retried
// reservation and the retried completion each find their own record and
// count as success.
func TestSDKRetryOfAppliedWrites(t *testing.T) {
	integration(t)
	rec := newRecorder()
	client := newClient(t, rec, 3)
	table, _ := newTable(t, client)
	s, err := ddbstore.New(client, table)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	r := core.Reserve("sdkretry:key:1", fp, "tok-a", nil, now, now.Add(time.Minute), time.Hour)
	rec.inject(fault{Op: "PutItem", Match: reservePut, Kind: reset, After: true, Times: 1})
	rec.reset()
	if err := s.Reserve(ctx, r, nil, now); err != nil {
		t.Fatalf("Reserve = %v, want nil (the SDK's retry meets its own record)", err)
	}
	if n := rec.count("PutItem"); n != 2 {
		t.Errorf("%d PutItem, want 2 (one lost answer, one retry)", n)
	}
	rec.inject(fault{Op: "PutItem", Match: completePut, Kind: serverError, After: true, Times: 1})
	rec.reset()
	done, err := s.Complete(ctx, core.Succeed(r, []byte(`"ok"`), now, time.Hour))
	if err != nil || string(done.Result) != `"ok"` || done.Status != core.StatusSucceeded {
		t.Fatalf("Complete = %v, %v; want the succeeded record", done, err)
	}
	if n := rec.count("PutItem"); n != 2 {
		t.Errorf("%d PutItem, want 2", n)
	}

	// The same for a one-write reservation (Acquire): its retry is refused
	// by its own record, which it recognises by its token.
	first := core.Reserve("sdkretry:key:2", fp, "tok-b", nil, now, now.Add(time.Minute), time.Hour)
	if err := s.Reserve(ctx, first, nil, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(ctx, core.Fail(first, errors.New("throttled"), true, now, time.Hour)); err != nil {
		t.Fatal(err)
	}
	rec.inject(fault{Op: "UpdateItem", Match: reservePut, Kind: reset, After: true, Times: 1})
	rec.reset()
	acq := core.Reserve("sdkretry:key:2", fp, "tok-c", nil, now, now.Add(time.Minute), time.Hour)
	got, _, err := s.Acquire(ctx, acq, now, core.Policy{MaxAttempts: 3})
	if err != nil || got.LeaseToken != "tok-c" || got.Attempts != 2 {
		t.Fatalf("Acquire = %v, %v; want attempt 2 with token tok-c (the SDK's retry meets its own record)", got, err)
	}
	if n := rec.count("UpdateItem"); n != 2 {
		t.Errorf("%d UpdateItem, want 2 (one lost answer, one retry)", n)
	}
}
