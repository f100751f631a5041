package ddbstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/fakeclock"
)

// fakeUpdater is a fakeAPI with UpdateItem, which answers from a scripted
// function and records the requests.
type fakeUpdater struct {
	*fakeAPI
	mu      sync.Mutex
	updates []*dynamodb.UpdateItemInput // guarded by mu
	update  func(n int, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error)
}

func (f *fakeUpdater) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	f.mu.Lock()
	f.updates = append(f.updates, in)
	n := len(f.updates)
	f.mu.Unlock()
	if f.update == nil {
		return &dynamodb.UpdateItemOutput{}, nil
	}
	return f.update(n, in)
}

var acquirePolicy = core.Policy{MaxAttempts: 3}

// TestAcquireRequest checks the one UpdateItem of an acquisition with the
// single-table layout: it addresses the item by both keys, names every
// attribute through ExpressionAttributeNames, counts the attempt on the
// server, and asks for the old item on success and on refusal.
func TestAcquireRequest(t *testing.T) {
	t.Parallel()
	f := &fakeUpdater{fakeAPI: &fakeAPI{}}
	s, err := ddbstore.New(f, "idem-unit", singleTable("orders#", "idempotency#")...)
	if err != nil {
		t.Fatal(err)
	}
	rec, prev, err := s.Acquire(context.Background(), reservation("tok"), t0, acquirePolicy)
	if err != nil || rec.Attempts != 1 || prev != nil {
		t.Fatalf("Acquire of an absent key = %v, prev %v, %v; want attempt 1, no prev", rec, prev, err)
	}
	if puts, gets := f.counts(); len(f.updates) != 1 || puts != 0 || gets != 0 {
		t.Fatalf("%d UpdateItem, %d PutItem, %d GetItem; want one UpdateItem", len(f.updates), puts, gets)
	}
	in := f.updates[0]
	update := aws.ToString(in.UpdateExpression)
	checkRequest(t, request{"UpdateItem", attrsOf(in.Key), in.ExpressionAttributeNames, aws.ToString(in.ConditionExpression) + " " + update})
	if got := describe(in.Key); got != `PK:S="orders#unit:key:1" SK:S="idempotency#" ` {
		t.Errorf("key = %s", got)
	}
	for _, want := range []string{"#att = if_not_exists(#carried, :zero) + :one", "#carried = if_not_exists(#carried, :zero) + :one", "REMOVE "} {
		if !strings.Contains(update, want) {
			t.Errorf("update %q lacks %q", update, want)
		}
	}
	if in.ReturnValues != types.ReturnValueAllOld || in.ReturnValuesOnConditionCheckFailure != types.ReturnValuesOnConditionCheckFailureAllOld {
		t.Errorf("ReturnValues %q, on failure %q; want ALL_OLD, ALL_OLD", in.ReturnValues, in.ReturnValuesOnConditionCheckFailure)
	}
}

// TestAcquireAnswers checks what Acquire makes of UpdateItem's answers,
// on a server that returns ALL_OLD: the item replaced, the blocking item,
// its own item, and a record left to a second write.
func TestAcquireAnswers(t *testing.T) {
	t.Parallel()
	failed := core.Fail(reservation("tok-failed"), errors.New("throttled"), true, t0.Add(time.Second), time.Hour)
	done := succeeded("tok-done", []byte(`1`))
	later := t0.Add(2 * time.Second)
	tests := []struct {
		name        string
		answer      func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error)
		wantAttempt int
		wantPrev    string
		wantPuts    int
		conflict    string
	}{
		{name: "absent", answer: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			return &dynamodb.UpdateItemOutput{}, nil
		}, wantAttempt: 1},
		{name: "retryable failure replaced", answer: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			return &dynamodb.UpdateItemOutput{Attributes: itemOf(t, failed)}, nil
		}, wantAttempt: 2, wantPrev: "tok-failed"},
		{name: "expired record replaced", answer: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			old := done
			old.ExpiresAt = t0
			return &dynamodb.UpdateItemOutput{Attributes: itemOf(t, old)}, nil
		}, wantAttempt: 1},
		{name: "refused by a succeeded record", answer: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			return nil, ccf(itemOf(t, done))
		}, conflict: "tok-done"},
		{name: "refused by its own write", answer: func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			own := reservation("tok-new")
			own.Attempts = 2
			return nil, ccf(itemOf(t, own))
		}, wantAttempt: 2},
		{name: "past retention, carrying its count", answer: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			// A retryable failure past its retention, which the condition
			// leaves to a second request: Reserve's PutItem over no live
			// record, attempt 1.
			old := failed
			old.ExpiresAt = t0
			return nil, ccf(itemOf(t, old))
		}, wantAttempt: 1, wantPuts: 1},
		{name: "changed twice", answer: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			// A live retryable failure that the condition allows refused it
			// (it was written between the refusal and the read) each time:
			// the UpdateItem again, three times in all, then a transient
			// error.
			return nil, ccf(itemOf(t, failed))
		}, conflict: "changed twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeUpdater{fakeAPI: &fakeAPI{}, update: func(_ int, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
				return tc.answer(in)
			}}
			s, err := ddbstore.New(f, "idem-unit")
			if err != nil {
				t.Fatal(err)
			}
			rec := core.Reserve("unit:key:1", fp, "tok-new", nil, later, later.Add(time.Minute), time.Hour)
			got, prev, err := s.Acquire(context.Background(), rec, later, acquirePolicy)
			if puts, gets := f.counts(); puts != tc.wantPuts || gets != 0 {
				t.Errorf("%d PutItem, %d GetItem; want %d, 0", puts, gets, tc.wantPuts)
			}
			if tc.conflict == "changed twice" {
				if !errors.Is(err, ddbstore.ErrUnavailable) || core.Classify(err) != core.Transient || len(f.updates) != 3 {
					t.Fatalf("Acquire = %v after %d UpdateItem, want a transient ErrUnavailable after 3", err, len(f.updates))
				}
				return
			}
			if tc.conflict != "" {
				var ce *idem.ConflictError
				if !errors.As(err, &ce) || ce.Existing.LeaseToken != tc.conflict {
					t.Fatalf("Acquire = %v, want a conflict holding %s", err, tc.conflict)
				}
				return
			}
			if err != nil || got.Attempts != tc.wantAttempt || got.LeaseToken != "tok-new" {
				t.Fatalf("Acquire = %v, %v; want attempt %d", got, err, tc.wantAttempt)
			}
			if tok := prevToken(prev); tok != tc.wantPrev {
				t.Errorf("prev = %q, want %q", tok, tc.wantPrev)
			}
		})
	}
}

func prevToken(prev *core.Record) string {
	if prev == nil {
		return ""
	}
	return prev.LeaseToken
}

// TestAcquireOverPreviousEncoding writes records as v0.1.0 wrote them
// (steps kept in the record) and acquires over them on a real server: the
// count and the steps continue over a live retryable failure and an ended
// lease, in one write; the count restarts over an expired record, in one
// write over a succeeded record and in two (Reserve's PutItem after the
// UpdateItem) over a retryable failure that carries its count and steps;
// Get and List read them.
func TestAcquireOverPreviousEncoding(t *testing.T) {
	integration(t)
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	later := now.Add(2 * time.Hour)
	charge := []core.Step{{Name: "charge", Result: []byte(`"ch_1"`)}}
	tests := []struct {
		name        string
		old         core.Record
		at          time.Time
		wantAttempt int
		wantSteps   int
		wantWrites  int
	}{
		{"live retryable failure with a step", withSteps(core.Fail(withAttempts(core.Reserve("compat:1", fp, "tok-old", nil, now, now.Add(time.Minute), time.Hour), 2),
			errors.New("throttled"), true, now, time.Hour), charge), now.Add(time.Second), 3, 1, 1},
		{"ended lease", withAttempts(core.Reserve("compat:2", fp, "tok-old", nil, now, now.Add(time.Second), time.Hour), 2), now.Add(time.Minute), 3, 0, 1},
		{"expired succeeded record", withAttempts(core.Succeed(core.Reserve("compat:3", fp, "tok-old", nil, now, now.Add(time.Second), time.Hour),
			[]byte(`1`), now, time.Hour), 2), later, 1, 0, 1},
		{"expired retryable failure with a step", withSteps(core.Fail(withAttempts(core.Reserve("compat:4", fp, "tok-old", nil, now, now.Add(time.Minute), time.Hour), 2),
			errors.New("throttled"), true, now, time.Hour), charge), later, 1, 0, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			putPrevious(t, f, tc.old)
			if got, err := f.store.Get(ctx, tc.old.Key, now); err != nil || got.Attempts != 2 || got.Status != tc.old.Status || !sameSteps(got.Steps, tc.old.Steps) {
				t.Fatalf("Get of the old record = %v (steps %q), %v", got, got.Steps, err)
			}
			f.rec.reset()
			rec := core.Reserve(tc.old.Key, fp, "tok-new", nil, tc.at, tc.at.Add(time.Minute), time.Hour)
			got, _, err := f.store.Acquire(ctx, rec, tc.at, acquirePolicy)
			if err != nil || got.Attempts != tc.wantAttempt || len(got.Steps) != tc.wantSteps {
				t.Fatalf("Acquire = %v (steps %q), %v; want attempt %d with %d steps", got, got.Steps, err, tc.wantAttempt, tc.wantSteps)
			}
			if writes := f.rec.count("UpdateItem") + f.rec.count("PutItem"); writes != tc.wantWrites {
				t.Errorf("%d writes, want %d", writes, tc.wantWrites)
			}
			stored, err := f.store.Get(ctx, tc.old.Key, tc.at)
			if err != nil || stored.Attempts != tc.wantAttempt || stored.LeaseToken != "tok-new" || len(stored.Steps) != tc.wantSteps {
				t.Errorf("Get after Acquire = %v (steps %q), %v", stored, stored.Steps, err)
			}
		})
	}
	page, err := f.store.List(ctx, ddbstore.ListInput{})
	if err != nil || len(page.Records) != len(tests) {
		t.Fatalf("List = %d records, %v; want %d", len(page.Records), err, len(tests))
	}
}

func withAttempts(rec core.Record, n int) core.Record {
	rec.Attempts = n
	return rec
}

func withSteps(rec core.Record, steps []core.Step) core.Record {
	rec.Steps = steps
	return rec
}

// putPrevious writes rec as v0.1.0, the previous release, wrote it: its
// steps kept in the record.
func putPrevious(t *testing.T, f *fixture, rec core.Record) {
	t.Helper()
	item := f.store.ItemV010(rec)
	if _, err := f.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// TestAcquireWhereUpdateItemIsDenied: under an IAM policy without
// UpdateItem, Acquire fails once, loudly: a permanent misconfiguration
// that names the action to grant, and no other request in its place.
func TestAcquireWhereUpdateItemIsDenied(t *testing.T) {
	t.Parallel()
	f := &fakeUpdater{fakeAPI: &fakeAPI{}, update: func(int, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return nil, &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "UpdateItem", Err: generic("AccessDeniedException")}
	}}
	s, err := ddbstore.New(f, "idem-unit")
	if err != nil {
		t.Fatal(err)
	}
	rec := core.Reserve("unit:key:1", fp, "tok-1", nil, t0, t0.Add(time.Minute), time.Hour)
	_, _, err = s.Acquire(context.Background(), rec, t0, acquirePolicy)
	if !errors.Is(err, idem.ErrMisconfigured) || !errors.Is(err, ddbstore.ErrAccessDenied) || core.Classify(err) != core.Permanent ||
		!strings.Contains(err.Error(), "dynamodb:UpdateItem") {
		t.Errorf("Acquire under a policy without UpdateItem = %v; want a permanent misconfiguration naming dynamodb:UpdateItem", err)
	}
	if puts, gets := f.counts(); len(f.updates) != 1 || puts != 0 || gets != 0 {
		t.Errorf("%d UpdateItem, %d PutItem, %d GetItem; want the one UpdateItem", len(f.updates), puts, gets)
	}
	// Through a runner: the handler does not run, and the log names the
	// action at ERROR.
	var logs bytes.Buffer
	r, err := idem.New(s, idem.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	out, err := r.Do(context.Background(), "unit:key:2", []byte(`{}`), func(context.Context) ([]byte, error) { ran = true; return nil, nil })
	if out.Verdict != idem.StoreFailed || !errors.Is(err, idem.ErrMisconfigured) || ran {
		t.Errorf("Do = %s, %v, ran %v; want store_failed, not run", out.Verdict, err, ran)
	}
	if line := logs.String(); !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "dynamodb:UpdateItem") {
		t.Errorf("log %q, want an ERROR record naming dynamodb:UpdateItem", line)
	}
}

// TestNewEventOverOldStepsRunsItsOwn: a retryable failure with the step
// "charge", written by v0.1.0 (the step kept in the record) and past its
// retention, is replaced by a new event's execution through a runner (the
// one-write Acquire): the new event's Step("charge") runs its own function,
// directly and after a crash and takeover, and never gets the old event's
// result or a step conflict.
func TestNewEventOverOldStepsRunsItsOwn(t *testing.T) {
	integration(t)
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash before the step %v", crash), func(t *testing.T) {
			f := newFixture(t)
			clock := fakeclock.New(time.Now().Truncate(time.Second))
			key := "evt:old-steps:1"
			old := core.Reserve(key, fp, "tok-old", nil, clock.Now(), clock.Now().Add(time.Minute), time.Hour)
			old.Steps = []core.Step{{Name: "charge", Result: []byte(`"ch_OLD"`)}}
			putPrevious(t, f, core.Fail(old, errors.New("throttled"), true, clock.Now(), time.Hour))
			clock.Advance(2 * time.Hour)
			r := newRunner(t, f.store, clock)
			charges := 0
			handler := func(ctx context.Context) ([]byte, error) {
				return idem.Step(ctx, "charge", func(context.Context) ([]byte, error) {
					charges++
					return []byte(`"ch_NEW"`), nil
				})
			}
			var out idem.Outcome
			var err error
			if crash {
				_, _ = r.Do(context.Background(), key, []byte(`{"order":"new"}`), func(context.Context) ([]byte, error) {
					clock.Advance(testLease + time.Second) // the holder is gone; the next delivery takes over
					out, err = r.Do(context.Background(), key, []byte(`{"order":"new"}`), handler)
					return nil, errors.New("the holder died")
				})
			} else {
				out, err = r.Do(context.Background(), key, []byte(`{"order":"new"}`), handler)
			}
			if err != nil || out.Verdict != idem.Executed || string(out.Result) != `"ch_NEW"` || charges != 1 {
				t.Fatalf("Do = %s, %q, %v after %d charges; want executed with the new charge, charged once", out.Verdict, out.Result, err, charges)
			}
		})
	}
}

// sameSteps reports whether a and b are the same steps in the same order.
func sameSteps(a, b []core.Step) bool {
	return slices.EqualFunc(a, b, func(x, y core.Step) bool { return x.Name == y.Name && string(x.Result) == string(y.Result) })
}
