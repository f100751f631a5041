package ddbstore

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// TestStepRefIsStable pins the step reference: records written by one
// version reference step items by it, so a change would make every step
// item a later version writes unreachable from the records before it. The
// values are SHA-256's first 8 bytes over the length-prefixed label, name
// and result, computed apart from the code (Python's hashlib).
func TestStepRefIsStable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		step core.Step
		want string
	}{
		{"with a result", core.Step{Name: "charge", Result: []byte("ch_1")}, "e13a7564add0c959"},
		{"empty result", core.Step{Name: "email"}, "72697bb90c63d359"},
		{"name and result split elsewhere", core.Step{Name: "charg", Result: []byte("ech_1")}, "4a25252546874eb5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ref := refOf(tc.step)
			if got := hex.EncodeToString(ref[:]); got != tc.want {
				t.Errorf("refOf(%q, %q) = %s, want %s", tc.step.Name, tc.step.Result, got, tc.want)
			}
		})
	}
}

// itemTTL reads the end of retention of key's step item for step.
func itemTTL(t *testing.T, s *Store, key string, step core.Step) int64 {
	t.Helper()
	out, err := s.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &s.table, Key: s.stepItemKey(key, refOf(step)), ConsistentRead: new(bool)})
	if err != nil || len(out.Item) == 0 {
		t.Fatalf("step item of %s: %v, %d attributes", step.Name, err, len(out.Item))
	}
	ttl, ok := (&itemReader{item: out.Item}).num(s.ttlAttr)
	if !ok {
		t.Fatalf("step item of %s has no TTL attribute", step.Name)
	}
	return ttl
}

// recordAttrs reads the record of key's steps_until and the kinds of its
// steps list's elements ("M" kept in the record, "B" referenced).
func recordAttrs(t *testing.T, s *Store, key string) (until int64, kinds string) {
	t.Helper()
	item, err := s.getItem(context.Background(), "test", key)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.storedStepsOf(item)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range st.entries {
		kinds += map[bool]string{true: "B", false: "M"}[e.isRef]
	}
	return st.until, kinds
}

// TestStepItemsOutliveTheRecord: a step item ends its retention no earlier
// than its record, also for a retention longer than the store's guess (the
// reference is refused, the item written again to end later); a renewal
// that would move the record's end past its step items' extends them; the
// record's steps_until is the earliest end of its step items throughout.
func TestStepItemsOutliveTheRecord(t *testing.T) {
	s := stepStore(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	rec := core.Reserve("evt:ttl:1", fmt64, "tok-a", nil, now, now.Add(time.Minute), 10*24*time.Hour)
	if err := s.Reserve(ctx, rec, nil, now); err != nil {
		t.Fatal(err)
	}
	charge := core.Step{Name: "charge", Result: []byte("ch_1")}
	if err := s.RecordStep(ctx, rec.Key, "tok-a", charge, now); err != nil {
		t.Fatal(err)
	}
	until, kinds := recordAttrs(t, s, rec.Key)
	if ttl := itemTTL(t, s, rec.Key, charge); ttl < rec.ExpiresAt.Unix() || until != ttl || kinds != "B" {
		t.Fatalf("step item ends at %d, record at %d, steps_until %d, steps %s; want the item after the record, steps_until its end, one reference",
			ttl, rec.ExpiresAt.Unix(), until, kinds)
	}
	// A record of a short retention, renewed far past its step items.
	short := core.Reserve("evt:ttl:2", fmt64, "tok-b", nil, now, now.Add(time.Minute), time.Minute)
	got, _, err := s.Acquire(ctx, short, now, core.Policy{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordStep(ctx, short.Key, "tok-b", charge, now); err != nil {
		t.Fatal(err)
	}
	first := itemTTL(t, s, short.Key, charge)
	far := now.Add(time.Hour)
	renewed, err := s.RenewLease(ctx, got, far, now.Add(time.Second))
	if err != nil || !sameSteps(renewed.Steps, []core.Step{charge}) {
		t.Fatalf("RenewLease past the step items = %v (steps %q), %v; want renewed with the step", renewed, renewed.Steps, err)
	}
	until, _ = recordAttrs(t, s, short.Key)
	if ttl := itemTTL(t, s, short.Key, charge); ttl <= first || ttl < far.Unix() || until != ttl {
		t.Errorf("after the renewal the step item ends at %d (was %d), steps_until %d; want both at or after %d", ttl, first, until, far.Unix())
	}
}

// TestFailureKeepsStepsReferenced: a retryable failure whose steps are all
// stored keeps them referenced (one UpdateItem); one whose record lacks a
// step the caller counts as done (a write that may have been applied and
// was not) writes that step's item and appends its reference; one whose
// retention would pass its step items' extends them first. Every step
// stays a reference (the store writes no other encoding), a step recorded
// after that is referenced too, and Get and a retry's reservation have
// every step in order.
func TestFailureKeepsStepsReferenced(t *testing.T) {
	s := stepStore(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	a, b, c := core.Step{Name: "a", Result: []byte("1")}, core.Step{Name: "b"}, core.Step{Name: "c", Result: []byte("3")}
	tests := []struct {
		name      string
		claimed   []core.Step // the caller's steps at the failure
		retention time.Duration
		want      string // the kinds of the stored steps, then of the next step
	}{
		{"all stored", []core.Step{a}, time.Hour, "BB"},
		{"one not applied", []core.Step{a, b}, time.Hour, "BBB"},
		{"retention past the items", []core.Step{a}, 400 * 24 * time.Hour, "BB"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := "evt:fail:" + string(rune('1'+i))
			rec := core.Reserve(key, fmt64, "tok-a", nil, now, now.Add(time.Minute), time.Hour)
			if err := s.Reserve(ctx, rec, nil, now); err != nil {
				t.Fatal(err)
			}
			if err := s.RecordStep(ctx, key, "tok-a", a, now); err != nil {
				t.Fatal(err)
			}
			rec.Steps = tc.claimed
			failed, err := s.Complete(ctx, core.Fail(rec, errors.New("throttled"), true, now.Add(time.Second), tc.retention))
			if err != nil || !sameSteps(failed.Steps, tc.claimed) {
				t.Fatalf("Complete = %q, %v; want the steps %q", failed.Steps, err, tc.claimed)
			}
			retry := core.Reserve(key, fmt64, "tok-b", &failed, now.Add(2*time.Second), now.Add(time.Minute), time.Hour)
			if err := s.Reserve(ctx, retry, &failed, now.Add(2*time.Second)); err != nil {
				t.Fatalf("the retry's reservation = %v", err)
			}
			if err := s.RecordStep(ctx, key, "tok-b", c, now.Add(3*time.Second)); err != nil {
				t.Fatal(err)
			}
			want := append(append([]core.Step(nil), tc.claimed...), c)
			got, err := s.Get(ctx, key, now.Add(4*time.Second))
			if _, kinds := recordAttrs(t, s, key); err != nil || !sameSteps(got.Steps, want) || kinds != tc.want {
				t.Errorf("Get = %q (stored as %s), %v; want %q stored as %s", got.Steps, kinds, err, want, tc.want)
			}
		})
	}
}

// TestPreviousEncodingGainsReferences: a record written by v0.1.0 (every
// step kept in it) takes new steps as references; Get, a
// takeover's Acquire and its record have the steps in order.
func TestPreviousEncodingGainsReferences(t *testing.T) {
	s := stepStore(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	rec := core.Reserve("evt:prev:1", fmt64, "tok-a", nil, now, now.Add(10*time.Second), time.Hour)
	a, b := core.Step{Name: "a", Result: []byte("1")}, core.Step{Name: "b", Result: []byte("2")}
	rec.Steps = []core.Step{a}
	s.putRaw(t, rec) // v0.1.0's encoding: the step kept in the record
	if err := s.RecordStep(ctx, rec.Key, "tok-a", b, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, kinds := recordAttrs(t, s, rec.Key); kinds != "MB" {
		t.Fatalf("steps stored as %s, want MB", kinds)
	}
	at := now.Add(20 * time.Second)
	taken, prev, err := s.Acquire(ctx, core.Reserve(rec.Key, fmt64, "tok-b", nil, at, at.Add(time.Minute), time.Hour), at, core.Policy{MaxAttempts: 3})
	if err != nil || prev == nil || !sameSteps(taken.Steps, []core.Step{a, b}) || !sameSteps(prev.Steps, []core.Step{a, b}) {
		t.Fatalf("Acquire over the ended lease = %v (steps %q), prev %v, %v; want both steps carried", taken, taken.Steps, prev, err)
	}
	got, err := s.Get(ctx, rec.Key, at)
	if err != nil || !sameSteps(got.Steps, []core.Step{a, b}) {
		t.Errorf("Get = %q, %v; want a then b", got.Steps, err)
	}
}

// TestMissingStepItemIsCorrupt: a record whose step item is missing is
// ErrCorruptRecord, never a record without the step.
func TestMissingStepItemIsCorrupt(t *testing.T) {
	s := stepStore(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	rec := core.Reserve("evt:missing:1", fmt64, "tok-a", nil, now, now.Add(time.Minute), time.Hour)
	if err := s.Reserve(ctx, rec, nil, now); err != nil {
		t.Fatal(err)
	}
	steps := []core.Step{{Name: "a", Result: []byte("1")}, {Name: "b"}}
	for _, st := range steps {
		if err := s.RecordStep(ctx, rec.Key, "tok-a", st, now); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Get(ctx, rec.Key, now); err != nil || !sameSteps(got.Steps, steps) {
		t.Fatalf("Get = %q, %v; want %q", got.Steps, err, steps)
	}
	if _, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: s.stepItemKey(rec.Key, refOf(steps[1]))}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, rec.Key, now); !errors.Is(err, ErrCorruptRecord) || core.Classify(err) != core.Permanent {
		t.Errorf("Get with a step item missing = %q, %v; want a permanent ErrCorruptRecord", got.Steps, err)
	}
}

// TestListSkipsStepItems: List leaves step items out of its records and
// counts them, in both layouts; a record's steps kept in step items are
// not read (Steps nil).
func TestListSkipsStepItems(t *testing.T) {
	layouts := map[string][]Option{
		"default":       nil,
		"sort key func": {WithSortKeyFunc("SK", func(key string) string { return "idem#" + key[:3] })},
	}
	for name, opts := range layouts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := stepStore(t, opts...)
			ctx := context.Background()
			now := time.Now().Truncate(time.Second)
			rec := core.Reserve("evt:list:1", fmt64, "tok-a", nil, now, now.Add(time.Minute), time.Hour)
			if err := s.Reserve(ctx, rec, nil, now); err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"a", "b", "c"} {
				if err := s.RecordStep(ctx, rec.Key, "tok-a", core.Step{Name: n}, now); err != nil {
					t.Fatal(err)
				}
			}
			page, err := s.List(ctx, ListInput{})
			if err != nil || len(page.Records) != 1 || page.StepItems != 3 || page.Corrupt != 0 || page.Foreign != 0 || page.Records[0].Steps != nil {
				t.Fatalf("List = %d records (steps %q), %d step items, %d corrupt, %d foreign, %v; want 1 record without its steps, 3 step items",
					len(page.Records), stepsOfFirst(page), page.StepItems, page.Corrupt, page.Foreign, err)
			}
		})
	}
}

func stepsOfFirst(p ListPage) []core.Step {
	if len(p.Records) == 0 {
		return nil
	}
	return p.Records[0].Steps
}

// TestStepKeyLimits: a key whose step items' keys would not fit DynamoDB's
// key limits is refused before any call, with a permanent ErrKeyTooLarge.
func TestStepKeyLimits(t *testing.T) {
	t.Parallel()
	hashOnly, err := New(benchAPI{}, "idempotency")
	if err != nil {
		t.Fatal(err)
	}
	sorted, err := New(benchAPI{}, "idempotency", WithSortKey("SK", strings.Repeat("s", maxSortKeyBytes-stepKeyGrowth+1)))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		s    *Store
		key  string
	}{
		{"partition key", hashOnly, strings.Repeat("k", maxKeyBytes-stepKeyGrowth+1)},
		{"sort key", sorted, "evt:1:charge"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.s.checkStep("step", tc.key, "tok", core.Step{Name: "charge"})
			if !errors.Is(err, ErrKeyTooLarge) || core.Classify(err) != core.Permanent {
				t.Errorf("checkStep = %v, want a permanent ErrKeyTooLarge", err)
			}
		})
	}
}

// TestRefusedStepWithTheSameReference: a step item already stored with the
// same reference and a later end is kept (a retried write), and the step is
// recorded; one whose step differs (two steps with one reference) fails the
// step with a permanent ErrCorruptRecord, and the record is not changed.
func TestRefusedStepWithTheSameReference(t *testing.T) {
	s := stepStore(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	rec := core.Reserve("evt:ref:1", fmt64, "tok-a", nil, now, now.Add(time.Minute), time.Hour)
	if err := s.Reserve(ctx, rec, nil, now); err != nil {
		t.Fatal(err)
	}
	a, b := core.Step{Name: "a", Result: []byte("1")}, core.Step{Name: "b", Result: []byte("2")}
	if err := s.putStepItem(ctx, "test", rec.Key, a, 1<<40); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordStep(ctx, rec.Key, "tok-a", a, now); err != nil {
		t.Fatalf("RecordStep over its own item = %v", err)
	}
	forged := s.stepItem(rec.Key, a, 1<<40)
	forged[s.names.Steps] = &types.AttributeValueMemberL{Value: []types.AttributeValue{stepValue(b)}}
	forged[s.keyAttr] = s.stepItemKey(rec.Key, refOf(b))[s.keyAttr]
	if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: forged}); err != nil {
		t.Fatal(err)
	}
	b.Result = []byte("another")
	forged[s.keyAttr] = s.stepItemKey(rec.Key, refOf(b))[s.keyAttr]
	if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: forged}); err != nil {
		t.Fatal(err)
	}
	err := s.RecordStep(ctx, rec.Key, "tok-a", b, now)
	if !errors.Is(err, ErrCorruptRecord) || core.Classify(err) != core.Permanent || errors.Is(err, idem.ErrLeaseLost) {
		t.Errorf("RecordStep over another step's item = %v, want a permanent ErrCorruptRecord", err)
	}
	if got, err := s.Get(ctx, rec.Key, now); err != nil || !sameSteps(got.Steps, []core.Step{a}) {
		t.Errorf("Get = %q, %v; want only a", got.Steps, err)
	}
}
