package linz_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/linz"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

const key = "evt:order-42:charge"

var fp = func() string {
	s, err := core.Fingerprint([]byte(`{"order":42}`))
	if err != nil {
		panic(err)
	}
	return s
}()

// TestModelTimeline scripts one key through the model, each answer as the
// contract's method docs state it.
func TestModelTimeline(t *testing.T) {
	a := core.Reserve(key, fp, "tok-a", nil, at(0), at(10), time.Minute)
	charge := core.Step{Name: "charge", Result: []byte("1")}
	cRes := core.Reserve(key, fp, "tok-c", nil, at(25), at(35), time.Minute)
	var c core.Record // as acquired
	var d core.Record // reserved over c's failure
	e := core.Reserve(key, fp, "tok-e", nil, at(30), at(40), time.Minute)
	eDone := core.Succeed(e, []byte("ok"), at(31), time.Minute)
	steps := []struct {
		name  string
		op    func() linz.Op
		want  linz.Verdict
		check func(r linz.Result, s linz.State) bool // nil: the verdict is enough
	}{
		{"nothing stored", func() linz.Op { return linz.Op{Kind: linz.Get, Key: key, Now: at(0)} }, linz.NotFound, nil},
		{"first reservation", func() linz.Op { return linz.Op{Kind: linz.Reserve, Key: key, Rec: a, Now: at(0)} }, linz.OK, nil},
		{"second reservation is blocked", func() linz.Op {
			return linz.Op{Kind: linz.Reserve, Key: key, Rec: core.Reserve(key, fp, "tok-b", nil, at(1), at(11), time.Minute), Now: at(1)}
		}, linz.Conflict, func(r linz.Result, _ linz.State) bool { return r.Rec.LeaseToken == "tok-a" }},
		{"retried reservation", func() linz.Op { return linz.Op{Kind: linz.Reserve, Key: key, Rec: a, Now: at(1)} }, linz.OK, nil},
		{"step", func() linz.Op {
			return linz.Op{Kind: linz.RecordStep, Key: key, Token: "tok-a", Step: charge, Now: at(2)}
		}, linz.OK,
			func(_ linz.Result, s linz.State) bool { return len(s.Rec.Steps) == 1 && s.Rec.UpdatedAt.Equal(at(2)) }},
		{"retried step", func() linz.Op {
			return linz.Op{Kind: linz.RecordStep, Key: key, Token: "tok-a", Step: charge, Now: at(3)}
		}, linz.OK,
			func(_ linz.Result, s linz.State) bool { return len(s.Rec.Steps) == 1 && s.Rec.UpdatedAt.Equal(at(2)) }},
		{"step with another result", func() linz.Op {
			return linz.Op{Kind: linz.RecordStep, Key: key, Token: "tok-a", Step: core.Step{Name: "charge", Result: []byte("2")}, Now: at(3)}
		}, linz.StepConflict, nil},
		{"renewal", func() linz.Op { return linz.Op{Kind: linz.RenewLease, Key: key, Rec: a, Until: at(20), Now: at(5)} }, linz.OK,
			func(r linz.Result, _ linz.State) bool { return r.Rec.LeaseUntil.Equal(at(20)) && len(r.Rec.Steps) == 1 }},
		{"shorter renewal changes nothing", func() linz.Op { return linz.Op{Kind: linz.RenewLease, Key: key, Rec: a, Until: at(15), Now: at(6)} }, linz.OK,
			func(r linz.Result, _ linz.State) bool { return r.Rec.LeaseUntil.Equal(at(20)) }},
		{"duplicate acquisition during the lease", func() linz.Op {
			return linz.Op{Kind: linz.Acquire, Key: key, Rec: core.Reserve(key, fp, "tok-x", nil, at(19), at(29), time.Minute), Now: at(19), Policy: core.Policy{MaxAttempts: 3}}
		}, linz.Conflict, nil},
		{"takeover once the lease ended", func() linz.Op {
			return linz.Op{Kind: linz.Acquire, Key: key, Rec: cRes, Now: at(25), Policy: core.Policy{MaxAttempts: 3}}
		}, linz.OK, func(r linz.Result, _ linz.State) bool {
			c = *r.Rec
			return c.Attempts == 2 && len(c.Steps) == 1 && r.Prev != nil && r.Prev.LeaseToken == "tok-a"
		}},
		{"stale holder's completion", func() linz.Op {
			return linz.Op{Kind: linz.Complete, Key: key, Rec: core.Succeed(a, nil, at(25), time.Minute)}
		}, linz.LeaseLost, nil},
		{"stale holder's step", func() linz.Op {
			return linz.Op{Kind: linz.RecordStep, Key: key, Token: "tok-a", Step: core.Step{Name: "mail"}, Now: at(25)}
		}, linz.LeaseLost, nil},
		{"stale holder's renewal", func() linz.Op { return linz.Op{Kind: linz.RenewLease, Key: key, Rec: a, Until: at(40), Now: at(25)} }, linz.LeaseLost, nil},
		{"retryable failure keeps the steps", func() linz.Op {
			return linz.Op{Kind: linz.Complete, Key: key, Rec: core.Fail(c, errors.New("flaky"), true, at(26), time.Minute)}
		}, linz.OK, func(r linz.Result, _ linz.State) bool { return r.Rec.Retryable && len(r.Rec.Steps) == 1 }},
		{"retry over the failure", func() linz.Op {
			prev := core.Fail(c, errors.New("flaky"), true, at(26), time.Minute)
			d = core.Reserve(key, fp, "tok-d", &prev, at(27), at(37), time.Minute)
			return linz.Op{Kind: linz.Reserve, Key: key, Rec: d, Prev: &prev, Now: at(27)}
		}, linz.OK, func(_ linz.Result, s linz.State) bool { return s.Rec.Attempts == 3 && len(s.Rec.Steps) == 1 }},
		{"release of a record changed since", func() linz.Op { return linz.Op{Kind: linz.Release, Key: key, Rec: c} }, linz.RecordChanged, nil},
		{"release", func() linz.Op { return linz.Op{Kind: linz.Release, Key: key, Rec: d} }, linz.OK,
			func(_ linz.Result, s linz.State) bool { return s.Rec == nil }},
		{"released", func() linz.Op { return linz.Op{Kind: linz.Get, Key: key, Now: at(28)} }, linz.NotFound, nil},
		{"release again", func() linz.Op { return linz.Op{Kind: linz.Release, Key: key, Rec: d} }, linz.NotFound, nil},
		{"retry over the released record", func() linz.Op {
			return linz.Op{Kind: linz.Reserve, Key: key, Rec: core.Reserve(key, fp, "tok-r", &d, at(29), at(39), time.Minute), Prev: &d, Now: at(29)}
		}, linz.RecordChanged, func(_ linz.Result, s linz.State) bool { return s.Rec == nil }},
		{"staged commit without a reservation", func() linz.Op { return linz.Op{Kind: linz.CompleteStaged, Key: key, Rec: eDone} }, linz.LeaseLost,
			func(_ linz.Result, s linz.State) bool { return s.Effects == 0 }},
		{"new reservation", func() linz.Op { return linz.Op{Kind: linz.Reserve, Key: key, Rec: e, Now: at(30)} }, linz.OK, nil},
		{"staged commit", func() linz.Op { return linz.Op{Kind: linz.CompleteStaged, Key: key, Rec: eDone} }, linz.OK,
			func(_ linz.Result, s linz.State) bool { return s.Effects == 1 && s.Rec.Status == core.StatusSucceeded }},
		{"retried staged commit applies nothing", func() linz.Op { return linz.Op{Kind: linz.CompleteStaged, Key: key, Rec: eDone} }, linz.OK,
			func(_ linz.Result, s linz.State) bool { return s.Effects == 1 }},
		{"effects", func() linz.Op { return linz.Op{Kind: linz.Effects, Key: key} }, linz.OK,
			func(r linz.Result, _ linz.State) bool { return r.Count == 1 }},
		{"success replays", func() linz.Op { return linz.Op{Kind: linz.Get, Key: key, Now: at(90)} }, linz.OK, nil},
		{"past retention", func() linz.Op { return linz.Op{Kind: linz.Get, Key: key, Now: at(91)} }, linz.NotFound, nil},
		{"release past retention", func() linz.Op { return linz.Op{Kind: linz.Release, Key: key, Rec: eDone} }, linz.OK, nil},
	}
	var m linz.Model
	var s linz.State
	for i, st := range steps {
		var r linz.Result
		r, s = m.Step(s, st.op())
		if r.Verdict != st.want {
			t.Fatalf("step %d (%s): verdict %s, want %s", i, st.name, r.Verdict, st.want)
		}
		if st.check != nil && !st.check(r, s) {
			t.Fatalf("step %d (%s): answer %+v, state %+v", i, st.name, r, s)
		}
	}
}

// TestResolution checks that records are kept at the store's resolution:
// ends rounded up, the time of the write rounded down.
func TestResolution(t *testing.T) {
	ms := time.Millisecond
	x := t0.Add(1500*ms + 300*time.Microsecond)
	cases := []struct {
		name                string
		res                 linz.Resolution
		exp, lease, updated time.Time
	}{
		{"exact", linz.Resolution{}, x, x, x},
		{"milliseconds", linz.RedisResolution, t0.Add(1501 * ms), t0.Add(1501 * ms), t0.Add(1500 * ms)},
		{"seconds for retention", linz.DynamoResolution, t0.Add(2 * time.Second), t0.Add(1501 * ms), t0.Add(1500 * ms)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.res.Normalize(core.Record{ExpiresAt: x, LeaseUntil: x, UpdatedAt: x})
			if !got.ExpiresAt.Equal(tc.exp) || !got.LeaseUntil.Equal(tc.lease) || !got.UpdatedAt.Equal(tc.updated) {
				t.Errorf("Normalize = %v %v %v, want %v %v %v", got.ExpiresAt, got.LeaseUntil, got.UpdatedAt, tc.exp, tc.lease, tc.updated)
			}
			if z := tc.res.Normalize(core.Record{}); !z.ExpiresAt.IsZero() || !z.LeaseUntil.IsZero() || !z.UpdatedAt.IsZero() {
				t.Errorf("Normalize of zero times = %v", z)
			}
		})
	}
}
