package chart

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// stackedBars is a chart of calls per event for two libraries (stacked by
// operation), with a missing value.
func stackedBars() Bars {
	return Bars{
		Title:    "DynamoDB calls per event",
		Subtitle: "N = 2000, dynalite 4.0.0 <local>",
		Unit:     "calls per event",
		Segments: []string{"GetItem", "PutItem", "UpdateItem"},
		Groups: []BarGroup{
			{Label: "a_unique", Bars: []Bar{{Label: "idem", Values: []float64{0, 1, 1}}, {Label: "Powertools", Values: []float64{0, 1, 1}}}},
			{Label: "b_duplicate", Bars: []Bar{{Label: "idem", Values: []float64{1, 0, 1}}, {Label: "Powertools", Values: []float64{1, 1, math.NaN()}}}},
			{Label: "g_cache_duplicate", Bars: []Bar{{Label: "idem", Values: []float64{0, 0, 0}, Note: "0: from the cache"}}},
		},
	}
}

// latencyBoxes is a box plot of latencies in two modes on a log axis, with
// a missing box and a reference line.
func latencyBoxes() Boxes {
	return Boxes{
		Title:  "Latency of one call",
		Unit:   "ms",
		Log:    true,
		Series: []string{"seq", "c16"},
		Groups: []BoxGroup{
			{Label: "a_unique", Boxes: []*Box{{Low: 1.9, Q1: 2.5, Median: 2.9, Q3: 3.4, High: 20.1}, {Low: 9, Q1: 30, Median: 44.1, Q3: 60, High: 430.4}}},
			{Label: "g_cache_duplicate", Boxes: []*Box{{Low: 0.001, Q1: 0.0015, Median: 0.002, Q3: 0.003, High: 0.022}, nil}},
		},
		Ref: &Reference{Value: 1, Label: "1 ms"},
	}
}

func TestGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		svg  []byte
	}{
		{"bars", stackedBars().SVG()},
		{"boxes", latencyBoxes().SVG()},
		{"bars-log", Bars{Title: "Write units", Unit: "units", Log: true, Series: []string{"write", "read"},
			Groups: []BarGroup{{Label: "steps_50", Bars: []Bar{{Values: []float64{5352}}, {Values: []float64{0}}}}}}.SVG()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join("testdata", tc.name+".svg")
			if *update {
				if err := os.WriteFile(path, tc.svg, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if !bytes.Equal(tc.svg, want) {
				t.Errorf("%s differs from %s (go test -update rewrites it; check the new drawing first):\n%s", tc.name, path, tc.svg)
			}
			wellFormed(t, tc.svg)
		})
	}
}

// wellFormed checks doc with Count and returns its elements.
func wellFormed(t *testing.T, doc []byte) map[string]int {
	t.Helper()
	elements, err := Count(doc)
	if err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	return elements
}

func TestCountRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, doc, want string }{
		{"unclosed", `<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1" viewBox="0 0 1 1"><rect>`, "not well-formed"},
		{"not svg", `<html xmlns="http://www.w3.org/1999/xhtml"/>`, "root element"},
		{"no namespace", `<svg width="1" height="1" viewBox="0 0 1 1"/>`, "root element"},
		{"no viewBox", `<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>`, "no viewBox"},
		{"two roots", `<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1" viewBox="0 0 1 1"/><svg xmlns="http://www.w3.org/2000/svg" width="1" height="1" viewBox="0 0 1 1"/>`, "2 root elements"},
		{"unescaped text", `<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1" viewBox="0 0 1 1"><text>a < b</text></svg>`, "not well-formed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Count([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Count: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func TestBarsDrawEveryDrawableValue(t *testing.T) {
	t.Parallel()
	doc := stackedBars().SVG()
	elements := wellFormed(t, doc)
	// One rect per drawable positive value (2+2, 2+2, none), one per legend
	// entry and the background.
	if got, want := elements["rect"], 8+3+1; got != want {
		t.Errorf("%d rect elements, want %d", got, want)
	}
	for _, want := range []string{"b_duplicate Powertools PutItem: 1", "2 (some n/a)", "0: from the cache", "&lt;local&gt;"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("the chart lacks %q", want)
		}
	}
}

func TestBoxesDrawEveryBox(t *testing.T) {
	t.Parallel()
	doc := latencyBoxes().SVG()
	elements := wellFormed(t, doc)
	if got := strings.Count(string(doc), "<g>"); got != 3 {
		t.Errorf("%d boxes drawn, want 3 (the fourth has no data)", got)
	}
	if !strings.Contains(string(doc), "no data") || !strings.Contains(string(doc), "(logarithmic scale)") {
		t.Errorf("the chart lacks its missing box's note or the axis's scale")
	}
	if elements["line"] < 3*4 {
		t.Errorf("%d lines, want at least 4 per box", elements["line"])
	}
}

func TestAxis(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		values   []float64
		log      bool
		min, max float64
		ticks    int
	}{
		{"linear, round up", []float64{0.2, 1.7}, false, 0, 2, 5},
		{"linear, large", []float64{5352}, false, 0, 6000, 4},
		{"linear, nothing drawable", []float64{math.NaN(), -1}, false, 0, 1, 6},
		{"log, decades around", []float64{0.002, 430}, true, 0.001, 1000, 7},
		{"log, zero ignored", []float64{0, 3}, true, 1, 10, 2},
		{"log, one power of ten", []float64{10}, true, 10, 100, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newAxis(tc.values, tc.log, 100, 700)
			if math.Abs(a.min-tc.min) > 1e-12 || math.Abs(a.max-tc.max) > 1e-9 || len(a.ticks) != tc.ticks {
				t.Errorf("axis [%v, %v] with %d ticks %v, want [%v, %v] with %d", a.min, a.max, len(a.ticks), a.ticks, tc.min, tc.max, tc.ticks)
			}
			if a.x(a.min) != 100 || a.x(a.max) != 700 || a.x(a.max*10) != 700 {
				t.Errorf("x(min) = %v, x(max) = %v, beyond max = %v; want 100, 700, 700", a.x(a.min), a.x(a.max), a.x(a.max*10))
			}
		})
	}
}

func TestNum(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{0: "0", 2: "2", 2.5: "2.5", 12.25: "12.2", 430.37: "430", 0.0021: "0.0021", 1.005: "1", 5352: "5352"} {
		if got := num(in); got != want {
			t.Errorf("num(%v) = %q, want %q", in, got, want)
		}
	}
}
