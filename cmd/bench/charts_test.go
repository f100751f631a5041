package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemgo/idem/internal/chart"
)

var updateCharts = flag.Bool("update-charts", false, "rewrite the charts' golden files in testdata/charts")

// The fixed reports: testdata/bench-report.json is a make bench-smoke run's
// report of 2026-12-04, cut to three workload scenarios, c_race, four rows
// of the capacity section and the CPU floor; testdata/peers-report.json is
// a make bench-peers report of the same day, cut to three scenarios, to
// whose figures the latency quantiles were added (p1, p25 and p75 made from
// the p50; the run predates them).
const (
	benchFixture = "testdata/bench-report.json"
	peersFixture = "testdata/peers-report.json"
)

func chartsOfFile(t *testing.T, path string) map[string][]byte {
	t.Helper()
	js, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	charts, err := chartsOf(js)
	if err != nil {
		t.Fatalf("chartsOf(%s): %v", path, err)
	}
	return charts
}

// TestChartsGolden draws the charts of the fixed reports and compares them
// with the files in testdata/charts (go test -run TestChartsGolden
// -update-charts rewrites them; look at them before committing).
func TestChartsGolden(t *testing.T) {
	for fixture, want := range map[string][]string{
		benchFixture: {chartCalls, chartCapabilities, chartUnits, chartCPU, chartLatency},
		peersFixture: {chartPeerCalls, chartPeerUnits, chartPeerCPU, chartPeerLatency},
	} {
		charts := chartsOfFile(t, fixture)
		got := sortedKeys(charts)
		if !slices.Equal(got, sortedStrings(want)) {
			t.Errorf("%s: charts %v, want %v", fixture, got, sortedStrings(want))
		}
		for name, doc := range charts {
			path := filepath.Join("testdata", "charts", name)
			if *updateCharts {
				if err := os.WriteFile(path, doc, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			golden, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestChartsGolden -update-charts)", err)
			}
			if !bytes.Equal(doc, golden) {
				t.Errorf("%s differs from %s", name, path)
			}
			if _, err := chart.Count(doc); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

// TestChartsShowTheReport checks what the charts of the fixed reports say:
// a group per workload scenario (not c_race), the calls and units of each,
// the capacity section's read bars, the floor, both libraries.
func TestChartsShowTheReport(t *testing.T) {
	bench := chartsOfFile(t, benchFixture)
	peers := chartsOfFile(t, peersFixture)
	for _, tc := range []struct {
		name, chart string
		want        []string
		absent      []string
		elements    map[string]int // at least
	}{
		{"latency: a box per scenario and mode", string(bench[chartLatency]),
			[]string{"a_unique", "b_duplicate_completed", "g_cache_duplicate", "seq", "c16", "logarithmic"}, []string{"c_race"}, map[string]int{"g": 6}},
		{"calls per event", string(bench[chartCalls]),
			[]string{"1 PutItem + 1 UpdateItem", "1 GetItem + 1 UpdateItem", ">0<", "GetItem", "PutItem", "UpdateItem"}, []string{"c_race"}, nil},
		{"units per event", string(bench[chartUnits]), []string{"2 write + 0 read", "1 write + 1 read", "0 write + 0 read"}, nil, nil},
		{"capabilities: reads drawn where there are some", string(bench[chartCapabilities]),
			[]string{"steps_50_4KB", "per execution (dynalite)", "wait_4_waiters_own_runners", "read units"}, nil, map[string]int{"rect": 4 + 2 + 1 + 2}},
		{"cpu floor", string(bench[chartCPU]), []string{"raw_signed_http", "floor", "× the floor", "blocks of"}, nil, map[string]int{"g": 5}},
		{"peers latency", string(peers[chartPeerLatency]), []string{"a_unique seq", "e_throw c16", "idem", "Powertools"}, nil, map[string]int{"g": 12}},
		{"peers calls: seq only", string(peers[chartPeerCalls]), []string{"DeleteItem", "1 DeleteItem + 1 PutItem"}, []string{"seq<", "c16"}, nil},
		{"peers cpu", string(peers[chartPeerCPU]), []string{"a_unique c16", "µs of CPU per event"}, nil, nil},
		{"peers units", string(peers[chartPeerUnits]), []string{"idem", "Powertools", "write units"}, []string{"c16"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, w := range tc.want {
				if !strings.Contains(tc.chart, w) {
					t.Errorf("the chart lacks %q", w)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(tc.chart, a) {
					t.Errorf("the chart shows %q", a)
				}
			}
			got, err := chart.Count([]byte(tc.chart))
			if err != nil {
				t.Fatal(err)
			}
			for el, n := range tc.elements {
				if got[el] < n {
					t.Errorf("%d %s elements, want at least %d", got[el], el, n)
				}
			}
		})
	}
}

// TestRunCharts: bench charts writes a report's charts into a directory.
func TestRunCharts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "charts")
	if code := runCharts([]string{"-json", peersFixture, "-svg", dir}); code != 0 {
		t.Fatalf("bench charts: exit %d", code)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 {
		t.Errorf("%d files in %s, want the 4 peers charts", len(entries), dir)
	}
	if code := runCharts([]string{"-json", filepath.Join(t.TempDir(), "none.json"), "-svg", dir}); code != 1 {
		t.Errorf("a missing report: exit %d, want 1", code)
	}
	if code := runCharts([]string{"-svg", dir}); code != 2 {
		t.Errorf("no -json: exit %d, want 2", code)
	}
}

func TestSpread(t *testing.T) {
	b := spread([]float64{5, 1, 4, 2, 3})
	if b.Low != 1 || b.Q1 != 2 || b.Median != 3 || b.Q3 != 4 || b.High != 5 {
		t.Errorf("spread of 1..5 = %+v, want 1, 2, 3, 4, 5", *b)
	}
	b = spread([]float64{10, 20, 30, 40})
	if b.Low != 10 || b.Q1 != 15 || b.Median != 25 || b.Q3 != 35 || b.High != 40 {
		t.Errorf("spread of 10..40 = %+v, want 10, 15, 25, 35, 40", *b)
	}
}

func sortedKeys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return sortedStrings(out)
}

func sortedStrings(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestDocsShowTheCharts: docs/benchmarks.md shows every chart bench and
// bench peers draw, from docs/bench/, where each is a well-formed drawing
// of the committed report beside it.
func TestDocsShowTheCharts(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	drawn := map[string][]byte{}
	for _, report := range []string{"bench.json", "bench-peers.json"} {
		for name, svg := range chartsOfFile(t, filepath.Join("..", "..", "docs", "bench", report)) {
			drawn[name] = svg
		}
	}
	for _, name := range []string{chartLatency, chartCalls, chartUnits, chartCapabilities, chartCPU,
		chartPeerLatency, chartPeerCalls, chartPeerCPU, chartPeerUnits} {
		if !strings.Contains(string(doc), "](bench/"+name+")") {
			t.Errorf("docs/benchmarks.md does not show bench/%s", name)
		}
		committed, err := os.ReadFile(filepath.Join("..", "..", "docs", "bench", name))
		if err != nil {
			t.Error(err)
			continue
		}
		if !bytes.Equal(committed, drawn[name]) {
			t.Errorf("docs/bench/%s is not the drawing of the report beside it (go run ./cmd/bench charts -json docs/bench/REPORT -svg docs/bench)", name)
		}
	}
}
