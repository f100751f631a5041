package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/internal/capacity"
)

func TestPeerRowTargets(t *testing.T) {
	t.Parallel()
	two := map[string]float64{"PutItem": 1, "UpdateItem": 1}
	tests := []struct {
		name            string
		idem, pt        peerFigures
		wantCalls, want bool
	}{
		{"fewer calls, fast", peerFigures{P50Ms: 1, Calls: map[string]float64{"PutItem": 1}}, peerFigures{P50Ms: 2, Calls: two}, true, true},
		{"same calls, p50 at the target", peerFigures{P50Ms: 3, Calls: map[string]float64{"PutItem": 2}}, peerFigures{P50Ms: 5, Calls: two}, true, true},
		{"more calls, p50 just over the target", peerFigures{P50Ms: 3.01, Calls: map[string]float64{"PutItem": 3, "GetItem": 1}}, peerFigures{P50Ms: 5, Calls: two}, false, false},
		{"no calls on either side", peerFigures{P50Ms: 0.002, Calls: map[string]float64{}}, peerFigures{P50Ms: 0.04, Calls: map[string]float64{}}, true, true},
		{"one call where Powertools makes none", peerFigures{P50Ms: 0.002, Calls: map[string]float64{"GetItem": 0.001}}, peerFigures{P50Ms: 0.04, Calls: nil}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := peerRow{Idem: tt.idem, Powertools: tt.pt}
			if got := r.callsOK(); got != tt.wantCalls {
				t.Errorf("callsOK() = %v, want %v", got, tt.wantCalls)
			}
			if got := r.p50OK(); got != tt.want {
				t.Errorf("p50OK() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCPURatios(t *testing.T) {
	t.Parallel()
	row := func(name string, idem, pt float64, executes, ref bool) peerRow {
		return peerRow{Scenario: name, Executes: executes, Reference: ref, Idem: peerFigures{CPUUs: idem}, Powertools: peerFigures{CPUUs: pt}}
	}
	tests := []struct {
		name          string
		rows          []peerRow
		want, wantRun float64
		nRows, nRuns  int
	}{
		{"none", nil, 0, 0, 0, 0},
		{"geometric, not arithmetic", []peerRow{row("a", 100, 1000, true, false), row("b", 1000, 1000, false, false)}, 0.316, 0.1, 2, 1},
		{"reference rows and rows without figures left out",
			[]peerRow{row("a", 200, 1000, true, false), row("ref", 4000, 1000, false, true), row("c", 0, 80, false, false), row("d", 5, 0, false, false)},
			0.2, 0.2, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := cpuRatios(tt.rows)
			if got.Geomean != tt.want || got.ExecutedGeomean != tt.wantRun || got.Rows != tt.nRows || got.ExecutedRows != tt.nRuns || got.Target != cpuTarget {
				t.Errorf("cpuRatios = %+v, want geomean %v over %d, executed %v over %d", got, tt.want, tt.nRows, tt.wantRun, tt.nRuns)
			}
		})
	}
}

func TestCallsText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		calls map[string]float64
		want  string
	}{
		{"none", map[string]float64{}, "0"},
		{"zero entries only", map[string]float64{"PutItem": 0}, "0"},
		{"retry today", map[string]float64{"PutItem": 3, "GetItem": 1}, "4 (1G+3P)"},
		{"powertools first call", map[string]float64{"UpdateItem": 1, "PutItem": 1}, "2 (1P+1U)"},
		{"fraction", map[string]float64{"PutItem": 1.5}, "1.5 (1.5P)"},
		{"unabbreviated operation", map[string]float64{"Query": 1, "DeleteItem": 1}, "2 (1D+1 Query)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := callsText(tt.calls); got != tt.want {
				t.Errorf("callsText(%v) = %q, want %q", tt.calls, got, tt.want)
			}
		})
	}
}

func TestRatio(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b float64
		want string
	}{
		{"half", 1, 2, "0.50"},
		{"slower", 7.93, 6.78, "1.17"},
		{"divide by zero", 1, 0, "–"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := ratio(tt.a, tt.b); got != tt.want {
				t.Errorf("ratio(%v, %v) = %q, want %q", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func TestMedianFigures(t *testing.T) {
	t.Parallel()
	runs := []peerFigures{
		{P50Ms: 3, P99Ms: 30, EventsPerS: 100, CPUUs: 900, Calls: map[string]float64{"PutItem": 2}},
		{P50Ms: 1, P99Ms: 10, EventsPerS: 300, CPUUs: 700, Calls: map[string]float64{"PutItem": 2, "GetItem": 1}},
		{P50Ms: 2, P99Ms: 90, EventsPerS: 200, CPUUs: 800, Calls: map[string]float64{"PutItem": 3}},
	}
	got := medianFigures(runs)
	if got.P50Ms != 2 || got.P99Ms != 30 || got.EventsPerS != 200 || got.CPUUs != 800 {
		t.Errorf("medianFigures = %+v, want p50 2, p99 30, 200 ev/s, 800 µs", got)
	}
	// GetItem is missing (0) in two runs of three: its median is 0.
	if got.Calls["PutItem"] != 2 || got.Calls["GetItem"] != 0 {
		t.Errorf("medianFigures calls = %v, want PutItem 2, GetItem 0", got.Calls)
	}
}

func TestPtFigureCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fig  ptFigure
		want []string // substrings, one per failure
	}{
		{"as expected", ptFigure{Outcomes: map[string]int{"replayed": 10}, ExpectOutcome: "replayed"}, nil},
		{"wrong outcome", ptFigure{Outcomes: map[string]int{"replayed": 9, "error": 1}, FirstError: "boom", ExpectOutcome: "replayed"},
			[]string{`9 of 10 calls got "replayed"`}},
		{"ran twice", ptFigure{Outcomes: map[string]int{"executed": 10}, Executions: 20, ExpectOutcome: "executed", ExpectExecsPer: 1},
			[]string{"handler ran 20 times for 10 events, want 1 per event"}},
		{"calls not charged", ptFigure{Outcomes: map[string]int{"replayed": 10}, ExpectOutcome: "replayed", Calls: map[string]int64{"PutItem": 10},
			Capacity: capDelta{Totals: capacity.Totals{"PutItem": {Calls: 9}}, Errors: 1, Last: "boom"}},
			[]string{"capacity: 1 requests not charged (last: boom)", "capacity: PutItem: 10 calls counted, 9 charged"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.fig.check("b_duplicate_completed", "seq", 1, 10)
			if len(got) != len(tt.want) {
				t.Fatalf("check = %q, want %d failure(s)", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) || !strings.HasPrefix(got[i], "powertools b_duplicate_completed seq run 1") {
					t.Errorf("failure %d = %q, want it to name the run and say %q", i, got[i], w)
				}
			}
		})
	}
}

// driverOutput is a run of bench/peers/powertools/run.mjs, as it writes it.
const driverOutput = `{
 "library": "@aws-lambda-powertools/idempotency", "run": 2, "n": 4, "warmup": 1,
 "scenarios": {
  "e_retry": {
   "seq": {"p50_ms": 8.5, "p99_ms": 20.25, "events_per_s": 120.5, "client_cpu_us_per_event": 4000,
           "calls": {"PutItem": 4, "UpdateItem": 4}, "executions": 4, "outcomes": {"executed": 4},
           "capacity": {"Totals": {"PutItem": {"calls": 4, "write_units": 4, "computed_write_units": 4, "reported_calls": 4},
                                   "UpdateItem": {"calls": 4, "write_units": 8, "computed_write_units": 8, "reported_calls": 4}}, "Errors": 0},
           "first_error": "", "expected_outcome": "executed", "expected_executions_per_event": 1}
  },
  "f_live_inprogress": {
   "seq": {"p50_ms": 5, "p99_ms": 6, "events_per_s": 200, "client_cpu_us_per_event": 3000,
           "calls": {"PutItem": 4, "GetItem": 4}, "executions": 1, "outcomes": {"in_progress": 3, "executed": 1},
           "capacity": {"Totals": {"PutItem": {"calls": 4, "write_units": 4, "computed_write_units": 4, "condition_failed": 3},
                                   "GetItem": {"calls": 4, "read_units": 4, "computed_read_units": 4}}, "Errors": 0},
           "first_error": "", "expected_outcome": "in_progress", "expected_executions_per_event": 0}
  }
 }
}`

func TestPeerRows(t *testing.T) {
	t.Parallel()
	var pt ptRun
	if err := json.Unmarshal([]byte(driverOutput), &pt); err != nil {
		t.Fatal(err)
	}
	const n = 4
	idemRep := newReport(flags{n: n, runs: 1})
	for _, sc := range workload() {
		if sc.Name != "e_retry" && sc.Name != "a_unique" {
			continue
		}
		for _, m := range modes {
			idemRep.addScenario(sc, m.Name, 1, measured{P50: 7 * time.Millisecond, P99: 9 * time.Millisecond, ClientCPU: 2 * time.Millisecond,
				Calls: map[string]int64{"PutItem": 12, "GetItem": 4}, Executions: n, Outcomes: map[string]int{sc.Expect: n},
				Capacity: capDelta{Totals: capacity.Totals{"PutItem": {Calls: 12, Write: 12}, "GetItem": {Calls: 4, Read: 2}}}}, n)
		}
	}
	rows, failures := peerRows(idemRep, []ptRun{pt}, n)
	// Only e_retry seq ran on both sides: a_unique has no Powertools run, f_live_inprogress no idem run.
	if len(rows) != 1 || rows[0].Scenario != "e_retry" || rows[0].Mode != "seq" {
		t.Fatalf("rows = %+v, want e_retry seq alone", rows)
	}
	r := rows[0]
	if r.Idem.P50Ms != 7 || r.Powertools.P50Ms != 8.5 || r.Powertools.CPUUs != 4000 {
		t.Errorf("row figures = %+v", r)
	}
	if got := callsText(r.Idem.Calls) + " / " + callsText(r.Powertools.Calls); got != "4 (1G+3P) / 2 (1P+1U)" {
		t.Errorf("calls = %q", got)
	}
	if r.callsOK() {
		t.Error("callsOK() = true for 4 calls against 2")
	}
	if got := unitsText(r.IdemUnits) + " / " + unitsText(r.PTUnits); got != "3 + 0.5 / 3 + 0" {
		t.Errorf("units = %q, want 3 + 0.5 / 3 + 0", got)
	}
	if len(idemRep.Failures) != 0 {
		t.Errorf("idem failures = %q", idemRep.Failures)
	}
	// f_live_inprogress: one call of four executed the handler where none should.
	if len(failures) != 2 || !strings.Contains(failures[0], "f_live_inprogress seq run 2") {
		t.Errorf("failures = %q, want the outcome and execution checks of f_live_inprogress", failures)
	}
}

func TestPeersMarkdown(t *testing.T) {
	t.Parallel()
	rep := &peerReport{
		Meta: peerMeta{N: 500, Runs: 3, Powertools: "@aws-lambda-powertools/idempotency@2.35.0", Machine: machineInfo{NumCPU: 2, CPUModel: "CPU", GoVersion: "go1.26", Node: "v20"}},
		Rows: []peerRow{
			{Scenario: "a_unique", Mode: "seq", Idem: peerFigures{P50Ms: 4, P99Ms: 12, CPUUs: 800, Calls: map[string]float64{"PutItem": 2}},
				Powertools: peerFigures{P50Ms: 8, P99Ms: 30, CPUUs: 4000, Calls: map[string]float64{"PutItem": 1, "UpdateItem": 1}},
				IdemUnits:  &capFigures{WritePerEvent: 2}, PTUnits: &capFigures{WritePerEvent: 2}},
			{Scenario: "e_retry", Mode: "seq", Idem: peerFigures{P50Ms: 7, P99Ms: 18, CPUUs: 2000, Calls: map[string]float64{"PutItem": 3, "GetItem": 1}},
				Powertools: peerFigures{P50Ms: 8, P99Ms: 23, CPUUs: 5000, Calls: map[string]float64{"PutItem": 1, "UpdateItem": 1}}},
			{Scenario: "g_cache_duplicate", Mode: "c16", Idem: peerFigures{P50Ms: 0.002}, Powertools: peerFigures{P50Ms: 0.45}},
			{Scenario: "ref_sdk_putitem", Mode: "seq", Reference: true, Idem: peerFigures{P50Ms: 9, Calls: map[string]float64{"PutItem": 1}},
				Powertools: peerFigures{P50Ms: 2, Calls: map[string]float64{"PutItem": 1}}},
		},
	}
	rep.CPU = cpuRatios(rep.Rows)
	md := peersMarkdown(rep)
	for _, want := range []string{
		// 0.20 and 0.40 (a_unique, e_retry): the other rows have no CPU figures.
		"Client CPU, idem / Powertools: geometric mean 0.28× over 2 rows (target ≤ 0.30×: met); 0.00× over the 0 rows whose handler runs",
		"| a_unique | seq | 4.00 / 8.00 (0.50) | 12.00 / 30.00 (0.40) | 800 / 4000 (0.20) | 2 (2P) / 2 (1P+1U) | 2 + 0 / 2 + 0 | yes | yes |",
		"| e_retry | seq | 7.00 / 8.00 (0.88) | 18.00 / 23.00 (0.78) | 2000 / 5000 (0.40) | 4 (1G+3P) / 2 (1P+1U) | – / – | **no** | **no** |",
		"| g_cache_duplicate | c16 | 0.002 / 0.45 (0.00) |",
		"| ref_sdk_putitem | seq | 9.00 / 2.00 (4.50) |",
		"| ref. | ref. |",
		// The reference row counts for neither target.
		"idem's calls ≤ Powertools' in 2 of 3 rows; idem's p50 ≤ 0.6× Powertools' in 2 of 3 rows",
		"N=500 per scenario and mode, median of 3 runs",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestParsePeerFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		match   []string
		noMatch []string
		wantErr bool
	}{
		{"every scenario", nil, []string{"a_unique", "e_retry", "ref_sdk_putitem", "c_race"}, []string{"sqs_batch10", "stores", "a_unique_x"}, false},
		{"only", []string{"-only", "^e_"}, []string{"e_throw", "e_retry"}, []string{"a_unique", "c_race"}, false},
		{"only matches no shared scenario", []string{"-only", "sqs|coldstart"}, nil, nil, true},
		{"bad pattern", []string{"-only", "("}, nil, nil, true},
		{"n zero", []string{"-n", "0"}, nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pf, err := parsePeerFlags(tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parsePeerFlags(%q) error = %v, want error %v", tt.args, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			for _, s := range tt.match {
				if !pf.only.MatchString(s) {
					t.Errorf("%q does not select %s", pf.only, s)
				}
			}
			for _, s := range tt.noMatch {
				if pf.only.MatchString(s) {
					t.Errorf("%q selects %s", pf.only, s)
				}
			}
		})
	}
}

func TestPeerRaces(t *testing.T) {
	t.Parallel()
	idemRuns := []raceRun{
		{ExecutionsPerKey: []int64{1, 1}, Outcomes: map[string]int{"executed": 2, "in_progress": 62}, WinnerMs: []float64{60, 80},
			OthersP50Ms: []float64{10, 30}, Calls: map[string]int64{"PutItem": 66, "GetItem": 62}},
		{ExecutionsPerKey: []int64{1, 1}, Outcomes: map[string]int{"executed": 2, "replayed": 62}, WinnerMs: []float64{70, 90},
			OthersP50Ms: []float64{20, 40}, Calls: map[string]int64{"PutItem": 70, "GetItem": 62}},
	}
	pt := []ptRun{
		{Run: 1, Race: &ptRace{ExecutionsPerKey: []int64{1, 2}, Outcomes: map[string]int{"executed": 3, "in_progress": 61},
			WinnerMs: []float64{100, 120, 140}, OthersP50Ms: []float64{50, 70}, Calls: map[string]int64{"PutItem": 64, "GetItem": 62, "UpdateItem": 2}}},
		{Run: 2}, // c_race not run (-only)
	}
	races, failures := peerRaces(idemRuns, pt, []string{"earlier"})
	i, p := races["idem"], races["powertools"]
	if i.Trials != 4 || i.MaxExecutions != 1 || i.Outcomes["executed"] != 4 || i.Outcomes["replayed"] != 62 {
		t.Errorf("idem race = %+v", i)
	}
	// Per trial: PutItem 33 and 35 (median 34), GetItem 31 in both runs.
	if i.CallsPerTrial["PutItem"] != 34 || i.CallsPerTrial["GetItem"] != 31 || i.WinnerMedianMs != 75 || i.OthersMedianMs != 25 {
		t.Errorf("idem race figures = %+v", i)
	}
	if p.Trials != 2 || p.MaxExecutions != 2 || p.WinnerMedianMs != 120 || callsText(p.CallsPerTrial) != "64 (31G+32P+1U)" {
		t.Errorf("powertools race = %+v, calls %s", p, callsText(p.CallsPerTrial))
	}
	if len(failures) != 2 || failures[0] != "earlier" || !strings.Contains(failures[1], "powertools c_race run 1 trial 1: the handler ran 2 times") {
		t.Errorf("failures = %q", failures)
	}
	md := peersMarkdown(&peerReport{Race: races})
	for _, want := range []string{"| most executions of one key | 1 | 2 |", "| outcomes | executed 4, in_progress 62, replayed 62 | executed 3, in_progress 61 |",
		"| calls per trial | 65 (31G+34P) | 64 (31G+32P+1U) |", "| idem calls ≤ PT | **no** | |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if races, _ := peerRaces(nil, []ptRun{{Run: 1}}, nil); races != nil {
		t.Errorf("peerRaces with no c_race = %v, want nil", races)
	}
}

func TestAlternate(t *testing.T) {
	t.Parallel()
	var order []string
	step := func(name string) func(int) error {
		return func(r int) error { order = append(order, fmt.Sprintf("%s%d", name, r)); return nil }
	}
	if err := alternate(4, step("idem"), step("pt")); err != nil {
		t.Fatal(err)
	}
	want := []string{"idem1", "pt1", "pt2", "idem2", "idem3", "pt3", "pt4", "idem4"}
	if !slices.Equal(order, want) {
		t.Errorf("order = %v, want %v", order, want)
	}

	boom := errors.New("boom")
	order = nil
	err := alternate(3, step("idem"), func(r int) error {
		if r == 2 {
			return boom
		}
		return step("pt")(r)
	})
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "run 2: ") {
		t.Errorf("err = %v, want boom in run 2", err)
	}
	if want := []string{"idem1", "pt1"}; !slices.Equal(order, want) {
		t.Errorf("order before the error = %v, want %v", order, want)
	}
}

// TestRunDriver runs a stand-in for node that checks the arguments it is given and writes
// driverOutput where --out says.
func TestRunDriver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fixture := filepath.Join(dir, "fixture.json")
	if err := os.WriteFile(fixture, []byte(driverOutput), 0o644); err != nil {
		t.Fatal(err)
	}
	fakeNode := filepath.Join(dir, "node")
	script := `#!/bin/sh
args="$*"
while [ $# -gt 0 ]; do
  case "$1" in --out) out="$2" ;; esac
  shift
done
case "$args" in
  *"--expose-gc "*"/run.mjs --endpoint http://127.0.0.1:9 --n 4 --warmup 1 --run 2 --race-trials 3 --only ^(e_retry)$ --out "*) cp "` + fixture + `" "$out" ;;
  *) echo "unexpected arguments: $args" >&2; exit 3 ;;
esac
`
	if err := os.WriteFile(fakeNode, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	pf := peerFlags{n: 4, warmup: 1, raceTrials: 3, only: regexp.MustCompile(`^(e_retry)$`), node: fakeNode, driver: filepath.Join(dir, "run.mjs")}
	got, err := runDriver(context.Background(), pf, "http://127.0.0.1:9", 2)
	if err != nil {
		t.Fatal(err)
	}
	if got.Run != 2 || got.Scenarios["e_retry"]["seq"].Calls["UpdateItem"] != 4 {
		t.Errorf("runDriver = %+v", got)
	}

	pf.n = 5 // the stand-in exits 3 on other arguments
	if _, err := runDriver(context.Background(), pf, "http://127.0.0.1:9", 2); err == nil {
		t.Error("runDriver succeeded although the driver failed")
	}
}
