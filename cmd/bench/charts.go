package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idemgo/idem/internal/chart"
)

// The charts' files, as docs/benchmarks.md shows them.
const (
	chartLatency      = "bench-latency.svg"
	chartCalls        = "bench-calls.svg"
	chartUnits        = "bench-capacity.svg"
	chartCapabilities = "bench-capabilities.svg"
	chartCPU          = "bench-cpu-floor.svg"
	chartPeerLatency  = "peers-latency.svg"
	chartPeerCalls    = "peers-calls.svg"
	chartPeerCPU      = "peers-cpu.svg"
	chartPeerUnits    = "peers-capacity.svg"
)

// runCharts is `bench charts`: it draws the charts of a report written
// before (-json of bench or bench peers) into a directory.
func runCharts(args []string) int {
	fs := flag.NewFlagSet("bench charts", flag.ContinueOnError)
	in := fs.String("json", "", "the report: bench's or bench peers' -json file")
	dir := fs.String("svg", "", "the directory to write the charts to")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *in == "" || *dir == "" {
		fmt.Fprintln(os.Stderr, "bench charts: -json and -svg are required")
		return 2
	}
	js, err := os.ReadFile(*in)
	if err == nil {
		var charts map[string][]byte
		if charts, err = chartsOf(js); err == nil {
			err = writeCharts(*dir, charts)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench charts: %v\n", err)
		return 1
	}
	return 0
}

// chartsOf draws the charts of a report, bench's or bench peers' (which has
// rows), by file name.
func chartsOf(js []byte) (map[string][]byte, error) {
	var probe struct {
		Rows json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(js, &probe); err != nil {
		return nil, err
	}
	if probe.Rows != nil {
		var rep peerReport
		if err := json.Unmarshal(js, &rep); err != nil {
			return nil, err
		}
		return peerCharts(&rep), nil
	}
	var rep chartReport
	if err := json.Unmarshal(js, &rep); err != nil {
		return nil, err
	}
	return benchCharts(&rep)
}

// writeCharts writes charts into dir, which it creates.
func writeCharts(dir string, charts map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(charts)) {
		errs = append(errs, os.WriteFile(filepath.Join(dir, name), charts[name], 0o644))
	}
	return errors.Join(errs...)
}

// chartReport is what the charts read of bench's JSON report.
type chartReport struct {
	Meta      meta                       `json:"meta"`
	Scenarios map[string]json.RawMessage `json:"scenarios"`
	Capacity  []capRow                   `json:"capacity"`
	Floor     *floorResult               `json:"cpu_floor"`
}

// scenarioModes returns the workload's scenarios (those with figures per
// mode), in the order of their names, and their figures by mode.
func (r *chartReport) scenarioModes() ([]string, map[string]map[string]*modeFigures, error) {
	out := map[string]map[string]*modeFigures{}
	for name, raw := range r.Scenarios {
		var fields map[string]json.RawMessage
		if json.Unmarshal(raw, &fields) != nil {
			continue // not an object: not a workload scenario
		}
		for _, md := range modes {
			if fields[md.Name] == nil {
				continue
			}
			var mf modeFigures
			if err := json.Unmarshal(fields[md.Name], &mf); err != nil {
				return nil, nil, fmt.Errorf("scenario %s %s: %w", name, md.Name, err)
			}
			if out[name] == nil {
				out[name] = map[string]*modeFigures{}
			}
			out[name][md.Name] = &mf
		}
	}
	return slices.Sorted(maps.Keys(out)), out, nil
}

// subtitle says which run a chart shows.
func subtitle(m meta) string {
	return fmt.Sprintf("%s UTC: N = %d per scenario and mode, medians of %d runs; %d CPUs (%s), %s, dynalite %s; load average %s at start",
		startedText(m.Started), m.N, m.Runs, m.Machine.NumCPU, m.Machine.CPUModel,
		m.Machine.GoVersion, m.Machine.Dynalite, firstField(m.Machine.LoadAvgStart))
}

// startedText shows a report's RFC 3339 start time as "2026-12-04 09:23:05".
func startedText(s string) string {
	return strings.Replace(strings.TrimSuffix(s, "Z"), "T", " ", 1)
}

func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return s
}

// box is a chart's box of latency quantiles; nil without them.
func box(q *quantiles) *chart.Box {
	if q == nil {
		return nil
	}
	return &chart.Box{Low: q.P1, Q1: q.P25, Median: q.P50, Q3: q.P75, High: q.P99}
}

// opsOf returns the operations of calls, sorted.
func opsOf(calls ...map[string]float64) []string {
	set := map[string]bool{}
	for _, c := range calls {
		for op := range c {
			set[op] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// callsBar is a bar of calls per event stacked by ops.
func callsBar(label string, calls map[string]float64, ops []string) chart.Bar {
	b := chart.Bar{Label: label, Note: fmtCalls(calls)}
	for _, op := range ops {
		b.Values = append(b.Values, calls[op])
	}
	return b
}

// unitsBar is a bar of write and read units per event.
func unitsBar(label string, c *capFigures) chart.Bar {
	if c == nil {
		return chart.Bar{Label: label, Note: "not measured"}
	}
	return chart.Bar{Label: label, Values: []float64{c.WritePerEvent, c.ReadPerEvent},
		Note: fmt.Sprintf("%s write + %s read", fmtUnits(c.WritePerEvent), fmtUnits(c.ReadPerEvent))}
}
