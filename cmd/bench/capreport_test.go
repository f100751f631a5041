package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/idemgo/idem/internal/capacity"
)

func TestCheckCapacity(t *testing.T) {
	t.Parallel()
	ok := capacity.Totals{"PutItem": {Calls: 2, Write: 2, ComputedWrite: 2, Reported: 2}, "UpdateItem": {Calls: 2, Write: 2, ComputedWrite: 2}}
	calls := map[string]int64{"PutItem": 2, "UpdateItem": 2, "CreateTable": 1}
	for _, tc := range []struct {
		name  string
		d     capDelta
		calls map[string]int64
		want  []string
	}{
		{"consistent (CreateTable is not charged)", capDelta{Totals: ok}, calls, nil},
		{"a request not charged", capDelta{Totals: ok, Errors: 1, Last: "PutItem: boom"}, calls, []string{"1 requests not charged (last: PutItem: boom)"}},
		{"approximate and mismatched", capDelta{Totals: capacity.Totals{"PutItem": {Calls: 2, Approximate: 1, Mismatches: 2}, "UpdateItem": ok["UpdateItem"]}}, calls,
			[]string{"1 charges approximate", "2 reports differ from the computed units"}},
		{"a call counted but not charged", capDelta{Totals: capacity.Totals{"PutItem": ok["PutItem"]}}, calls, []string{"UpdateItem: 2 calls counted, 0 charged"}},
		{"a call charged but not counted", capDelta{Totals: ok}, map[string]int64{"PutItem": 2}, []string{"UpdateItem: 2 calls charged, none counted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkCapacity(tc.d, tc.calls); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("checkCapacity = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNewCapFigures(t *testing.T) {
	t.Parallel()
	run := func(write, read float64, reported int64) capDelta {
		return capDelta{Totals: capacity.Totals{
			"UpdateItem": {Calls: 10, Write: write, ComputedWrite: write, ConditionFailed: 10, Reported: reported},
			"GetItem":    {Calls: 10, Read: read, ComputedRead: read, Reported: 10}}}
	}
	f := newCapFigures([]capDelta{run(10, 10, 0), run(30, 10, 0), run(20, 5, 0)}, 10)
	if f.WritePerEvent != 2 || f.ReadPerEvent != 1 || f.FailedPerEv != 1 || f.ByOp["UpdateItem"].Write != 2 || f.CallsPerEvent["GetItem"] != 1 {
		t.Errorf("figures = %+v", f)
	}
	if !strings.HasPrefix(f.Source, "reported by the server for 30 of 60 calls") {
		t.Errorf("source = %q", f.Source)
	}
	if got := newCapFigures([]capDelta{run(10, 10, 10)}, 10).Source; got != "reported by the server" {
		t.Errorf("source = %q", got)
	}
	if got := newCapFigures([]capDelta{{}}, 10).Source; got != "no calls" {
		t.Errorf("source of no calls = %q", got)
	}
}

func TestFmtPositions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		units []float64
		want  string
	}{
		{nil, ""},
		{[]float64{1}, "1 (step 1)"},
		{[]float64{1, 1, 1, 2, 2, 3}, "1 (steps 1–3), 2 (steps 4–5), 3 (step 6)"},
		{[]float64{5, 9, 13, 17, 21, 25, 29, 33}, "5 (step 1), 9 (step 2), 13 (step 3), …, 29 (step 7), 33 (step 8)"},
	} {
		if got := fmtPositions(tc.units); got != tc.want {
			t.Errorf("fmtPositions(%v) = %q, want %q", tc.units, got, tc.want)
		}
	}
}

func TestCapacityTargets(t *testing.T) {
	t.Parallel()
	r := &report{
		Capacity: []capRow{
			{Scenario: "steps_1_small", Figures: map[string]any{"completion_write_units": 1.0}},
			{Scenario: "steps_1_4KB", Figures: map[string]any{"completion_write_units": 5.0}},
			{Scenario: "steps_50_small", Figures: map[string]any{"steps_vs_k_times_one_step": 1.84, "step_write_units_per_execution": 92.0, "completion_write_units": 3.0}},
			{Scenario: "steps_50_4KB", Figures: map[string]any{"steps_vs_k_times_one_step": 1.0, "step_write_units_per_execution": 250.0, "completion_write_units": 6.0}},
			{Scenario: "steps_10_small", Figures: map[string]any{"steps_vs_k_times_one_step": 1.0}},
		},
		Storm: &stormResult{Dynalite: &stormFigures{Deliveries: 10000, WritePerDelivery: 1, WritePerLeaseSecond: 285.7},
			Sim: &stormFigures{WritePerLeaseSecond: 285.8}},
	}
	var got []target
	r.capacityTargets(func(t target) { got = append(got, t) })
	want := []string{"missed", "missed", "met", "met", "missed"}
	if len(got) != len(want) {
		t.Fatalf("targets = %+v, want %d", got, len(want))
	}
	for i, w := range want {
		if got[i].Status != w {
			t.Errorf("target %d (%s: %s) is %s, want %s", i, got[i].Target, got[i].Measured, got[i].Status, w)
		}
	}
}
