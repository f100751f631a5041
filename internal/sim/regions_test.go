package sim_test

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem/internal/devserver"
	"github.com/idemgo/idem/internal/sim"
)

var updateDocs = flag.Bool("sim.update-docs", false, "rewrite the tables of docs/multi-region.md that TestRegionsTable computes")

// regionServices are the named services a run of two Regions has (every
// one of Mixed but those that stage writes: the Regions' replicas commit
// none), with sim.Regional's events delivered twice.
func regionServices(gap time.Duration) []sim.Service {
	var out []sim.Service
	for _, sv := range sim.Mixed() {
		if sv.Stage == 0 {
			out = append(out, sv)
		}
	}
	return append(out, sim.Regional(gap))
}

// regionConfig is a run of two Regions with every fault, the named
// services and some drawn ones.
func regionConfig(t *testing.T, def uint64, n int, rg sim.Regions, gap time.Duration) sim.Config {
	return sim.Config{
		Seed: seed(t, def), Deliveries: deliveries(n), Services: regionServices(gap), Draw: 4,
		Faults: sim.AllFaults(), Regions: &rg, MaxViolations: 1 << 30,
	}
}

// TestSimRegionsHome: every service, every fault, over a global table of
// two Regions (MREC) whose every call goes to the home Region, whichever
// Region the delivery arrives in: every invariant holds, as over one
// store; no execution is a duplicate, no outcome is lost; the replication
// to the other Region runs all along.
func TestSimRegionsHome(t *testing.T) {
	rg := sim.Regions{Mode: sim.MRECHomeRegion, LagMin: 100 * time.Millisecond, LagMax: 3 * time.Second, Cross: 0.5}
	res := run(t, regionConfig(t, 31, 20000, rg, time.Second))
	t.Logf("regions: %+v", res.Regions)
	st := res.Regions
	if st.Duplicates != 0 || st.LostCompletions != 0 || st.Excused != 0 {
		t.Errorf("with a home Region: %d duplicates, %d outcomes lost, %d violations excused; want none", st.Duplicates, st.LostCompletions, st.Excused)
	}
	if st.Replicated == 0 || st.Executions == 0 || res.Stats.Crashes == 0 || res.Stats.TakeOvers == 0 {
		t.Errorf("regions %+v, stats %+v: the run does not exercise replication, executions, crashes and takeovers", st, res.Stats)
	}
}

// TestSimRegionsSwitch: as TestSimRegionsHome, the home Region switching
// from A to B and back every 20 s, at once, while writes are on their way
// (lags of 0.5 to 3 s): an invariant breaks, and an execution is a
// duplicate or an outcome is lost, only for a key with a write in flight
// to the new home Region at a switch (the run excuses those keys, and
// reports every other violation). Some are excused: the switch does
// break them.
func TestSimRegionsSwitch(t *testing.T) {
	rg := sim.Regions{Mode: sim.MRECHomeRegion, LagMin: 500 * time.Millisecond, LagMax: 3 * time.Second, Cross: 0.5, SwitchEvery: 20 * time.Second}
	res := run(t, regionConfig(t, 32, 20000, rg, time.Second))
	t.Logf("regions: %+v", res.Regions)
	if st := res.Regions; st.Switches == 0 || st.InFlightAtSwitch == 0 || st.Excused == 0 || st.Duplicates == 0 {
		t.Errorf("regions %+v: no switch met a write in flight and broke something: the run does not exercise the window", st)
	}
}

// TestSimRegionsMRSC: every service, every fault, over a global table of
// strong consistency (MRSC), both Regions writing: every invariant holds,
// no execution is a duplicate, no outcome is lost, though writes of one
// item from both Regions within 50 ms are refused with a replicated write
// conflict (transient), sim.Regional's reservations among them.
func TestSimRegionsMRSC(t *testing.T) {
	rg := sim.Regions{Mode: sim.MRSC, Cross: 1, ConflictWindow: 50 * time.Millisecond}
	res := run(t, regionConfig(t, 35, 20000, rg, 50*time.Millisecond))
	t.Logf("regions: %+v", res.Regions)
	st := res.Regions
	if st.Duplicates != 0 || st.LostCompletions != 0 {
		t.Errorf("MRSC: %d duplicates, %d outcomes lost; want none", st.Duplicates, st.LostCompletions)
	}
	if st.ReserveConflicts == 0 {
		t.Errorf("regions %+v: no reservation refused with a conflict: the run does not exercise them", st)
	}
}

// TestSimRegionsWindow: sim.Regional's events (each delivered twice, the
// copy a second later on average, in either Region) over MREC with writes
// in both Regions, replication lags of 0.5 to 1.5 s, and no fault: some
// events run twice and some outcomes are lost (the run counts them and
// excuses them: MREC promises nothing more). The same events with every
// call sent to a home Region run once each, and lose nothing.
func TestSimRegionsWindow(t *testing.T) {
	for _, tc := range []struct {
		mode   sim.RegionMode
		window bool
	}{{sim.MRECEveryRegion, true}, {sim.MRECHomeRegion, false}} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			n := deliveries(regionsDeliveries)
			st := measureRegions(t, n, tc.mode, time.Second, retryCopy, 0)
			extra := st.Executions - st.Keys
			switch {
			case st.Keys < n/4:
				t.Errorf("regions %+v: fewer than %d events", st, n/4)
			case tc.window && (extra == 0 || st.LostCompletions == 0 || st.Duplicates != extra):
				t.Errorf("regions %+v: want events run twice (each counted as a duplicate) and outcomes lost", st)
			case !tc.window && (extra != 0 || st.LostCompletions != 0 || st.Duplicates != 0):
				t.Errorf("regions %+v: want every event run once, no outcome lost", st)
			}
		})
	}
}

// TestSimRegionsDeterministic: a run of two Regions replays step by step.
func TestSimRegionsDeterministic(t *testing.T) {
	rg := sim.Regions{Mode: sim.MRECEveryRegion, LagMin: 50 * time.Millisecond, LagMax: 2 * time.Second, Cross: 0.5}
	cfg := regionConfig(t, 36, 3000, rg, time.Second)
	a, err := sim.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sim.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash != b.Hash || a.Stats != b.Stats || a.Regions != b.Regions {
		t.Errorf("seed %d ran twice: hash %016x, %+v, %+v\nthen %016x, %+v, %+v", cfg.Seed, a.Hash, a.Stats, a.Regions, b.Hash, b.Stats, b.Regions)
	}
}

// copyPattern is how sim.Regional's two copies of an event arrive: the
// copy's mean gap after the first, and the probability that it arrives in
// the other Region (Regions.Cross).
type copyPattern struct {
	gap   time.Duration
	cross float64
}

var (
	// retryCopy: the copy a second later on average, in either Region (a
	// sender's retry through a latency-routed endpoint).
	retryCopy = copyPattern{time.Second, 0.5}
	// fanOutCopy: the copy in the other Region, 50 ms later on average (a
	// topic fanned out to a queue in each Region).
	fanOutCopy = copyPattern{50 * time.Millisecond, 1}
)

// regionsDeliveries is the size of each run of the tables: about 2,400
// events.
const regionsDeliveries = 5000

// measureRegions runs n deliveries of sim.Regional's events with pattern p over mode, with
// replication lags drawn uniformly from half to one and a half times lag
// (MREC; MRSC: lag is the conflict window), switches every switchEvery
// (MRECHomeRegion), store calls of 1 to 10 ms each way and no fault, and
// returns what it counted. Violations the mode does not allow fail t.
func measureRegions(t *testing.T, n int, mode sim.RegionMode, lag time.Duration, p copyPattern, switchEvery time.Duration) sim.RegionStats {
	t.Helper()
	rg := sim.Regions{Mode: mode, LagMin: lag / 2, LagMax: lag * 3 / 2, Cross: p.cross, SwitchEvery: switchEvery}
	if mode == sim.MRSC {
		rg.LagMin, rg.LagMax, rg.ConflictWindow = 0, 0, lag
	}
	cfg := sim.Config{
		Seed: 31, Deliveries: n, Services: []sim.Service{sim.Regional(p.gap)}, Regions: &rg,
		Faults: sim.Faults{LatencyMin: time.Millisecond, LatencyMax: 10 * time.Millisecond}, MaxViolations: 1 << 30,
	}
	res, err := sim.Run(cfg)
	if err != nil {
		t.Error(err) // (measureRegions runs on the table's workers: no Fatal)
		return sim.RegionStats{Keys: 1, Switches: 1}
	}
	for _, v := range res.Violations {
		t.Errorf("%v, lag %v, copies %+v: %v", mode, lag, p, v.Error())
	}
	return res.Regions
}

// perThousand is n per 1,000 of of, rounded.
func perThousand(n, of int) string {
	return fmt.Sprint(int(math.Round(1000 * float64(n) / float64(of))))
}

// seconds formats a lag as the tables do: "0.1 s", "2 s".
func seconds(d time.Duration) string { return fmt.Sprintf("%g s", d.Seconds()) }

// regionTable is one table of docs/multi-region.md that TestRegionsTable
// computes: its name in the page's markers, its header, and a function
// that computes its rows.
type regionTable struct {
	name   string
	header string
	rows   []func(t *testing.T) []string
}

var regionLags = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second}

// regionTables are the page's tables: MREC with writes in both Regions,
// against the lag; a home Region switched at once, against the lag; MRSC,
// against the conflict window.
func regionTables() []regionTable {
	const n = regionsDeliveries
	mrec := regionTable{name: "mrec", header: "| mean replication lag | retry: extra executions | retry: outcomes lost | fan-out: extra executions | fan-out: outcomes lost |\n| --- | ---: | ---: | ---: | ---: |\n"}
	home := regionTable{name: "switch", header: "| mean replication lag | events with a write in flight | extra executions | outcomes lost |\n| --- | ---: | ---: | ---: |\n"}
	for _, lag := range regionLags {
		mrec.rows = append(mrec.rows, func(t *testing.T) []string {
			row := []string{seconds(lag)}
			for _, p := range []copyPattern{retryCopy, fanOutCopy} {
				st := measureRegions(t, n, sim.MRECEveryRegion, lag, p, 0)
				row = append(row, perThousand(st.Executions-st.Keys, st.Keys), perThousand(st.LostCompletions, st.Keys))
			}
			return row
		})
		home.rows = append(home.rows, func(t *testing.T) []string {
			st := measureRegions(t, n, sim.MRECHomeRegion, lag, retryCopy, 30*time.Second)
			per := func(x int) string { return fmt.Sprintf("%.1f", float64(x)/float64(st.Switches)) }
			return []string{seconds(lag), per(st.InFlightAtSwitch), per(st.Executions - st.Keys), per(st.LostCompletions)}
		})
	}
	mrsc := regionTable{name: "mrsc", header: "| conflict window | retry: conflicts | fan-out: conflicts | extra executions, outcomes lost |\n| --- | ---: | ---: | ---: |\n"}
	for _, window := range []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond} {
		mrsc.rows = append(mrsc.rows, func(t *testing.T) []string {
			row, twice, lost := []string{fmt.Sprintf("%d ms", window.Milliseconds())}, 0, 0
			for _, p := range []copyPattern{retryCopy, fanOutCopy} {
				st := measureRegions(t, n, sim.MRSC, window, p, 0)
				if st.ReserveConflicts != st.Conflicts {
					t.Errorf("MRSC, window %v, copies %+v: %d of %d conflicts on reservations; the table says all", window, p, st.ReserveConflicts, st.Conflicts)
				}
				row = append(row, perThousand(st.Conflicts, st.Keys))
				twice, lost = twice+st.Executions-st.Keys, lost+st.LostCompletions
			}
			return append(row, fmt.Sprintf("%d, %d", twice, lost))
		})
	}
	return []regionTable{mrec, home, mrsc}
}

// computeRows computes rows on two workers (each run is a deterministic
// function of its configuration, whatever runs beside it).
func computeRows(t *testing.T, rows []func(*testing.T) []string) [][]string {
	out := make([][]string, len(rows))
	next := make(chan int)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = rows[i](t)
			}
		}()
	}
	for i := range rows {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// regionsPage is the page whose tables TestRegionsTable holds, from the
// repository's root.
const regionsPage = "docs/multi-region.md"

// TestRegionsTable computes the tables of docs/multi-region.md with the
// simulation (measureRegions: sim.Regional's events, a fixed seed) and
// compares each with the page's, between its markers
// "<!-- regions-table NAME -->" and "<!-- end regions-table NAME -->";
// -sim.update-docs rewrites them. Its 21 runs take some 4 s on two cores,
// ten times more under the race detector, where it does not run: make
// test runs it without (the line that runs TestSim).
func TestRegionsTable(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes the table's runs ten times slower: make test checks the table without it, beside TestSim")
	}
	root, err := devserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, regionsPage)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, tb := range regionTables() {
		begin, end := "<!-- regions-table "+tb.name+" -->\n", "<!-- end regions-table "+tb.name+" -->"
		i, j := strings.Index(page, begin), strings.Index(page, end)
		if i < 0 || j < i {
			t.Fatalf("%s: no table between %q and %q", regionsPage, begin, end)
		}
		old := page[i+len(begin) : j]
		var got strings.Builder
		got.WriteString(tb.header)
		for _, row := range computeRows(t, tb.rows) {
			got.WriteString("| " + strings.Join(row, " | ") + " |\n")
		}
		switch {
		case *updateDocs:
			page = page[:i+len(begin)] + got.String() + page[j:]
		case old != got.String():
			t.Errorf("%s: table %s differs from what the simulation computes:\n%s\nthe page has:\n%s\n(go test ./internal/sim -run '^TestRegionsTable$' -sim.update-docs rewrites it)",
				regionsPage, tb.name, got.String(), old)
		}
	}
	if *updateDocs {
		if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
