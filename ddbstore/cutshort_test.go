package ddbstore_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/fakeaws"
	"github.com/idemgo/idem/internal/fakeclock"
)

// cutShortAnswers are DynamoDB's answers, every status, whose body the
// connection loses part of: closed after the headers and a few bytes of the
// body (with the Content-Length of the whole body), or reset there.
func cutShortAnswers() []struct {
	name   string
	answer http.Handler
} {
	ddb := fakeaws.DynamoDBError
	throttle := ddb(400, "com.amazon.coral.availability#ThrottlingException", "Rate of requests exceeds the allowed throughput.")
	conditional := fakeaws.JSONResponse(400, []byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",`+
		`"message":"The conditional request failed","Item":{"pk":{"S":"evt:cut:1"},"status":{"S":"in_progress"}}}`))
	return []struct {
		name   string
		answer http.Handler
	}{
		{"ThrottlingException 400 closed mid-body", fakeaws.Truncated(throttle, 30)},
		{"ThrottlingException 400 reset mid-body", fakeaws.ResetMidBody(throttle, 30)},
		{"ConditionalCheckFailed 400 closed mid-body", fakeaws.Truncated(conditional, 60)},
		{"ValidationException 400 closed mid-body", fakeaws.Truncated(ddb(400, "com.amazon.coral.validate#ValidationException", "One or more parameter values were invalid"), 20)},
		{"AccessDeniedException 400 closed mid-body", fakeaws.Truncated(ddb(400, "com.amazon.coral.service#AccessDeniedException", "not authorized"), 20)},
		{"InternalServerError 500 closed mid-body", fakeaws.Truncated(ddb(500, "InternalServerError", "Internal server error"), 10)},
		{"200 closed mid-body", fakeaws.Truncated(fakeaws.JSONResponse(200, []byte(`{"Attributes":{"pk":{"S":"evt:cut:1"}}}`)), 12)},
	}
}

// storeCall is one call of the store, answered by a cut-short reply; write
// reports that it is a write, checked for having been applied.
type storeCall struct {
	name  string
	write bool
	call  func(s *ddbstore.Store) error
}

func cutShortCalls() []storeCall {
	now := time.Now().Truncate(time.Second)
	held := core.Reserve("evt:cut:1", "fp", "tok-a", nil, now, now.Add(time.Minute), time.Hour)
	held.Attempts = 1
	done := core.Succeed(held, []byte(`{"ok":true}`), now.Add(time.Second), time.Hour)
	ctx := context.Background()
	return []storeCall{
		{"Reserve", true, func(s *ddbstore.Store) error { return s.Reserve(ctx, held, nil, now) }},
		{"Acquire", true, func(s *ddbstore.Store) error {
			_, _, err := s.Acquire(ctx, held, now, core.Policy{MaxAttempts: 5})
			return err
		}},
		{"Complete", true, func(s *ddbstore.Store) error {
			_, err := s.Complete(ctx, done)
			return err
		}},
		{"CompleteStaged", true, func(s *ddbstore.Store) error {
			_, err := s.CompleteStaged(ctx, done, many(1, 100))
			return err
		}},
		{"RenewLease", true, func(s *ddbstore.Store) error {
			_, err := s.RenewLease(ctx, held, now.Add(2*time.Minute), now)
			return err
		}},
		{"Get", false, func(s *ddbstore.Store) error {
			_, err := s.Get(ctx, held.Key, now)
			return err
		}},
	}
}

// absent answers a GetItem with no item, and fails the test on any other
// request.
func absent(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if target := r.Header.Get("X-Amz-Target"); target != "DynamoDB_20120810.GetItem" {
			t.Errorf("unexpected request %s after the reply cut short", target)
		}
		fakeaws.JSONResponse(200, []byte(`{}`)).ServeHTTP(w, r)
	})
}

// TestCutShortRepliesAreUnavailable: a reply whose body is cut short, at any
// HTTP status, is a transient ErrUnavailable, never a permanent error (its
// error code was never read: a 400 cut short may have been a throttle), and
// a write it answered is checked for having been applied (one consistent
// GetItem) before it is called failed. Real SDK clients against a server
// that cuts DynamoDB's replies short.
func TestCutShortRepliesAreUnavailable(t *testing.T) {
	t.Parallel()
	for _, c := range cutShortCalls() {
		for _, a := range cutShortAnswers() {
			t.Run(c.name+"/"+a.name, func(t *testing.T) {
				t.Parallel()
				srv := fakeaws.New(t, absent(t))
				srv.Queue(a.answer)
				s := fakeStoreAt(t, srv)
				err := c.call(s)
				var ce *idem.ConflictError
				switch {
				case err == nil:
					t.Fatal("call = nil; want ErrUnavailable")
				case !errors.Is(err, ddbstore.ErrUnavailable) || core.Classify(err, s.ClassifyError) != core.Transient:
					t.Fatalf("call = %v (%s); want a transient ErrUnavailable", err, core.Classify(err, s.ClassifyError))
				case errors.Is(err, idem.ErrLeaseLost) || errors.As(err, &ce) || errors.Is(err, idem.ErrCommitRefused):
					t.Fatalf("call = %v; a reply cut short decides nothing", err)
				}
				reqs := srv.Requests()
				checked := len(reqs) > 1 && reqs[len(reqs)-1].Target == "DynamoDB_20120810.GetItem"
				if c.write && !checked {
					t.Errorf("requests %v: the write was not checked for having been applied", reqs)
				}
			})
		}
	}
}

// counted is a handler that counts its runs and succeeds.
func counted(runs *atomic.Int32) idem.Handler {
	return func(context.Context) ([]byte, error) {
		runs.Add(1)
		return []byte(`{"ok":true}`), nil
	}
}

// TestCompletionAfterCutShortThrottleIsRetried: the completion's first
// reply is a throttle whose body is cut short (nothing applied). It is
// retried, and the success is recorded.
func TestCompletionAfterCutShortThrottleIsRetried(t *testing.T) {
	integration(t)
	f := newFixture(t)
	clock := fakeclock.New(time.Now().Truncate(time.Second))
	f.rec.inject(fault{Op: "PutItem", Match: completePut, Kind: cutShort, Times: 1})
	var runs atomic.Int32
	key := "evt:cut-complete:1"
	out, err := newRunner(t, f.store, clock).Do(context.Background(), key, []byte(`{}`), counted(&runs))
	if err != nil || out.Verdict != idem.Executed {
		t.Fatalf("Do = %+v (%s), %v; want executed, the completion retried", out, out.Verdict, err)
	}
	if n := f.rec.count("PutItem"); n != 2 {
		t.Errorf("PutItem calls = %d, want 2 (the completion cut short, then retried)", n)
	}
	if rec, err := f.store.Get(context.Background(), key, clock.Now()); err != nil || rec.Status != core.StatusSucceeded {
		t.Fatalf("record = %v, %v; want succeeded", rec, err)
	}
}

// TestReservationWhoseRetriedReplyIsCutShort: the reservation is applied
// and its answer lost; the SDK retries it, and the server's refusal (the
// record it holds is this very reservation) reaches the client cut short.
// The store recognises its own reservation: the handler runs, once, and a
// duplicate replays it, instead of store_failed and the key blocked until
// the lease ends.
func TestReservationWhoseRetriedReplyIsCutShort(t *testing.T) {
	integration(t)
	for _, tc := range []struct {
		name   string
		op     string // the reservation's request: Acquire's UpdateItem, Reserve's PutItem
		client func(*fixture) idem.Store
	}{
		{"Acquire", "UpdateItem", func(f *fixture) idem.Store { return f.store }},
		{"Reserve", "PutItem", func(f *fixture) idem.Store { return struct{ idem.Store }{f.store} }}, // no Acquire
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			s, err := ddbstore.New(newClient(t, f.rec, 2), f.table) // the SDK retries once
			if err != nil {
				t.Fatal(err)
			}
			f.store = s
			f.rec.inject(fault{Op: tc.op, Match: reservePut, After: true, Kind: timeout, Times: 1})
			f.rec.inject(fault{Op: tc.op, Match: reservePut, After: true, Kind: cutShort, Times: 1})
			clock := fakeclock.New(time.Now().Truncate(time.Second))
			var runs atomic.Int32
			key := "evt:cut-reserve:1"
			out, err := newRunner(t, tc.client(f), clock).Do(context.Background(), key, []byte(`{}`), counted(&runs))
			if err != nil || out.Verdict != idem.Executed {
				t.Fatalf("Do = %+v (%s), %v; want executed: the reservation is the call's own", out, out.Verdict, err)
			}
			if n := f.rec.count(tc.op); n < 2 {
				t.Fatalf("%s calls = %d: the faults were not met", tc.op, n)
			}
			dup, err := newRunner(t, tc.client(f), clock).Do(context.Background(), key, []byte(`{}`), counted(&runs))
			if err != nil || dup.Verdict != idem.Replayed || runs.Load() != 1 {
				t.Fatalf("duplicate = %+v (%s), %v, handler runs %d; want replayed, one run", dup, dup.Verdict, err, runs.Load())
			}
		})
	}
}

// TestRecordedSuccessWhoseReplyIsCutShort: the success is recorded, and
// the reply that says so never arrives whole: once (the SDK's retry meets
// the record and its refusal is cut short), or every time. The call
// reports the success it recorded (executed), not outcome_not_recorded.
func TestRecordedSuccessWhoseReplyIsCutShort(t *testing.T) {
	integration(t)
	for _, tc := range []struct {
		name   string
		faults []fault
	}{
		{"the retried completion's refusal cut short", []fault{
			{Op: "PutItem", Match: completePut, After: true, Kind: timeout, Times: 1},
			{Op: "PutItem", Match: completePut, After: true, Kind: cutShort, Times: 1}}},
		{"every reply cut short", []fault{{Op: "PutItem", Match: completePut, After: true, Kind: cutShort, Times: -1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			s, err := ddbstore.New(newClient(t, f.rec, 2), f.table) // the SDK retries once
			if err != nil {
				t.Fatal(err)
			}
			for _, fl := range tc.faults {
				f.rec.inject(fl)
			}
			clock := fakeclock.New(time.Now().Truncate(time.Second))
			var runs atomic.Int32
			key := "evt:cut-recorded:1"
			out, err := newRunner(t, s, clock).Do(context.Background(), key, []byte(`{}`), counted(&runs))
			if err != nil || out.Verdict != idem.Executed || string(out.Result) != `{"ok":true}` {
				t.Fatalf("Do = %+v (%s), %v; want executed: the success was recorded", out, out.Verdict, err)
			}
			if rec, err := s.Get(context.Background(), key, clock.Now()); err != nil || rec.Status != core.StatusSucceeded {
				t.Fatalf("record = %v, %v; want succeeded", rec, err)
			}
		})
	}
}
