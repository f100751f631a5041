package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// wantStep is idem.StepRecorder's contract in Go: core.AddStep's verdict as
// stepLua answers it.
func wantStep(cur *core.Record, token string, step core.Step, now time.Time) int64 {
	_, w := core.AddStep(cur, token, step, now)
	switch w {
	case core.StepAppend:
		return verdictWritten
	case core.StepRecorded:
		return verdictSame
	case core.StepConflict:
		return verdictConflict
	}
	return verdictRefused
}

// TestStepRulesMatchCore: stepLua's verdict equals core.AddStep's for every
// stored record of the grid, token and step, and the stored steps are
// core's after it.
func TestStepRulesMatchCore(t *testing.T) {
	t.Parallel()
	e := newRuleEnv(t)
	now := ms(0)
	recorded := []core.Step{{Name: "charge", Result: []byte("ch_1")}, {Name: "empty"}}
	steps := []core.Step{{Name: "charge", Result: []byte("ch_1")}, {Name: "charge", Result: []byte("ch_2")},
		{Name: "empty"}, {Name: "email", Result: []byte{0, 0xff, ';', '='}}, {Name: "charg", Result: []byte("ch_1")}}
	ends := map[string]*time.Time{"zero": nil, "past": ptr(ms(-1)), "now": ptr(ms(0)), "future": ptr(ms(1))}
	kinds := []struct {
		status    core.Status
		retryable bool
	}{{core.StatusInProgress, false}, {core.StatusSucceeded, false}, {core.StatusFailed, true}}
	for _, k := range kinds {
		for leaseName, lease := range ends {
			for _, token := range []string{"tok-s", "tok-n"} {
				for _, step := range steps {
					for _, absent := range []bool{false, true} {
						cur := stored(k.status, k.retryable, lease, ptr(ms(3_600_000)), 1)
						cur.Steps = recorded
						var curp *core.Record
						if !absent {
							curp = &cur
						}
						name := fmt.Sprintf("%s lease=%s token=%s step=%s=%q absent=%v", k.status, leaseName, token, step.Name, step.Result, absent)
						e.step(name, curp, token, step, now)
					}
				}
			}
		}
	}
}

func (e *ruleEnv) step(name string, cur *core.Record, token string, step core.Step, now time.Time) {
	e.t.Helper()
	key := e.put(clone(cur))
	if cur != nil {
		cur.Key = key
	}
	want := wantStep(cur, token, step, now)
	args := []any{now.UnixMilli(), token, step.Name, encodeSteps([]core.Step{step})[len(step.Name)+1:], e.s.maxRecord - stepHeadroom, ""}
	got, _, err := e.s.eval(context.Background(), "test", stepScript, e.s.Name(key), args)
	if err != nil || got != want {
		e.t.Errorf("%s: script verdict %d (%v), core says %d", name, got, err, want)
		return
	}
	after, found, err := e.s.read(context.Background(), "test", key)
	if err != nil || found != (cur != nil) {
		e.t.Fatalf("%s: read after = found %v, %v", name, found, err)
	}
	if cur == nil {
		return
	}
	wantSteps := cur.Steps
	if want == verdictWritten {
		rec, _ := core.AddStep(cur, token, step, now)
		wantSteps = rec.Steps
	}
	if !sameSteps(after.Steps, wantSteps) {
		e.t.Errorf("%s: stored steps %q, want %q", name, after.Steps, wantSteps)
	}
}

func sameSteps(a, b []core.Step) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Result, b[i].Result) {
			return false
		}
	}
	return true
}

// TestStepTooLarge: a step that would pass the record size limit is refused
// with ErrRecordTooLarge and nothing is written; a record holding steps up
// to the limit still completes as a failure.
func TestStepTooLarge(t *testing.T) {
	t.Parallel()
	integration(t)
	s := newStore(t, newClient(t, "", nil), WithMaxRecordSize(MinRecordSize))
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	rec := core.Reserve("evt:big:1", fp, "tok-a", nil, now, now.Add(time.Minute), time.Hour)
	if err := s.Reserve(ctx, rec, nil, now); err != nil {
		t.Fatal(err)
	}
	big := core.Step{Name: "big", Result: bytes.Repeat([]byte("x"), MinRecordSize)}
	err := s.RecordStep(ctx, rec.Key, "tok-a", big, now)
	if !errors.Is(err, ErrRecordTooLarge) || core.Classify(err) != core.Permanent {
		t.Fatalf("RecordStep of a step past the limit = %v, want a permanent ErrRecordTooLarge", err)
	}
	var n int
	for n = 0; ; n++ {
		st := core.Step{Name: fmt.Sprintf("s%d", n), Result: bytes.Repeat([]byte("y"), 100)}
		err := s.RecordStep(ctx, rec.Key, "tok-a", st, now)
		if errors.Is(err, ErrRecordTooLarge) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rec.Steps = append(rec.Steps, st)
	}
	got, err := s.Get(ctx, rec.Key, now)
	if err != nil || !reflect.DeepEqual(got.Steps, rec.Steps) || n == 0 {
		t.Fatalf("Get = %d steps, %v; want the %d recorded", len(got.Steps), err, n)
	}
	failed, err := s.Complete(ctx, core.Fail(rec, errors.New(strings.Repeat("e", 2*MinRecordSize)), true, now, time.Hour))
	if err != nil || len(failed.Steps) != n {
		t.Fatalf("Complete of a failure with %d steps = %d steps, %v; want them kept", n, len(failed.Steps), err)
	}
	if err := s.RecordStep(ctx, rec.Key, "tok-a", big, now); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("RecordStep after the completion = %v, want ErrLeaseLost", err)
	}
}

// TestReserveRulesWithSteps: a takeover decided on prev is refused when the
// stored record has gained a step since (core.Replaceable counts steps).
func TestReserveRulesWithSteps(t *testing.T) {
	t.Parallel()
	e := newRuleEnv(t)
	now := ms(0)
	for _, k := range []struct {
		status    core.Status
		retryable bool
		lease     *time.Time
	}{{core.StatusInProgress, false, ptr(ms(0))}, {core.StatusFailed, true, nil}} {
		for _, n := range []int{0, 1, 2} {
			cur := stored(k.status, k.retryable, k.lease, ptr(ms(3_600_000)), 1)
			cur.Steps = []core.Step{{Name: "a", Result: []byte("1")}, {Name: "b"}}[:n]
			for _, pn := range []int{0, 1, 2} {
				prev := clone(&cur)
				prev.Steps = []core.Step{{Name: "a", Result: []byte("1")}, {Name: "b"}}[:pn]
				name := fmt.Sprintf("%s with %d steps, prev with %d", k.status, n, pn)
				want := verdictRefused
				if n == pn {
					want = verdictWritten
				}
				if got := e.reserve(name, clone(&cur), "tok-n", 2, prev, now); got != int64(want) {
					t.Errorf("%s: core says %d, want %d", name, got, want)
				}
			}
		}
	}
}
