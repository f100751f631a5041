package main

// `bench peers` runs the workload's per-event scenarios with idem and with Powertools for
// AWS Lambda (TypeScript) idempotency on one dynalite, behind one counting proxy, and prints
// them side by side with the ratios idem/Powertools:
//
//	go run ./cmd/bench peers [-n 500] [-runs 3] [-json out.json] [-md out.md]
//
// The Powertools side is bench/peers/powertools/run.mjs, run with node once per run (make
// bench-peers installs its packages). Runs alternate which library goes first, so that a
// drift of the machine's load does not favour one of them; each figure is the median over
// runs.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/idemgo/idem/internal/devserver"
)

// p50Target is the latency target: idem's p50 at most this fraction of Powertools'.
const p50Target = 0.6

// cpuTarget is the client CPU target: the geometric mean over the rows of idem's client CPU
// per event over Powertools' at most this.
const cpuTarget = 0.30

// ptPackage is the npm package measured beside idem, and ptSDK the DynamoDB client it uses.
const (
	ptPackage = "@aws-lambda-powertools/idempotency"
	ptSDK     = "@aws-sdk/client-dynamodb"
)

type peerFlags struct {
	n, runs, warmup int
	raceTrials      int
	only            *regexp.Regexp
	jsonPath        string
	mdPath          string
	svgDir          string
	node            string
	driver          string
}

// peerFigures are one library's figures for one scenario in one mode.
type peerFigures struct {
	P50Ms      float64            `json:"p50_ms"`
	P99Ms      float64            `json:"p99_ms"`
	LatencyMs  *quantiles         `json:"latency_ms,omitempty"`
	EventsPerS float64            `json:"events_per_s"`
	CPUUs      float64            `json:"client_cpu_us_per_event"`
	Calls      map[string]float64 `json:"calls_per_event"`
}

// peerRow is one scenario in one mode, both libraries' medians over runs.
type peerRow struct {
	Scenario  string `json:"scenario"`
	Mode      string `json:"mode"`
	Reference bool   `json:"reference,omitempty"`
	// Executes marks the scenarios whose handler runs for each event (first
	// executions, retries, takeovers).
	Executes   bool        `json:"executes,omitempty"`
	Idem       peerFigures `json:"idem"`
	Powertools peerFigures `json:"powertools"`
	// IdemUnits and PTUnits are each library's capacity units per event,
	// charged at the proxy.
	IdemUnits *capFigures `json:"idem_capacity"`
	PTUnits   *capFigures `json:"powertools_capacity"`
}

// ptFigure is what run.mjs reports for one scenario in one mode.
type ptFigure struct {
	P50Ms          float64          `json:"p50_ms"`
	P99Ms          float64          `json:"p99_ms"`
	LatencyMs      *quantiles       `json:"latency_ms"`
	EventsPerS     float64          `json:"events_per_s"`
	CPUUs          float64          `json:"client_cpu_us_per_event"`
	Calls          map[string]int64 `json:"calls"`
	Capacity       capDelta         `json:"capacity"`
	Executions     int64            `json:"executions"`
	Outcomes       map[string]int   `json:"outcomes"`
	FirstError     string           `json:"first_error"`
	ExpectOutcome  string           `json:"expected_outcome"`
	ExpectExecsPer int64            `json:"expected_executions_per_event"`
}

// ptRun is run.mjs's output for one run: scenario → mode → figures, and c_race.
type ptRun struct {
	Run       int                             `json:"run"`
	N         int                             `json:"n"`
	Scenarios map[string]map[string]*ptFigure `json:"scenarios"`
	Race      *ptRace                         `json:"c_race"`
}

// ptRace is run.mjs's c_race: as raceRun.
type ptRace struct {
	ExecutionsPerKey []int64          `json:"executions_per_key"`
	Outcomes         map[string]int   `json:"outcomes"`
	WinnerMs         []float64        `json:"winner_ms"`
	OthersP50Ms      []float64        `json:"others_p50_ms"`
	Calls            map[string]int64 `json:"calls"`
	Capacity         capDelta         `json:"capacity"`
}

// peerRace is c_race for one library, over every trial of every run.
type peerRace struct {
	Trials         int                `json:"trials"`
	MaxExecutions  int64              `json:"max_executions_per_key"`
	Outcomes       map[string]int     `json:"outcomes"`
	WinnerMedianMs float64            `json:"executing_call_median_ms"`
	OthersMedianMs float64            `json:"other_calls_median_ms"`
	CallsPerTrial  map[string]float64 `json:"calls_per_trial"`
}

type peerMeta struct {
	Started    string      `json:"started"`
	DurationS  float64     `json:"duration_s"`
	N          int         `json:"n"`
	Runs       int         `json:"runs"`
	Warmup     int         `json:"warmup"`
	Powertools string      `json:"powertools"`
	Machine    machineInfo `json:"machine"`
	Notes      []string    `json:"notes"`
}

type peerReport struct {
	Meta     peerMeta             `json:"meta"`
	Rows     []peerRow            `json:"rows"`
	CPU      peerCPU              `json:"client_cpu"`
	Race     map[string]*peerRace `json:"c_race,omitempty"` // "idem", "powertools"
	Failures []string             `json:"failures"`
}

// runPeers is `bench peers`: it parses args, runs both libraries and prints the table.
func runPeers(args []string) int {
	pf, err := parsePeerFlags(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench peers: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := peers(ctx, pf)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench peers: %v\n", err)
		return 1
	}
	md := peersMarkdown(rep)
	fmt.Print(md)
	if err := writePeerFiles(rep, md, pf); err != nil {
		fmt.Fprintf(os.Stderr, "bench peers: %v\n", err)
		return 1
	}
	if pf.svgDir != "" {
		if err := writeCharts(pf.svgDir, peerCharts(rep)); err != nil {
			fmt.Fprintf(os.Stderr, "bench peers: charts: %v\n", err)
			return 1
		}
	}
	if len(rep.Failures) > 0 {
		fmt.Fprintf(os.Stderr, "bench peers: %d correctness check(s) failed:\n  %s\n", len(rep.Failures), strings.Join(rep.Failures, "\n  "))
		return 1
	}
	return 0
}

func parsePeerFlags(args []string) (peerFlags, error) {
	var pf peerFlags
	var only string
	fs := flag.NewFlagSet("bench peers", flag.ContinueOnError)
	fs.IntVar(&pf.n, "n", defaultN(), "events per scenario and mode (default: $BENCH_N, else 2000)")
	fs.IntVar(&pf.runs, "runs", 3, "runs of each library (alternating which goes first); the median is reported")
	fs.IntVar(&pf.warmup, "warmup", 200, "unmeasured warm-up per run and mode: this many unique events, then the same again")
	fs.IntVar(&pf.raceTrials, "race-trials", 10, "trials per run for c_race")
	fs.StringVar(&only, "only", "", "run only the scenarios whose name matches this regular expression")
	fs.StringVar(&pf.jsonPath, "json", "", "also write the JSON document to this file")
	fs.StringVar(&pf.mdPath, "md", "", "also write the Markdown table to this file")
	fs.StringVar(&pf.svgDir, "svg", "", "also write the SVG charts (docs/benchmarks.md) into this directory")
	fs.StringVar(&pf.node, "node", "node", "the Node.js binary")
	fs.StringVar(&pf.driver, "driver", "", "the Powertools driver (default: bench/peers/powertools/run.mjs in the repository)")
	if err := fs.Parse(args); err != nil {
		return pf, err
	}
	if pf.n < 1 || pf.runs < 1 || pf.raceTrials < 1 || pf.warmup < 0 {
		return pf, errors.New("-n, -runs and -race-trials must be positive, -warmup not negative")
	}
	names := peerScenarioNames()
	pat := "^(" + strings.Join(names, "|") + ")$"
	if only != "" {
		if _, err := regexp.Compile(only); err != nil {
			return pf, fmt.Errorf("-only: %w", err)
		}
		var keep []string
		re := regexp.MustCompile(only)
		for _, n := range names {
			if re.MatchString(n) {
				keep = append(keep, n)
			}
		}
		if len(keep) == 0 {
			return pf, fmt.Errorf("-only %q matches none of %s", only, strings.Join(names, ", "))
		}
		pat = "^(" + strings.Join(keep, "|") + ")$"
	}
	pf.only = regexp.MustCompile(pat)
	return pf, nil
}

// peerScenarioNames are the scenarios both libraries run: the workload's per-event ones
// and c_race.
func peerScenarioNames() []string {
	var names []string
	for _, sc := range workload() {
		names = append(names, sc.Name)
	}
	return append(names, "c_race")
}

// peers starts dynalite and the counting proxy, runs both libraries pf.runs times each and
// returns the side-by-side report.
func peers(ctx context.Context, pf peerFlags) (*peerReport, error) {
	start := time.Now()
	root, err := devserver.RepoRoot()
	if err != nil {
		return nil, err
	}
	if pf.driver == "" {
		pf.driver = filepath.Join(root, "bench", "peers", "powertools", "run.mjs")
	}
	modules := filepath.Join(filepath.Dir(pf.driver), "node_modules")
	ptVersion, err := installedVersion(filepath.Join(modules, ptPackage))
	if err != nil {
		return nil, fmt.Errorf("%s is not installed beside %s (make bench-peers installs it): %w", ptPackage, pf.driver, err)
	}
	sdkVersion, err := installedVersion(filepath.Join(modules, ptSDK))
	if err != nil {
		return nil, fmt.Errorf("%s is not installed beside %s (make bench-peers installs it): %w", ptSDK, pf.driver, err)
	}
	mach := machine(root)
	dyn, err := devserver.StartDynalite(ctx, root)
	if err != nil {
		return nil, err
	}
	defer stopServer("dynalite", dyn.PID, dyn.Stop)
	prx, err := startProxy(ctx, dyn.Endpoint, true)
	if err != nil {
		return nil, err
	}
	defer stopServer("proxy", prx.PID, func() error { prx.Stop(); return nil })
	logf("dynalite pid %d, counting proxy pid %d at %s", dyn.PID, prx.PID, prx.Endpoint)
	client, err := newClient(ctx, prx.Endpoint)
	if err != nil {
		return nil, err
	}
	f := flags{n: pf.n, runs: pf.runs, warmup: pf.warmup, only: pf.only, raceTrials: pf.raceTrials, sqsReps: 1}
	idemRep := newReport(f)
	b := &bench{ctx: ctx, client: client, proxy: prx, dynaPID: dyn.PID, n: pf.n, warmup: pf.warmup}
	var pt []ptRun
	err = alternate(pf.runs, func(r int) error { return b.oneRun(idemRep, client, f, r) }, func(r int) error {
		res, err := runDriver(ctx, pf, prx.Endpoint, r)
		pt = append(pt, res)
		return err
	})
	if err != nil {
		return nil, err
	}
	rep := &peerReport{Meta: peerMeta{Started: start.UTC().Format(time.RFC3339), N: pf.n, Runs: pf.runs, Warmup: pf.warmup,
		Powertools: ptPackage + "@" + ptVersion + " with " + ptSDK + "@" + sdkVersion, Machine: mach, Notes: peerNotes}}
	rep.Rows, rep.Failures = peerRows(idemRep, pt, pf.n)
	rep.CPU = cpuRatios(rep.Rows)
	rep.Failures = append(slices.Clone(idemRep.Failures), rep.Failures...)
	rep.Race, rep.Failures = peerRaces(idemRep.races, pt, rep.Failures)
	rep.Meta.DurationS = round(time.Since(start).Seconds(), 1)
	rep.Meta.Machine.LoadAvgEnd = loadAvg()
	return rep, nil
}

// alternate calls idem(r) and pt(r) for r = 1..runs, idem first in odd runs and second in
// even ones, so that a drift of the machine's load favours neither; it stops at the first error.
func alternate(runs int, idem, pt func(r int) error) error {
	for r := 1; r <= runs; r++ {
		steps := []func(int) error{idem, pt}
		if r%2 == 0 {
			steps[0], steps[1] = pt, idem
		}
		for _, step := range steps {
			if err := step(r); err != nil {
				return fmt.Errorf("run %d: %w", r, err)
			}
		}
	}
	return nil
}

var peerNotes = []string{
	"one dynalite, one counting proxy: calls are counted at the wire the same way for both libraries",
	"medians over runs; runs alternate which library goes first; a fresh table per library and run",
	"latency: one wrapped call with a 30 s deadline, measured in the client (idem: runner.Do; Powertools: the makeIdempotent function)",
	"client CPU: the whole client process's user+system time / N (Go: getrusage; Node: process.cpuUsage)",
	"dynalite ignores ReturnValuesOnConditionCheckFailure, so a failed conditional put costs both libraries one GetItem more than on DynamoDB",
}

// installedVersion reads the version of the npm package installed in dir.
func installedVersion(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return "", err
	}
	var p struct{ Version string }
	if err := json.Unmarshal(b, &p); err != nil {
		return "", err
	}
	return p.Version, nil
}

// runDriver runs the Powertools driver once (run r) against endpoint and reads its output.
func runDriver(ctx context.Context, pf peerFlags, endpoint string, r int) (ptRun, error) {
	dir, err := os.MkdirTemp("", "idem-bench-peers-")
	if err != nil {
		return ptRun{}, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "powertools.json")
	cmd := exec.CommandContext(ctx, pf.node, "--expose-gc", "--disable-warning=Warning", pf.driver,
		"--endpoint", endpoint, "--n", fmt.Sprint(pf.n), "--warmup", fmt.Sprint(pf.warmup),
		"--run", fmt.Sprint(r), "--race-trials", fmt.Sprint(pf.raceTrials), "--only", pf.only.String(), "--out", out)
	cmd.Dir = filepath.Dir(pf.driver)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Run(); err != nil {
		return ptRun{}, fmt.Errorf("powertools driver: %w", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return ptRun{}, fmt.Errorf("powertools driver: %w", err)
	}
	var res ptRun
	if err := json.Unmarshal(b, &res); err != nil {
		return ptRun{}, fmt.Errorf("powertools driver output: %w", err)
	}
	return res, nil
}

// peerRows pairs idem's and Powertools' runs by scenario and mode, in the workload's order,
// and returns the rows (medians over runs) and Powertools' failed correctness checks.
func peerRows(idemRep *report, pt []ptRun, n int) ([]peerRow, []string) {
	var rows []peerRow
	var failures []string
	for _, sc := range workload() {
		for _, m := range modes {
			var idemRuns, ptRuns []peerFigures
			var idemCaps, ptCaps []capDelta
			if f, ok := idemRep.figs[sc.Name]; ok {
				for _, ms := range f.measuredRuns[m.Name] {
					idemRuns = append(idemRuns, fromMeasured(ms, n))
					idemCaps = append(idemCaps, ms.Capacity)
				}
			}
			for _, run := range pt {
				fig := run.Scenarios[sc.Name][m.Name]
				if fig == nil {
					continue
				}
				ptRuns = append(ptRuns, fig.figures(n))
				ptCaps = append(ptCaps, fig.Capacity)
				failures = append(failures, fig.check(sc.Name, m.Name, run.Run, n)...)
			}
			if len(idemRuns) == 0 || len(ptRuns) == 0 {
				continue
			}
			rows = append(rows, peerRow{Scenario: sc.Name, Mode: m.Name, Reference: sc.Bare, Executes: !sc.Bare && sc.ExecsPerEvent > 0,
				Idem: medianFigures(idemRuns), Powertools: medianFigures(ptRuns),
				IdemUnits: newCapFigures(idemCaps, n), PTUnits: newCapFigures(ptCaps, n)})
		}
	}
	return rows, failures
}

// peerCPU is idem's client CPU per event over Powertools', as geometric means of the
// rows' ratios: over every row but the reference rows, and over the rows whose handler
// runs for each event.
type peerCPU struct {
	Geomean         float64 `json:"geomean_ratio"`
	Rows            int     `json:"rows"`
	ExecutedGeomean float64 `json:"executed_geomean_ratio"`
	ExecutedRows    int     `json:"executed_rows"`
	Target          float64 `json:"geomean_target"`
}

// cpuRatios returns the geometric means of the rows' client CPU ratios; a row without
// figures on either side is left out.
func cpuRatios(rows []peerRow) peerCPU {
	var all, executed []float64
	for _, r := range rows {
		if r.Reference || r.Idem.CPUUs <= 0 || r.Powertools.CPUUs <= 0 {
			continue
		}
		x := r.Idem.CPUUs / r.Powertools.CPUUs
		all = append(all, x)
		if r.Executes {
			executed = append(executed, x)
		}
	}
	return peerCPU{Geomean: round(geomean(all), 3), Rows: len(all), ExecutedGeomean: round(geomean(executed), 3),
		ExecutedRows: len(executed), Target: cpuTarget}
}

// geomean is the geometric mean of xs, all positive (0 for none).
func geomean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += math.Log(x)
	}
	return math.Exp(sum / float64(len(xs)))
}

// peerRaces summarizes both libraries' c_race runs (nil when neither ran it) and adds a
// failure for each Powertools trial whose key ran more than once (idem's are added by
// report.addRace).
func peerRaces(idemRuns []raceRun, pt []ptRun, failures []string) (map[string]*peerRace, []string) {
	var ptRuns []raceRun
	for _, run := range pt {
		if run.Race == nil {
			continue
		}
		rr := raceRun(*run.Race)
		ptRuns = append(ptRuns, rr)
		for i, e := range rr.ExecutionsPerKey {
			if e != 1 {
				failures = append(failures, fmt.Sprintf("powertools c_race run %d trial %d: the handler ran %d times for one key", run.Run, i, e))
			}
		}
	}
	if len(idemRuns) == 0 && len(ptRuns) == 0 {
		return nil, failures
	}
	return map[string]*peerRace{"idem": summarizeRace(idemRuns), "powertools": summarizeRace(ptRuns)}, failures
}

// summarizeRace pools c_race's trials over runs: the most executions of one key, the
// outcomes, the median latencies and the median calls per trial.
func summarizeRace(runs []raceRun) *peerRace {
	pr := &peerRace{Outcomes: map[string]int{}, CallsPerTrial: map[string]float64{}}
	var win, oth []float64
	calls := map[string][]float64{}
	for _, rr := range runs {
		pr.Trials += len(rr.ExecutionsPerKey)
		for _, e := range rr.ExecutionsPerKey {
			pr.MaxExecutions = max(pr.MaxExecutions, e)
		}
		for k, v := range rr.Outcomes {
			pr.Outcomes[k] += v
		}
		win = append(win, rr.WinnerMs...)
		oth = append(oth, rr.OthersP50Ms...)
		for k, v := range rr.Calls {
			calls[k] = append(calls[k], float64(v)/float64(max(1, len(rr.ExecutionsPerKey))))
		}
	}
	pr.WinnerMedianMs, pr.OthersMedianMs = round(median(win), 2), round(median(oth), 2)
	for k, v := range calls {
		pr.CallsPerTrial[k] = round(median(v), 1)
	}
	return pr
}

func fromMeasured(m measured, n int) peerFigures {
	lat := m.Latency
	return peerFigures{P50Ms: ms(m.P50), P99Ms: ms(m.P99), LatencyMs: &lat, EventsPerS: m.EventsPerS, CPUUs: us(m.ClientCPU), Calls: perEvent(m.Calls, n)}
}

func (f *ptFigure) figures(n int) peerFigures {
	return peerFigures{P50Ms: f.P50Ms, P99Ms: f.P99Ms, LatencyMs: f.LatencyMs, EventsPerS: f.EventsPerS, CPUUs: f.CPUUs, Calls: perEvent(f.Calls, n)}
}

// check returns what went wrong with one Powertools measurement: a call that got another
// outcome than expected, or a handler that ran another number of times.
func (f *ptFigure) check(scenario, mode string, run, n int) []string {
	var out []string
	if got := f.Outcomes[f.ExpectOutcome]; got != n {
		out = append(out, fmt.Sprintf("powertools %s %s run %d: %d of %d calls got %q; outcomes %v; first error: %s",
			scenario, mode, run, got, n, f.ExpectOutcome, f.Outcomes, f.FirstError))
	}
	if f.Executions != f.ExpectExecsPer*int64(n) {
		out = append(out, fmt.Sprintf("powertools %s %s run %d: handler ran %d times for %d events, want %d per event",
			scenario, mode, run, f.Executions, n, f.ExpectExecsPer))
	}
	for _, p := range checkCapacity(f.Capacity, f.Calls) {
		out = append(out, fmt.Sprintf("powertools %s %s run %d: capacity: %s", scenario, mode, run, p))
	}
	return out
}

// medianFigures returns the median of each figure over runs (of each operation's calls too).
func medianFigures(runs []peerFigures) peerFigures {
	pick := func(get func(peerFigures) float64) float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = get(r)
		}
		return median(xs)
	}
	out := peerFigures{
		P50Ms:      round(pick(func(f peerFigures) float64 { return f.P50Ms }), 3),
		P99Ms:      round(pick(func(f peerFigures) float64 { return f.P99Ms }), 3),
		EventsPerS: round(pick(func(f peerFigures) float64 { return f.EventsPerS }), 0),
		CPUUs:      round(pick(func(f peerFigures) float64 { return f.CPUUs }), 1),
		Calls:      map[string]float64{},
	}
	var lat []quantiles
	for _, r := range runs {
		if r.LatencyMs != nil {
			lat = append(lat, *r.LatencyMs)
		}
	}
	if len(lat) == len(runs) {
		out.LatencyMs = medianQuantiles(lat)
	}
	ops := map[string]bool{}
	for _, r := range runs {
		for op := range r.Calls {
			ops[op] = true
		}
	}
	for op := range ops {
		out.Calls[op] = round(pick(func(f peerFigures) float64 { return f.Calls[op] }), 3)
	}
	return out
}

// totalCalls is the DynamoDB calls per event, all operations together.
func totalCalls(calls map[string]float64) float64 {
	var t float64
	for _, v := range calls {
		t += v
	}
	return t
}

// callsOK reports whether idem makes at most as many DynamoDB calls per event as Powertools.
func (r peerRow) callsOK() bool {
	return totalCalls(r.Idem.Calls) <= totalCalls(r.Powertools.Calls)+1e-9
}

// p50OK reports whether idem's p50 is at most p50Target times Powertools'.
func (r peerRow) p50OK() bool { return r.Idem.P50Ms <= p50Target*r.Powertools.P50Ms }

// ratio returns a/b as text with two significant decimals, or "–" when b is 0.
func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// opLetters abbreviates the DynamoDB operations in the table.
var opLetters = map[string]string{"PutItem": "P", "GetItem": "G", "UpdateItem": "U", "DeleteItem": "D"}

// callsText writes calls per event as "total (nP+nG…)", e.g. "4 (3P+1G)"; operations in
// name order.
func callsText(calls map[string]float64) string {
	total := totalCalls(calls)
	if total == 0 {
		return "0"
	}
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(calls)) {
		if calls[op] == 0 {
			continue
		}
		l, ok := opLetters[op]
		if !ok {
			l = " " + op
		}
		parts = append(parts, num(calls[op])+l)
	}
	return num(total) + " (" + strings.Join(parts, "+") + ")"
}

// unitsText writes capacity units per event as "write + read".
func unitsText(f *capFigures) string {
	if f == nil {
		return "–"
	}
	return fmtUnits(f.WritePerEvent) + " + " + fmtUnits(f.ReadPerEvent)
}

// num writes x without trailing zeros (at most 2 decimals).
func num(x float64) string {
	s := strings.TrimRight(fmt.Sprintf("%.2f", x), "0")
	return strings.TrimSuffix(s, ".")
}

// msText writes milliseconds with two decimals, three below 0.1 ms (cache hits).
func msText(x float64) string {
	if x < 0.1 {
		return fmt.Sprintf("%.3f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

func metText(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// peersMarkdown renders the report as a Markdown table with a summary of the targets.
func peersMarkdown(rep *peerReport) string {
	var sb strings.Builder
	m := rep.Meta
	fmt.Fprintf(&sb, "idem beside %s, N=%d per scenario and mode, median of %d runs; %d CPU(s) %s, %s, Node %s; started %s, load average %s at the start, %s at the end.\n\n",
		m.Powertools, m.N, m.Runs, m.Machine.NumCPU, m.Machine.CPUModel, m.Machine.GoVersion, m.Machine.Node, m.Started,
		m.Machine.LoadAvgStart, m.Machine.LoadAvgEnd)
	sb.WriteString("| scenario | mode | p50 ms idem / PT (ratio) | p99 ms idem / PT (ratio) | client CPU µs/event idem / PT (ratio) | calls/event idem / PT | write + read units/event idem / PT | idem calls ≤ PT | idem p50 ≤ 0.6× PT |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	var rows, callsMet, p50Met int
	for _, r := range rep.Rows {
		callsCol, p50Col := "ref.", "ref."
		if !r.Reference {
			rows++
			if r.callsOK() {
				callsMet++
			}
			if r.p50OK() {
				p50Met++
			}
			callsCol, p50Col = yesNo(r.callsOK()), yesNo(r.p50OK())
		}
		i, p := r.Idem, r.Powertools
		fmt.Fprintf(&sb, "| %s | %s | %s / %s (%s) | %s / %s (%s) | %.0f / %.0f (%s) | %s / %s | %s / %s | %s | %s |\n",
			r.Scenario, r.Mode, msText(i.P50Ms), msText(p.P50Ms), ratio(i.P50Ms, p.P50Ms), msText(i.P99Ms), msText(p.P99Ms), ratio(i.P99Ms, p.P99Ms),
			i.CPUUs, p.CPUUs, ratio(i.CPUUs, p.CPUUs), callsText(i.Calls), callsText(p.Calls), unitsText(r.IdemUnits), unitsText(r.PTUnits), callsCol, p50Col)
	}
	fmt.Fprintf(&sb, "\nidem's calls ≤ Powertools' in %d of %d rows; idem's p50 ≤ 0.6× Powertools' in %d of %d rows", callsMet, rows, p50Met, rows)
	sb.WriteString(" (P PutItem, G GetItem, U UpdateItem, D DeleteItem; ref. rows are one plain PutItem through each SDK, not part of the targets).\n")
	c := rep.CPU
	fmt.Fprintf(&sb, "\nClient CPU, idem / Powertools: geometric mean %.2f× over %d rows (target ≤ %.2f×: %s); %.2f× over the %d rows whose handler runs for each event.\n",
		c.Geomean, c.Rows, c.Target, metText(c.Geomean <= c.Target), c.ExecutedGeomean, c.ExecutedRows)
	if i, p := rep.Race["idem"], rep.Race["powertools"]; i != nil && p != nil {
		raceMarkdown(&sb, i, p)
	}
	return sb.String()
}

// raceMarkdown renders c_race for both libraries.
func raceMarkdown(sb *strings.Builder, i, p *peerRace) {
	fmt.Fprintf(sb, "\nc_race: %d concurrent calls with one key, the handler sleeps %d ms; %d trials of idem, %d of Powertools.\n\n",
		raceCallers, raceSleep/time.Millisecond, i.Trials, p.Trials)
	sb.WriteString("| c_race | idem | Powertools |\n|---|---|---|\n")
	fmt.Fprintf(sb, "| most executions of one key | %d | %d |\n", i.MaxExecutions, p.MaxExecutions)
	fmt.Fprintf(sb, "| outcomes | %s | %s |\n", outcomesText(i.Outcomes), outcomesText(p.Outcomes))
	fmt.Fprintf(sb, "| executing call, median ms | %.2f | %.2f |\n", i.WinnerMedianMs, p.WinnerMedianMs)
	fmt.Fprintf(sb, "| other calls, median ms | %.2f | %.2f |\n", i.OthersMedianMs, p.OthersMedianMs)
	fmt.Fprintf(sb, "| calls per trial | %s | %s |\n", callsText(i.CallsPerTrial), callsText(p.CallsPerTrial))
	ok := totalCalls(i.CallsPerTrial) <= totalCalls(p.CallsPerTrial)+1e-9
	fmt.Fprintf(sb, "| idem calls ≤ PT | %s | |\n", yesNo(ok))
}

// outcomesText writes outcome counts in name order: "executed 10, in_progress 310".
func outcomesText(outs map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(outs)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, outs[k]))
	}
	return strings.Join(parts, ", ")
}

func writePeerFiles(rep *peerReport, md string, pf peerFlags) error {
	if pf.jsonPath != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(pf.jsonPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if pf.mdPath != "" {
		return os.WriteFile(pf.mdPath, []byte(md), 0o644)
	}
	return nil
}
