package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/idemgo/idem/internal/capacity"
)

// Capacity units per event, from the counting proxy's ledger (charge.go).

// opUnits are one operation's capacity units per event.
type opUnits struct {
	Write float64 `json:"write_units"`
	Read  float64 `json:"read_units"`
}

// capFigures are a measurement's capacity units per event (medians over
// runs where there are several).
type capFigures struct {
	WritePerEvent float64            `json:"write_units_per_event"`
	ReadPerEvent  float64            `json:"read_units_per_event"`
	ByOp          map[string]opUnits `json:"units_per_event_by_operation"`
	FailedPerEv   float64            `json:"failed_conditions_per_event"`
	Source        string             `json:"units_source"`
	CallsPerEvent map[string]float64 `json:"charged_calls_per_event"`
	PerRunWrite   []float64          `json:"write_units_per_event_per_run"`
}

// capDelta is the capacity the proxy charged between two snapshots.
type capDelta struct {
	Totals capacity.Totals
	Errors int64
	Last   string
}

func diffCapacity(before, after capacityReport) capDelta {
	return capDelta{Totals: after.Totals.Sub(before.Totals), Errors: after.Errors - before.Errors, Last: after.LastError}
}

// newCapFigures computes the figures of runs, each of events events.
func newCapFigures(runs []capDelta, events int) *capFigures {
	f := &capFigures{ByOp: map[string]opUnits{}, CallsPerEvent: map[string]float64{}}
	if len(runs) == 0 || events <= 0 {
		return f
	}
	n := float64(events)
	var w, r, failed []float64
	ops := map[string]bool{}
	var reported, calls int64
	for _, d := range runs {
		sum := d.Totals.Sum()
		w, r, failed = append(w, sum.Write/n), append(r, sum.Read/n), append(failed, float64(sum.ConditionFailed)/n)
		reported, calls = reported+sum.Reported, calls+sum.Calls
		f.PerRunWrite = append(f.PerRunWrite, round(sum.Write/n, 3))
		for op := range d.Totals {
			ops[op] = true
		}
	}
	f.WritePerEvent, f.ReadPerEvent, f.FailedPerEv = round(median(w), 3), round(median(r), 3), round(median(failed), 3)
	for op := range ops {
		var ow, or, oc []float64
		for _, d := range runs {
			t := d.Totals[op]
			ow, or, oc = append(ow, t.Write/n), append(or, t.Read/n), append(oc, float64(t.Calls)/n)
		}
		f.ByOp[op] = opUnits{Write: round(median(ow), 3), Read: round(median(or), 3)}
		f.CallsPerEvent[op] = round(median(oc), 3)
	}
	f.Source = unitsSource(reported, calls)
	return f
}

// unitsSource says where a measurement's units come from.
func unitsSource(reported, calls int64) string {
	switch {
	case calls == 0:
		return "no calls"
	case reported == calls:
		return "reported by the server"
	case reported == 0:
		return "computed from the items sent"
	}
	return fmt.Sprintf("reported by the server for %d of %d calls, computed for the others (failed conditions, transactions)", reported, calls)
}

// checkCapacity returns what is inconsistent in one measurement: requests
// the ledger could not charge, units it could only approximate, trusted
// reports that differ from the computed units, and charged calls that do
// not match the calls the proxy counted.
func checkCapacity(d capDelta, calls map[string]int64) []string {
	var out []string
	if d.Errors != 0 {
		out = append(out, fmt.Sprintf("%d requests not charged (last: %s)", d.Errors, d.Last))
	}
	sum := d.Totals.Sum()
	if sum.Approximate != 0 {
		out = append(out, fmt.Sprintf("%d charges approximate", sum.Approximate))
	}
	if sum.Mismatches != 0 {
		out = append(out, fmt.Sprintf("%d reports differ from the computed units", sum.Mismatches))
	}
	for _, op := range slices.Sorted(maps.Keys(calls)) {
		if itemOps[op] && d.Totals[op].Calls != calls[op] {
			out = append(out, fmt.Sprintf("%s: %d calls counted, %d charged", op, calls[op], d.Totals[op].Calls))
		}
	}
	for op, t := range d.Totals {
		if calls[op] == 0 && t.Calls != 0 {
			out = append(out, fmt.Sprintf("%s: %d calls charged, none counted", op, t.Calls))
		}
	}
	slices.Sort(out)
	return out
}

// fmtUnits shows units per event with up to three decimals.
func fmtUnits(x float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", x), "0"), ".")
}

// Capacity targets: a step's units independent of the steps before it,
// and a storm on one key that costs a few write units per second of lease.
const (
	stepsTarget     = 1.1 // steps' units ÷ (steps × one step's), rounding allowed for
	completionSlack = 1   // write units a completion after 50 steps may cost more than after one
	stormTarget     = 5   // write units per second of lease
)

// capFigure returns the figure name of the capacity row of scenario, if
// it is a number.
func (r *report) capFigure(scenario, name string) (float64, bool) {
	for _, row := range r.Capacity {
		if row.Scenario == scenario {
			x, ok := row.Figures[name].(float64)
			return x, ok
		}
	}
	return 0, false
}

// capacityTargets adds the capacity targets the capacity section and the
// storm measured.
func (r *report) capacityTargets(add func(target)) {
	if m := r.modeFig("a_unique", "seq"); m != nil && m.Capacity != nil {
		add(target{Target: "first execution: 2 write units, no read", Status: status(m.Capacity.WritePerEvent == 2 && m.Capacity.ReadPerEvent == 0),
			Measured: fmt.Sprintf("%s + %s per event (a_unique seq)", fmtUnits(m.Capacity.WritePerEvent), fmtUnits(m.Capacity.ReadPerEvent))})
	}
	for _, row := range r.Capacity {
		size, ok := strings.CutPrefix(row.Scenario, "steps_50_")
		if !ok {
			continue
		}
		x, ok := row.Figures["steps_vs_k_times_one_step"].(float64)
		add(target{Target: fmt.Sprintf("%s: 50 steps cost at most 50 times one step (%.1f× allowed for rounding)", row.Scenario, stepsTarget),
			Measured: fmt.Sprintf("%.2f× (%v write units of steps per execution)", x, row.Figures["step_write_units_per_execution"]),
			Status:   status(ok && x <= stepsTarget)})
		after50, ok50 := row.Figures["completion_write_units"].(float64)
		after1, ok1 := r.capFigure("steps_1_"+size, "completion_write_units")
		add(target{Target: fmt.Sprintf("%s: the completion costs at most %d write unit more than after one step", row.Scenario, completionSlack),
			Measured: fmt.Sprintf("%v write units (after one step: %v)", after50, after1),
			Status:   status(ok50 && ok1 && after50 <= after1+completionSlack)})
	}
	if s := r.Storm; s != nil && s.Dynalite != nil {
		d := s.Dynalite
		before := ""
		if o := s.DynaliteNoMemory; o != nil {
			before = fmt.Sprintf("; without the memory of keys in progress %s", fmtUnits(o.WritePerLeaseSecond))
		}
		add(target{Target: fmt.Sprintf("storm: at most %d write units per second of lease", stormTarget),
			Measured: fmt.Sprintf("%s per second of a %s lease (%d deliveries, %s write units each; simulation %s%s)", fmtUnits(d.WritePerLeaseSecond), stormLease,
				d.Deliveries, fmtUnits(d.WritePerDelivery), fmtUnits(s.Sim.WritePerLeaseSecond), before),
			Status: status(d.WritePerLeaseSecond <= stormTarget)})
	}
}
