package core

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestValidateStepName(t *testing.T) {
	tests := []struct {
		name, step string
		ok         bool
	}{
		{"plain", "charge", true},
		{"punctuation", "email:receipt.v2_x-1", true},
		{"longest", strings.Repeat("a", MaxStepName), true},
		{"empty", "", false},
		{"too long", strings.Repeat("a", MaxStepName+1), false},
		{"space", "send email", false},
		{"slash", "a/b", false},
		{"equals", "a=b", false},
		{"semicolon", "a;b", false},
		{"non-ascii", "café", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateStepName(tc.step)
			if got := err == nil; got != tc.ok {
				t.Fatalf("ValidateStepName(%q) = %v, want ok %v", tc.step, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidStepName) {
				t.Fatalf("error %v does not wrap ErrInvalidStepName", err)
			}
		})
	}
}

func TestAddStep(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	live := Reserve("k-00000001", "fp", "tok", nil, t0, t0.Add(time.Minute), time.Hour)
	withCharge := live
	withCharge.Steps = []Step{{Name: "charge", Result: []byte("ch_1")}}
	charge := Step{Name: "charge", Result: []byte("ch_1")}
	email := Step{Name: "email", Result: nil}
	tests := []struct {
		name   string
		stored *Record
		token  string
		step   Step
		now    time.Time
		want   StepWrite
		steps  []Step
	}{
		{"first step", &live, "tok", charge, t0.Add(time.Second), StepAppend, []Step{charge}},
		{"second step appended in order", &withCharge, "tok", email, t0.Add(time.Second), StepAppend, []Step{charge, email}},
		{"retried write", &withCharge, "tok", charge, t0.Add(time.Second), StepRecorded, nil},
		{"same name, other result", &withCharge, "tok", Step{Name: "charge", Result: []byte("ch_2")}, t0, StepConflict, nil},
		{"no record", nil, "tok", charge, t0, StepLeaseLost, nil},
		{"other token", &live, "tok-other", charge, t0, StepLeaseLost, nil},
		{"lease ended", &live, "tok", charge, t0.Add(time.Minute), StepLeaseLost, nil},
		{"succeeded", ptr(Succeed(live, nil, t0, time.Hour)), "tok", charge, t0, StepLeaseLost, nil},
		{"failed retryably", ptr(Fail(withCharge, errors.New("x"), true, t0, time.Hour)), "tok", email, t0, StepLeaseLost, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before []Step
			if tc.stored != nil {
				before = append(before, tc.stored.Steps...)
			}
			rec, got := AddStep(tc.stored, tc.token, tc.step, tc.now)
			if got != tc.want {
				t.Fatalf("AddStep = %v, want %v", got, tc.want)
			}
			if tc.stored != nil && !reflect.DeepEqual(tc.stored.Steps, before) {
				t.Fatalf("AddStep modified its input: %v, was %v", tc.stored.Steps, before)
			}
			if got != StepAppend {
				return
			}
			if !reflect.DeepEqual(rec.Steps, tc.steps) || !rec.UpdatedAt.Equal(tc.now) {
				t.Fatalf("record steps %v updated %v, want %v at %v", rec.Steps, rec.UpdatedAt, tc.steps, tc.now)
			}
		})
	}
}

func ptr(r Record) *Record { return &r }

// TestStepsThroughTransitions: the steps of a record through the record
// transitions, as a scripted timeline.
func TestStepsThroughTransitions(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	steps := []Step{{Name: "charge", Result: []byte("ch_1")}}
	held := Reserve("k-00000001", "fp", "tok1", nil, at(0), at(30), time.Hour)
	held.Steps = steps
	tests := []struct {
		name string
		rec  Record
		want []Step
	}{
		{"fresh reservation has none", Reserve("k-00000001", "fp", "tok", nil, at(0), at(30), time.Hour), nil},
		{"takeover of an ended lease carries them", Reserve("k-00000001", "fp", "tok2", &held, at(31), at(60), time.Hour), steps},
		{"retry of a retryable failure carries them", Reserve("k-00000001", "fp", "tok2", ptr(Fail(held, errors.New("x"), true, at(5), time.Hour)), at(6), at(60), time.Hour), steps},
		{"other fingerprint carries none", Reserve("k-00000001", "fp2", "tok2", &held, at(31), at(60), time.Hour), nil},
		{"prev past retention carries none", Reserve("k-00000001", "fp", "tok2", ptr(Fail(held, errors.New("x"), true, at(5), time.Minute)), at(3600), at(3700), time.Hour), nil},
		{"succeed drops them", Succeed(held, []byte("ok"), at(5), time.Hour), nil},
		{"retryable failure keeps them", Fail(held, errors.New("x"), true, at(5), time.Hour), steps},
		{"permanent failure drops them", Fail(held, errors.New("x"), false, at(5), time.Hour), nil},
	}
	for i, tc := range tests {
		if !reflect.DeepEqual(tc.rec.Steps, tc.want) {
			t.Errorf("step %d (%s): steps = %v, want %v", i, tc.name, tc.rec.Steps, tc.want)
		}
	}
	taken := Reserve("k-00000001", "fp", "tok2", &held, at(31), at(60), time.Hour)
	taken.Steps[0].Name = "changed"
	if held.Steps[0].Name != "charge" {
		t.Fatalf("Reserve aliased prev's steps")
	}
}

func TestDownstreamKey(t *testing.T) {
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	tests := []struct {
		name           string
		k1, n1, k2, n2 string
		same           bool
	}{
		{"stable", "evt:1:charge", "stripe", "evt:1:charge", "stripe", true},
		{"other name", "evt:1:charge", "stripe", "evt:1:charge", "mail", false},
		{"other key", "evt:1:charge", "stripe", "evt:2:charge", "stripe", false},
		{"boundary moved", "a", "bc", "ab", "c", false},
		{"empty name", "evt:1", "", "evt:", "1", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := DownstreamKey(tc.k1, tc.n1), DownstreamKey(tc.k2, tc.n2)
			if !hex32.MatchString(a) {
				t.Fatalf("DownstreamKey = %q, want 32 hex", a)
			}
			if (a == b) != tc.same {
				t.Fatalf("DownstreamKey(%q,%q)=%s, (%q,%q)=%s, want same %v", tc.k1, tc.n1, a, tc.k2, tc.n2, b, tc.same)
			}
			u1, u2 := DownstreamUUID(tc.k1, tc.n1), DownstreamUUID(tc.k2, tc.n2)
			if (u1 == u2) != tc.same {
				t.Fatalf("DownstreamUUID same = %v, want %v", u1 == u2, tc.same)
			}
		})
	}
	// A pinned value: changing the derivation changes every downstream key
	// in use, which would make downstream APIs run a re-execution again.
	if got, want := DownstreamKey("evt:1:charge", "stripe"), pinnedDownstreamKey; got != want {
		t.Errorf("DownstreamKey(evt:1:charge, stripe) = %s, want %s", got, want)
	}
	if got, want := DownstreamUUID("evt:1:charge", "stripe"), pinnedDownstreamUUID; got != want {
		t.Errorf("DownstreamUUID(evt:1:charge, stripe) = %s, want %s", got, want)
	}
}

var uuidV8 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// FuzzDownstreamKey: keys have their format, are deterministic, and moving
// the boundary between key and name changes them.
func FuzzDownstreamKey(f *testing.F) {
	f.Add("evt:1:charge", "stripe")
	f.Add("", "")
	f.Add("a", "bc")
	f.Fuzz(func(t *testing.T, key, name string) {
		k, u := DownstreamKey(key, name), DownstreamUUID(key, name)
		if len(k) != 32 || k != DownstreamKey(key, name) || strings.ToLower(k) != k {
			t.Fatalf("DownstreamKey(%q, %q) = %q: not 32 stable lowercase hex", key, name, k)
		}
		if !uuidV8.MatchString(u) {
			t.Fatalf("DownstreamUUID(%q, %q) = %q: not an RFC 9562 v8 UUID", key, name, u)
		}
		if name != "" {
			if DownstreamKey(key+name[:1], name[1:]) == k {
				t.Fatalf("moving the boundary of (%q, %q) kept the key", key, name)
			}
		}
	})
}

// The pinned derivations, computed apart from this package (Python's
// hashlib over the documented encoding).
const (
	pinnedDownstreamKey  = "7529c97a9f25e198d962c8c0b4f0e72e"
	pinnedDownstreamUUID = "9adb3dbd-4b49-8a74-9ed6-9e6ec5b5d119"
)

// TestReplaceableNeedsPrevsSteps: a takeover decided on a record that has
// since gained a step (a late write of the holder) is refused.
func TestReplaceableNeedsPrevsSteps(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	prev := Reserve("k-00000001", "fp", "tok", nil, t0, t0.Add(time.Minute), time.Hour)
	stored := prev
	stored.Steps = []Step{{Name: "charge"}}
	now := t0.Add(2 * time.Minute)
	if Replaceable(stored, &prev, now) {
		t.Errorf("Replaceable(record with 1 step, prev with 0) = true, want false")
	}
	if !Replaceable(stored, &stored, now) {
		t.Errorf("Replaceable(record, itself) = false, want true")
	}
}

// TestReservable: a reservation decided on no record is written only over
// no live record; one decided on prev only over prev, still replaceable,
// never over a key whose record went (released) or ended, even without
// steps: it would carry prev's count and steps into a new lifetime.
func TestReservable(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	held := Reserve("k-00000001", "fp", "tok-a", nil, t0, t0.Add(time.Minute), time.Hour)
	failed := Fail(held, errors.New("throttled"), true, t0.Add(time.Second), time.Hour)
	failed.Steps = []Step{{Name: "charge", Result: []byte("ch_1")}}
	other := Reserve("k-00000001", "fp", "tok-b", &failed, t0.Add(2*time.Second), t0.Add(time.Minute), time.Hour)
	after := t0.Add(2 * time.Minute) // held's lease has ended
	for _, tc := range []struct {
		name       string
		live, prev *Record
		want       bool
	}{
		{"first attempt over no record", nil, nil, true},
		{"first attempt over a live record", &held, nil, false},
		{"over prev, an ended lease", &held, &held, true},
		{"over prev, a retryable failure with steps", &failed, &failed, true},
		{"prev went (released, deleted or ended)", nil, &failed, false},
		{"prev went, prev without steps", nil, &held, false},
		{"another record in prev's place", &other, &failed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Reservable(tc.live, tc.prev, after); got != tc.want {
				t.Errorf("Reservable = %v, want %v", got, tc.want)
			}
		})
	}
}
