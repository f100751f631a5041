package ddbstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/fakeclock"
)

// fakeUpdater is a fakeAPI with UpdateItem (a ddbstore.UpdateAPI), which
// answers from a scripted function and records the requests.
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
		{name: "left to a second write", answer: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			// A retryable failure the condition refused (say, written
			// before attempts_carried existed): Reserve's PutItem over it.
			return nil, ccf(itemOf(t, failed))
		}, wantAttempt: 2, wantPrev: "tok-failed", wantPuts: 1},
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

// TestAcquireWithoutUpdateItem checks Acquire with a client that has
// PutItem and GetItem only: Reserve's PutItem, and where the record that
// blocks it may be replaced, a second PutItem conditioned on it.
func TestAcquireWithoutUpdateItem(t *testing.T) {
	t.Parallel()
	failed := core.Fail(reservation("tok-failed"), errors.New("throttled"), true, t0.Add(time.Second), time.Hour)
	f := &fakeAPI{put: func(n int, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
		if n == 1 {
			return nil, ccf(itemOf(t, failed))
		}
		return &dynamodb.PutItemOutput{}, nil
	}}
	s := newUnitStore(t, f)
	now := t0.Add(2 * time.Second)
	rec, prev, err := s.Acquire(context.Background(), core.Reserve("unit:key:1", fp, "tok-new", nil, now, now.Add(time.Minute), time.Hour), now, acquirePolicy)
	if err != nil || rec.Attempts != 2 || prevToken(prev) != "tok-failed" {
		t.Fatalf("Acquire = %v, prev %v, %v; want attempt 2 over tok-failed", rec, prev, err)
	}
	if puts, gets := f.counts(); puts != 2 || gets != 0 {
		t.Errorf("%d PutItem, %d GetItem; want 2, 0", puts, gets)
	}
	if cond := aws.ToString(f.puts[1].ConditionExpression); !strings.Contains(cond, "#tok = :prev_tok") {
		t.Errorf("second put's condition %q is not conditioned on the failure", cond)
	}
}

// TestAcquireOverPreviousEncoding writes records as the store wrote them
// before attempts_carried existed and acquires over them on a real
// server: the count continues over a live retryable failure and an ended
// lease (with one write more), restarts over an expired record, and Get
// and List read them.
func TestAcquireOverPreviousEncoding(t *testing.T) {
	integration(t)
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	later := now.Add(2 * time.Hour)
	tests := []struct {
		name        string
		old         core.Record
		at          time.Time
		wantAttempt int
		wantWrites  int
	}{
		{"live retryable failure", core.Fail(withAttempts(core.Reserve("compat:1", fp, "tok-old", nil, now, now.Add(time.Minute), time.Hour), 2),
			errors.New("throttled"), true, now, time.Hour), now.Add(time.Second), 3, 2},
		{"ended lease", withAttempts(core.Reserve("compat:2", fp, "tok-old", nil, now, now.Add(time.Second), time.Hour), 2), now.Add(time.Minute), 3, 2},
		{"expired succeeded record", withAttempts(core.Succeed(core.Reserve("compat:3", fp, "tok-old", nil, now, now.Add(time.Second), time.Hour),
			[]byte(`1`), now, time.Hour), 2), later, 1, 1},
		{"expired retryable failure", core.Fail(withAttempts(core.Reserve("compat:4", fp, "tok-old", nil, now, now.Add(time.Minute), time.Hour), 2),
			errors.New("throttled"), true, now, time.Hour), later, 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			putPrevious(t, f, tc.old)
			if got, err := f.store.Get(ctx, tc.old.Key, now); err != nil || got.Attempts != 2 || got.Status != tc.old.Status {
				t.Fatalf("Get of the old record = %v, %v", got, err)
			}
			f.rec.reset()
			rec := core.Reserve(tc.old.Key, fp, "tok-new", nil, tc.at, tc.at.Add(time.Minute), time.Hour)
			got, _, err := f.store.Acquire(ctx, rec, tc.at, acquirePolicy)
			if err != nil || got.Attempts != tc.wantAttempt {
				t.Fatalf("Acquire = %v, %v; want attempt %d", got, err, tc.wantAttempt)
			}
			if writes := f.rec.count("UpdateItem") + f.rec.count("PutItem"); writes != tc.wantWrites {
				t.Errorf("%d writes, want %d", writes, tc.wantWrites)
			}
			stored, err := f.store.Get(ctx, tc.old.Key, tc.at)
			if err != nil || stored.Attempts != tc.wantAttempt || stored.LeaseToken != "tok-new" {
				t.Errorf("Get after Acquire = %v, %v", stored, err)
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

// putPrevious writes rec as the store wrote it before attempts_carried.
func putPrevious(t *testing.T, f *fixture, rec core.Record) {
	t.Helper()
	item := itemOf(t, rec)
	delete(item, ddbstore.AttrAttemptsCarried)
	if _, err := f.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// TestAcquireWhereUpdateItemIsDenied checks Acquire under an IAM policy
// that grants PutItem and GetItem only: the first UpdateItem is refused
// for access, the store reserves with PutItem, and makes no UpdateItem
// again.
func TestAcquireWhereUpdateItemIsDenied(t *testing.T) {
	t.Parallel()
	f := &fakeUpdater{fakeAPI: &fakeAPI{}, update: func(int, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return nil, apiErr(400, generic("AccessDeniedException"))
	}}
	s, err := ddbstore.New(f, "idem-unit")
	if err != nil {
		t.Fatal(err)
	}
	for i, token := range []string{"tok-1", "tok-2"} {
		rec := core.Reserve(fmt.Sprintf("unit:key:%d", i), fp, token, nil, t0, t0.Add(time.Minute), time.Hour)
		if got, _, err := s.Acquire(context.Background(), rec, t0, acquirePolicy); err != nil || got.Attempts != 1 {
			t.Fatalf("Acquire %d = %v, %v; want attempt 1 through PutItem", i, got, err)
		}
	}
	if puts, _ := f.counts(); len(f.updates) != 1 || puts != 2 {
		t.Errorf("%d UpdateItem, %d PutItem; want 1 (denied), 2", len(f.updates), puts)
	}
}

// TestNewEventOverOldStepsRunsItsOwn: a retryable failure with the step
// "charge", written before attempts_carried existed and past its
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
