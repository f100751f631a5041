package main

import (
	"fmt"
	"slices"

	"github.com/idemgo/idem/internal/chart"
)

// benchCharts draws bench's charts: latency per scenario, calls and
// capacity units per event, the capacity section's units, and client CPU
// against the floor (when the report has those sections).
func benchCharts(r *chartReport) (map[string][]byte, error) {
	names, figs, err := r.scenarioModes()
	if err != nil {
		return nil, err
	}
	sub := subtitle(r.Meta)
	lat := chart.Boxes{Title: "Latency of one call: runner.Do through the SDK to dynalite (seq: one call in flight; c16: 16)", Subtitle: sub,
		Unit: "ms; box p25 to p75, line at p50, whiskers p1 and p99", Log: true, Series: []string{"seq", "c16"}}
	var callSets []map[string]float64
	for _, name := range names {
		g := chart.BoxGroup{Label: name}
		for _, md := range modes {
			var q *quantiles
			if mf := figs[name][md.Name]; mf != nil {
				q = mf.LatencyMs
			}
			g.Boxes = append(g.Boxes, box(q))
		}
		lat.Groups = append(lat.Groups, g)
		if mf := figs[name]["seq"]; mf != nil {
			callSets = append(callSets, mf.CallsPerEvent)
		}
	}
	ops := opsOf(callSets...)
	calls := chart.Bars{Title: "DynamoDB calls per event (seq; counted at the proxy)", Subtitle: sub, Unit: "calls per event", Segments: ops}
	units := chart.Bars{Title: "DynamoDB capacity units per event (seq; charged at the proxy)", Subtitle: sub, Unit: "capacity units per event",
		Segments: []string{"write units", "read units"}}
	for _, name := range names {
		mf := figs[name]["seq"]
		if mf == nil {
			continue
		}
		calls.Groups = append(calls.Groups, chart.BarGroup{Label: name, Bars: []chart.Bar{callsBar("", mf.CallsPerEvent, ops)}})
		units.Groups = append(units.Groups, chart.BarGroup{Label: name, Bars: []chart.Bar{unitsBar("", mf.Capacity)}})
	}
	out := map[string][]byte{chartLatency: lat.SVG(), chartCalls: calls.SVG(), chartUnits: units.SVG()}
	if len(r.Capacity) > 0 {
		out[chartCapabilities] = capabilitiesChart(r.Capacity, sub).SVG()
	}
	if r.Floor != nil && len(r.Floor.Paths) > 0 {
		out[chartCPU] = floorChart(r.Floor, sub).SVG()
	}
	return out, nil
}

// capabilitiesChart is the capacity section's write and read units per unit
// of each row (an execution, a minute of handler time, a waiter, a message),
// on a logarithmic axis: they span from half a unit to thousands.
func capabilitiesChart(rows []capRow, sub string) chart.Bars {
	c := chart.Bars{Title: "Capacity units of each capability", Subtitle: sub, Unit: "capacity units per unit of the row",
		Log: true, Series: []string{"write units", "read units"}}
	for _, row := range rows {
		if row.Capacity == nil {
			continue
		}
		w, rd := row.Capacity.WritePerEvent, row.Capacity.ReadPerEvent
		g := chart.BarGroup{Label: row.Scenario, Bars: []chart.Bar{{Values: []float64{w},
			Note: fmt.Sprintf("%s write + %s read per %s (%s)", fmtUnits(w), fmtUnits(rd), row.Per, firstField(row.Server))}}}
		if rd > 0 {
			g.Bars = append(g.Bars, chart.Bar{Values: []float64{rd}, Quiet: true})
		}
		c.Groups = append(c.Groups, g)
	}
	return c
}

// floorChart is client CPU per event of each path of the CPU floor: the
// distribution over its blocks, against the raw path's median.
func floorChart(f *floorResult, sub string) chart.Boxes {
	c := chart.Boxes{Title: "Client CPU per first execution, against the floor (raw signed HTTP)", Subtitle: sub,
		Unit: "µs of CPU per event; box p25 to p75 of the blocks, line at their median, whiskers min and max"}
	for _, name := range floorPaths {
		p := f.Paths[name]
		if p == nil || len(p.CPUPerBlock) == 0 {
			continue
		}
		b := spread(p.CPUPerBlock)
		b.Note = fmt.Sprintf("%.0f µs (%d blocks of %d events)", p.CPUUsPerEvent, len(p.CPUPerBlock), f.BlockEvents)
		if r, ok := f.CPURatio[name]; ok {
			b.Note += fmt.Sprintf(", %.2f× the floor", r)
		}
		c.Groups = append(c.Groups, chart.BoxGroup{Label: name, Boxes: []*chart.Box{b}})
		if name == pathRaw {
			c.Ref = &chart.Reference{Value: p.CPUUsPerEvent, Label: "floor"}
		}
	}
	return c
}

// spread is the box of xs: minimum, quartiles (medians of the halves),
// median and maximum.
func spread(xs []float64) *chart.Box {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	return &chart.Box{Low: s[0], Q1: median(s[:(n+1)/2]), Median: median(s), Q3: median(s[n/2:]), High: s[n-1]}
}

// peerCharts draws bench peers' charts: latency, calls per event, client
// CPU and capacity units, idem beside Powertools.
func peerCharts(r *peerReport) map[string][]byte {
	sub := fmt.Sprintf("%s UTC: N = %d per scenario and mode, medians of %d runs each; %d CPUs (%s), dynalite %s, Powertools %s",
		startedText(r.Meta.Started), r.Meta.N, r.Meta.Runs, r.Meta.Machine.NumCPU, r.Meta.Machine.CPUModel, r.Meta.Machine.Dynalite, r.Meta.Powertools)
	libs := []string{"idem", "Powertools"}
	lat := chart.Boxes{Title: "Latency of one call, idem beside Powertools for AWS Lambda (TypeScript)", Subtitle: sub,
		Unit: "ms; box p25 to p75, line at p50, whiskers p1 and p99", Log: true, Series: libs}
	cpu := chart.Bars{Title: "Client CPU per event, idem beside Powertools", Subtitle: sub, Unit: "µs of CPU per event", Series: libs}
	var callSets []map[string]float64
	for _, row := range r.Rows {
		label := row.Scenario + " " + row.Mode
		lat.Groups = append(lat.Groups, chart.BoxGroup{Label: label, Boxes: []*chart.Box{box(row.Idem.LatencyMs), box(row.Powertools.LatencyMs)}})
		cpu.Groups = append(cpu.Groups, chart.BarGroup{Label: label, Bars: []chart.Bar{
			{Values: []float64{row.Idem.CPUUs}}, {Values: []float64{row.Powertools.CPUUs}}}})
		callSets = append(callSets, row.Idem.Calls, row.Powertools.Calls)
	}
	ops := opsOf(callSets...)
	calls := chart.Bars{Title: "DynamoDB calls per event, idem beside Powertools (seq)", Subtitle: sub, Unit: "calls per event", Segments: ops}
	units := chart.Bars{Title: "DynamoDB capacity units per event, idem beside Powertools (seq)", Subtitle: sub, Unit: "capacity units per event",
		Segments: []string{"write units", "read units"}}
	for _, row := range r.Rows {
		if row.Mode != "seq" {
			continue
		}
		calls.Groups = append(calls.Groups, chart.BarGroup{Label: row.Scenario, Bars: []chart.Bar{
			callsBar(libs[0], row.Idem.Calls, ops), callsBar(libs[1], row.Powertools.Calls, ops)}})
		units.Groups = append(units.Groups, chart.BarGroup{Label: row.Scenario, Bars: []chart.Bar{
			unitsBar(libs[0], row.IdemUnits), unitsBar(libs[1], row.PTUnits)}})
	}
	return map[string][]byte{chartPeerLatency: lat.SVG(), chartPeerCalls: calls.SVG(), chartPeerCPU: cpu.SVG(), chartPeerUnits: units.SVG()}
}
