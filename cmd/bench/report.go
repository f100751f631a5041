package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

type machineInfo struct {
	NumCPU       int    `json:"nproc"`
	CPUModel     string `json:"cpu_model"`
	GoVersion    string `json:"go"`
	GOOS         string `json:"goos"`
	GOARCH       string `json:"goarch"`
	Dynalite     string `json:"dynalite"`
	Node         string `json:"node"`
	LoadAvgStart string `json:"loadavg_at_start"`
	LoadAvgEnd   string `json:"loadavg_at_end"`
}

type meta struct {
	Started   string      `json:"started"`
	DurationS float64     `json:"duration_s"`
	N         int         `json:"n"`
	Runs      int         `json:"runs"`
	Warmup    int         `json:"warmup"`
	Command   string      `json:"command"`
	Machine   machineInfo `json:"machine"`
	Notes     []string    `json:"notes"`
}

// modeFigures are one scenario's figures in one mode: medians over runs.
type modeFigures struct {
	P50Ms               float64            `json:"p50_ms"`
	P99Ms               float64            `json:"p99_ms"`
	LatencyMs           *quantiles         `json:"latency_ms"`
	EventsPerS          float64            `json:"events_per_s"`
	ClientCPUUsPerEvent float64            `json:"client_cpu_us_per_event"`
	DynaliteCPUUsPerEv  float64            `json:"dynalite_cpu_us_per_event"`
	ProxyCPUUsPerEvent  float64            `json:"proxy_cpu_us_per_event"`
	CallsPerEvent       map[string]float64 `json:"calls_per_event"`
	ExecsPerEvent       float64            `json:"executions_per_event"`
	Outcomes            map[string]int     `json:"outcomes_last_run"`
	Check               string             `json:"check"`
	Capacity            *capFigures        `json:"capacity"`
	Runs                []runFigures       `json:"runs"`
}

// runFigures are one run's figures, kept beside the medians.
type runFigures struct {
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	EventsPerS float64 `json:"events_per_s"`
	ClientCPU  float64 `json:"client_cpu_us_per_event"`
	Dynalite   float64 `json:"dynalite_cpu_us_per_event"`
}

type scenarioFigures struct {
	Note          string             `json:"note"`
	Expect        string             `json:"expected_outcome"`
	WantCalls     map[string]float64 `json:"expected_calls_per_event_on_dynalite"`
	Modes         map[string]*modeFigures
	measuredRuns  map[string][]measured
	expectExecs   int64
	expectOutcome string
}

func (s *scenarioFigures) MarshalJSON() ([]byte, error) {
	m := map[string]any{"note": s.Note, "expected_outcome": s.Expect, "expected_calls_per_event_on_dynalite": s.WantCalls}
	for k, v := range s.Modes {
		m[k] = v
	}
	return json.Marshal(m)
}

type raceFigures struct {
	Trials           int                `json:"trials"`
	Callers          int                `json:"concurrent_calls_per_key"`
	HandlerSleepMs   int                `json:"handler_sleep_ms"`
	ExecutionsPerKey []int64            `json:"executions_per_key"`
	MaxExecutions    int64              `json:"max_executions_per_key"`
	Outcomes         map[string]int     `json:"outcomes"`
	WinnerMedianMs   float64            `json:"executing_call_median_ms"`
	OthersMedianMs   float64            `json:"other_calls_median_ms"`
	CallsPerTrial    map[string]float64 `json:"calls_per_trial"`
	Capacity         *capFigures        `json:"capacity_per_trial"`
	Check            string             `json:"check"`
}

type sqsFigures struct {
	HandlerSleepMs int                `json:"handler_sleep_ms"`
	BatchSize      int                `json:"batch_size"`
	BatchMedianMs  float64            `json:"batch_median_ms"`
	SingleMedianMs float64            `json:"single_median_ms"`
	Ratio          float64            `json:"ratio"`
	RatioPerRun    []float64          `json:"ratio_per_run"`
	CallsPerMsg    map[string]float64 `json:"calls_per_message"`
	Capacity       *capFigures        `json:"capacity_per_message"`
	Failures       int                `json:"batch_item_failures"`
	Check          string             `json:"check"`
	Note           string             `json:"note"`
	// DynaliteMsPerMsg is dynalite's CPU per message: a batch's writes
	// queue on its one thread.
	DynaliteMsPerMsg float64 `json:"dynalite_cpu_ms_per_message"`
}

type target struct {
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Status   string `json:"status"` // met, missed, not measured
	Note     string `json:"note,omitempty"`
}

type report struct {
	Meta      meta                   `json:"meta"`
	Scenarios map[string]any         `json:"scenarios"`
	ItemSize  []itemSizeRow          `json:"item_size"`
	AllOld    *allOldResult          `json:"allold_moto,omitempty"`
	Capacity  []capRow               `json:"capacity,omitempty"`
	Records   []recordRow            `json:"records_beside_powertools,omitempty"`
	Storm     *stormResult           `json:"storm,omitempty"`
	Stores    []storeRow             `json:"stores,omitempty"`
	Micro     map[string]microResult `json:"micro"`
	Floor     *floorResult           `json:"cpu_floor,omitempty"`
	Soak      *soakResult            `json:"soak,omitempty"`
	Targets   []target               `json:"targets"`
	Failures  []string               `json:"failures"`

	Coldstart *coldstartResult `json:"-"`
	order     []string
	figs      map[string]*scenarioFigures
	races     []raceRun
	sqs       []sqsRun
}

func newReport(f flags) *report {
	return &report{
		Meta: meta{Started: time.Now().UTC().Format(time.RFC3339), N: f.n, Runs: f.runs, Warmup: f.warmup,
			Command: strings.Join(os.Args, " "),
			Notes: []string{
				"medians over runs; every run uses a fresh table on one dynalite",
				"latency: one wrapped call (runner.Do) with a 30 s deadline, measured in the client",
				"client CPU: this process's getrusage user+system time / N (idem + AWS SDK + HTTP client; the proxy runs in another process)",
				"dynalite/proxy CPU: /proc/PID/stat utime+stime (10 ms ticks) / N",
				"calls: requests counted by X-Amz-Target at the proxy",
				"dynalite ignores ReturnValuesOnConditionCheckFailure, so every failed conditional write costs one more GetItem than on DynamoDB",
			}},
		Scenarios: map[string]any{},
		figs:      map[string]*scenarioFigures{},
		Failures:  []string{},
	}
}

func (r *report) addScenario(sc scenario, modeName string, run int, m measured, n int) {
	f, ok := r.figs[sc.Name]
	if !ok {
		f = &scenarioFigures{Note: sc.Note, Expect: sc.Expect, WantCalls: sc.WantCalls, Modes: map[string]*modeFigures{},
			measuredRuns: map[string][]measured{}, expectExecs: sc.ExecsPerEvent, expectOutcome: sc.Expect}
		r.figs[sc.Name] = f
		r.order = append(r.order, sc.Name)
		r.Scenarios[sc.Name] = f
	}
	f.measuredRuns[modeName] = append(f.measuredRuns[modeName], m)
	if got := m.Outcomes[sc.Expect]; got != n {
		r.Failures = append(r.Failures, fmt.Sprintf("%s %s run %d: %d of %d calls got %q; outcomes %v; first error: %s",
			sc.Name, modeName, run, got, n, sc.Expect, m.Outcomes, m.FirstError))
	}
	if m.Executions != sc.ExecsPerEvent*int64(n) {
		r.Failures = append(r.Failures, fmt.Sprintf("%s %s run %d: handler ran %d times for %d events, want %d per event",
			sc.Name, modeName, run, m.Executions, n, sc.ExecsPerEvent))
	}
	r.checkCapacity(fmt.Sprintf("%s %s run %d", sc.Name, modeName, run), m.Capacity, m.Calls)
}

// checkCapacity adds a failure for each inconsistency of a measurement's
// capacity units (see checkCapacity).
func (r *report) checkCapacity(what string, d capDelta, calls map[string]int64) {
	for _, p := range checkCapacity(d, calls) {
		r.Failures = append(r.Failures, what+": capacity: "+p)
	}
}

func (r *report) addRace(rr raceRun) {
	r.races = append(r.races, rr)
	r.checkCapacity(fmt.Sprintf("c_race run %d", len(r.races)), rr.Capacity, rr.Calls)
	for i, e := range rr.ExecutionsPerKey {
		if e != 1 {
			r.Failures = append(r.Failures, fmt.Sprintf("c_race run %d trial %d: the handler ran %d times for one key", len(r.races), i, e))
		}
	}
}

func (r *report) addSQS(sr sqsRun) {
	r.sqs = append(r.sqs, sr)
	r.checkCapacity(fmt.Sprintf("sqs_batch10 run %d", len(r.sqs)), sr.Capacity, sr.Calls)
	if sr.Failures != 0 || sr.Executions != int64(sr.Messages) {
		r.Failures = append(r.Failures, fmt.Sprintf("sqs_batch10 run %d: %d batch item failures, %d executions for %d messages",
			len(r.sqs), sr.Failures, sr.Executions, sr.Messages))
	}
}

func perEvent(calls map[string]int64, n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range calls {
		out[k] = round(float64(v)/float64(n), 3)
	}
	return out
}

// medianCalls is the median over runs of each operation's calls per event.
func medianCalls(ms []measured, n int) map[string]float64 {
	ops := map[string]bool{}
	for _, m := range ms {
		for k := range m.Calls {
			ops[k] = true
		}
	}
	out := map[string]float64{}
	for op := range ops {
		var xs []float64
		for _, m := range ms {
			xs = append(xs, float64(m.Calls[op])/float64(n))
		}
		out[op] = round(median(xs), 3)
	}
	return out
}

func sameCalls(got, want map[string]float64) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	for k, v := range got {
		if want[k] != v {
			return false
		}
	}
	return true
}

// finish computes the medians and checks the targets.
func (r *report) finish() {
	n := r.Meta.N
	for _, name := range r.order {
		f := r.figs[name]
		for _, md := range modes {
			runs := f.measuredRuns[md.Name]
			if len(runs) == 0 {
				continue
			}
			var p50, p99, eps, cpu, dyn, prx []float64
			var lat []quantiles
			mf := &modeFigures{}
			for _, m := range runs {
				lat = append(lat, m.Latency)
				p50 = append(p50, ms(m.P50))
				p99 = append(p99, ms(m.P99))
				eps = append(eps, m.EventsPerS)
				cpu = append(cpu, us(m.ClientCPU))
				dyn = append(dyn, us(m.DynaliteCPU))
				prx = append(prx, us(m.ProxyCPU))
				mf.Runs = append(mf.Runs, runFigures{P50Ms: round(ms(m.P50), 3), P99Ms: round(ms(m.P99), 3), EventsPerS: round(m.EventsPerS, 0),
					ClientCPU: round(us(m.ClientCPU), 1), Dynalite: round(us(m.DynaliteCPU), 1)})
			}
			last := runs[len(runs)-1]
			mf.P50Ms, mf.P99Ms, mf.EventsPerS = round(median(p50), 3), round(median(p99), 3), round(median(eps), 0)
			mf.LatencyMs = medianQuantiles(lat)
			mf.ClientCPUUsPerEvent, mf.DynaliteCPUUsPerEv, mf.ProxyCPUUsPerEvent = round(median(cpu), 1), round(median(dyn), 1), round(median(prx), 1)
			mf.CallsPerEvent = medianCalls(runs, n)
			var caps []capDelta
			for _, m := range runs {
				caps = append(caps, m.Capacity)
			}
			mf.Capacity = newCapFigures(caps, n)
			mf.ExecsPerEvent = round(float64(last.Executions)/float64(n), 3)
			mf.Outcomes = last.Outcomes
			mf.Check = "ok"
			if last.Outcomes[f.expectOutcome] != n || last.Executions != f.expectExecs*int64(n) {
				mf.Check = "FAILED"
			}
			f.Modes[md.Name] = mf
		}
	}
	if len(r.races) > 0 {
		rf := &raceFigures{Callers: raceCallers, HandlerSleepMs: int(raceSleep / time.Millisecond), Outcomes: map[string]int{}, CallsPerTrial: map[string]float64{}, Check: "ok"}
		var win, oth []float64
		calls := map[string][]float64{}
		for _, rr := range r.races {
			rf.Trials += len(rr.ExecutionsPerKey)
			rf.ExecutionsPerKey = append(rf.ExecutionsPerKey, rr.ExecutionsPerKey...)
			for _, e := range rr.ExecutionsPerKey {
				rf.MaxExecutions = max(rf.MaxExecutions, e)
				if e != 1 {
					rf.Check = "FAILED"
				}
			}
			for k, v := range rr.Outcomes {
				rf.Outcomes[k] += v
			}
			win = append(win, rr.WinnerMs...)
			oth = append(oth, rr.OthersP50Ms...)
			for k, v := range rr.Calls {
				calls[k] = append(calls[k], float64(v)/float64(len(rr.ExecutionsPerKey)))
			}
		}
		rf.WinnerMedianMs, rf.OthersMedianMs = round(median(win), 2), round(median(oth), 2)
		var caps []capDelta
		for _, rr := range r.races {
			caps = append(caps, rr.Capacity)
		}
		rf.Capacity = newCapFigures(caps, len(r.races[0].ExecutionsPerKey))
		for k, v := range calls {
			rf.CallsPerTrial[k] = round(median(v), 1)
		}
		r.Scenarios["c_race"] = rf
	}
	if len(r.sqs) > 0 {
		sf := &sqsFigures{HandlerSleepMs: int(sqsSleep / time.Millisecond), BatchSize: sqsBatch, CallsPerMsg: map[string]float64{}, Check: "ok",
			Note: "wall time of the lambda SQS wrapper's handler for a batch of 10 distinct messages against a batch of 1 (default concurrency 10)"}
		var b, s []float64
		calls := map[string][]float64{}
		for _, sr := range r.sqs {
			b = append(b, median(sr.BatchMs))
			s = append(s, median(sr.SingleMs))
			sf.RatioPerRun = append(sf.RatioPerRun, round(median(sr.BatchMs)/median(sr.SingleMs), 2))
			sf.Failures += sr.Failures
			if sr.Failures != 0 || sr.Executions != int64(sr.Messages) {
				sf.Check = "FAILED"
			}
			for k, v := range sr.Calls {
				calls[k] = append(calls[k], float64(v)/float64(sr.Messages))
			}
		}
		sf.BatchMedianMs, sf.SingleMedianMs = round(median(b), 2), round(median(s), 2)
		sf.Ratio = round(median(sf.RatioPerRun), 2)
		var dyn []float64
		for _, sr := range r.sqs {
			dyn = append(dyn, sr.DynaliteMsPerMsg)
		}
		sf.DynaliteMsPerMsg = round(median(dyn), 2)
		var caps []capDelta
		for _, sr := range r.sqs {
			caps = append(caps, sr.Capacity)
		}
		sf.Capacity = newCapFigures(caps, r.sqs[0].Messages)
		for k, v := range calls {
			sf.CallsPerMsg[k] = round(median(v), 2)
		}
		r.Scenarios["sqs_batch10"] = sf
	}
	if r.Coldstart != nil {
		r.Scenarios["coldstart"] = r.Coldstart
	}
	r.targets()
}

func (r *report) modeFig(name, mode string) *modeFigures {
	if f, ok := r.figs[name]; ok {
		return f.Modes[mode]
	}
	return nil
}

func status(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func fmtCalls(c map[string]float64) string {
	if len(c) == 0 {
		return "0"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%g %s", c[k], k))
	}
	return strings.Join(parts, " + ")
}

// twoWrites are the calls of a first execution: one UpdateItem reserves
// (ddbstore.Store.Acquire), one PutItem completes. A retry and a takeover
// cost the same.
var twoWrites = map[string]float64{"UpdateItem": 1, "PutItem": 1}

// allOldTargets adds the targets measured on a server that returns ALL_OLD.
func (r *report) allOldTargets(add func(target)) {
	rows := []struct {
		target string
		calls  func(*allOldResult) map[string]float64
		want   map[string]float64
	}{
		{"duplicate of completed: 1 call on a server returning ALL_OLD", func(a *allOldResult) map[string]float64 { return a.DuplicateCalls },
			map[string]float64{"UpdateItem": 1}},
		{"retry of a retryable failure: 2 calls on a server returning ALL_OLD", func(a *allOldResult) map[string]float64 { return a.RetryCalls }, twoWrites},
		{"takeover of an expired lease: 2 calls on a server returning ALL_OLD", func(a *allOldResult) map[string]float64 { return a.TakeoverCalls }, twoWrites},
	}
	for _, row := range rows {
		if r.AllOld == nil {
			add(target{Target: row.target, Status: "not measured", Note: "the moto check did not run"})
			continue
		}
		c := row.calls(r.AllOld)
		add(target{Target: row.target, Measured: fmtCalls(c) + " per event on " + r.AllOld.Server, Status: status(sameCalls(c, row.want))})
	}
}

func (r *report) targets() {
	add := func(t target) { r.Targets = append(r.Targets, t) }
	for _, w := range []struct{ scenario, target string }{
		{"a_unique", "first execution: 2 writes per event"},
		{"e_retry", "retry of a retryable failure: 2 writes per event, as a first execution"},
		{"f_expired_inprogress", "takeover of an expired lease: 2 writes per event, as a first execution"},
	} {
		if m := r.modeFig(w.scenario, "seq"); m != nil {
			add(target{Target: w.target, Measured: fmtCalls(m.CallsPerEvent) + " per event (" + w.scenario + " seq)",
				Status: status(sameCalls(m.CallsPerEvent, twoWrites))})
		}
	}
	if m := r.modeFig("b_duplicate_completed", "seq"); m != nil {
		add(target{Target: "duplicate of completed: 2 calls on dynalite (no ALL_OLD)", Measured: fmtCalls(m.CallsPerEvent) + " per event",
			Status: status(sameCalls(m.CallsPerEvent, map[string]float64{"UpdateItem": 1, "GetItem": 1}))})
	}
	r.allOldTargets(add)
	if m := r.modeFig("g_cache_duplicate", "seq"); m != nil {
		add(target{Target: "duplicate of completed with the cache: 0 calls", Measured: fmtCalls(m.CallsPerEvent) + " per event",
			Status: status(len(m.CallsPerEvent) == 0)})
	}
	if s, ok := r.Scenarios["sqs_batch10"].(*sqsFigures); ok {
		add(target{Target: "sqs_batch10: batch of 10 ≤ 1.5× one message", Measured: fmt.Sprintf("%.2f× (%.1f ms vs %.1f ms)", s.Ratio, s.BatchMedianMs, s.SingleMedianMs),
			Status: status(s.Ratio <= 1.5)})
	}
	if m, ok := r.Micro["decide+fingerprint_1KB"]; ok {
		add(target{Target: "decide+fingerprint of 1 KB < 5 µs", Measured: fmt.Sprintf("%.2f µs, %d allocs/op (same payload: encoding/json.Valid alone %.2f µs, sha256 alone %.2f µs)",
			m.NsPerOp/1000, m.AllocsPerOp, r.Micro["ref:encoding/json.Valid_1KB"].NsPerOp/1000, r.Micro["ref:crypto/sha256.Sum256_1KB"].NsPerOp/1000),
			Status: status(m.NsPerOp < 5000)})
	}
	if c := r.Coldstart; c != nil {
		add(target{Target: "cold start within 10 ms of bare", Measured: fmt.Sprintf("%+.1f ms (medians of %d starts): init %+.1f ms, first handler %+.1f ms, of which a warm handler's %+.1f ms",
			c.DiffMs, c.Starts, c.InitDiffMs, c.FirstHandlerDiffMs, c.WarmHandlerDiffMs), Status: status(c.DiffMs <= 10)})
	}
	r.cpuTargets(add)
	r.capacityTargets(add)
	if rf, ok := r.Scenarios["c_race"].(*raceFigures); ok {
		add(target{Target: "c_race: 1 execution per key", Measured: fmt.Sprintf("max %d over %d trials", rf.MaxExecutions, rf.Trials),
			Status: status(rf.MaxExecutions == 1)})
	}
}

// output writes the JSON document (stdout and -json) and the Markdown
// table (stderr and -md).
func output(rep *report, f flags) error {
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	js = append(js, '\n')
	if _, err := os.Stdout.Write(js); err != nil {
		return err
	}
	if f.jsonPath != "" {
		if err := os.WriteFile(f.jsonPath, js, 0o644); err != nil {
			return err
		}
	}
	md := markdown(rep)
	fmt.Fprint(os.Stderr, "\n"+md)
	if f.mdPath != "" {
		if err := os.WriteFile(f.mdPath, []byte(md), 0o644); err != nil {
			return err
		}
	}
	if f.svgDir == "" {
		return nil
	}
	charts, err := chartsOf(js)
	if err != nil {
		return fmt.Errorf("charts: %w", err)
	}
	return writeCharts(f.svgDir, charts)
}

// fmtMs shows a latency with two decimals, or three below 0.1 ms.
func fmtMs(x float64) string {
	if x < 0.1 {
		return fmt.Sprintf("%.3f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

func markdown(r *report) string {
	var b strings.Builder
	m := r.Meta.Machine
	fmt.Fprintf(&b, "idem benchmark: N = %d per scenario and mode, medians of %d runs, %d CPUs (%s), %s, dynalite %s, node %s; %.0f s; load average %s at start, %s at end.\n\n",
		r.Meta.N, r.Meta.Runs, m.NumCPU, m.CPUModel, m.GoVersion, m.Dynalite, m.Node, r.Meta.DurationS, m.LoadAvgStart, m.LoadAvgEnd)
	if len(r.order) > 0 {
		b.WriteString("| scenario | mode | p50 ms | p99 ms | events/s | client CPU µs/event | dynalite CPU µs/event | DynamoDB calls/event | write units/event | read units/event | handler runs/event | check |\n")
		b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |\n")
	}
	for _, name := range r.order {
		for _, md := range modes {
			mf := r.figs[name].Modes[md.Name]
			if mf == nil {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %.0f | %.0f | %.0f | %s | %s | %s | %g | %s |\n", name, md.Name, fmtMs(mf.P50Ms), fmtMs(mf.P99Ms), mf.EventsPerS,
				mf.ClientCPUUsPerEvent, mf.DynaliteCPUUsPerEv, fmtCalls(mf.CallsPerEvent), fmtUnits(mf.Capacity.WritePerEvent),
				fmtUnits(mf.Capacity.ReadPerEvent), mf.ExecsPerEvent, mf.Check)
		}
	}
	if rf, ok := r.Scenarios["c_race"].(*raceFigures); ok {
		var outs []string
		for _, k := range slices.Sorted(maps.Keys(rf.Outcomes)) {
			outs = append(outs, fmt.Sprintf("%d %s", rf.Outcomes[k], k))
		}
		fmt.Fprintf(&b, "\n**c_race**: %d trials × %d concurrent calls with one key, handler sleeps %d ms: at most %d execution per key (%s); the calls got: %s; executing call %.1f ms, others %.1f ms (medians); %s DynamoDB calls per trial.\n",
			rf.Trials, rf.Callers, rf.HandlerSleepMs, rf.MaxExecutions, rf.Check, strings.Join(outs, ", "), rf.WinnerMedianMs, rf.OthersMedianMs, fmtCalls(rf.CallsPerTrial))
	}
	if s, ok := r.Scenarios["sqs_batch10"].(*sqsFigures); ok {
		fmt.Fprintf(&b, "\n**sqs_batch10**: batch of %d distinct messages, handler sleeps %d ms: %.1f ms against %.1f ms for one message, ratio %.2f (runs: %v); %s calls per message; dynalite CPU %.2f ms per message; %d batch item failures (%s).\n",
			s.BatchSize, s.HandlerSleepMs, s.BatchMedianMs, s.SingleMedianMs, s.Ratio, s.RatioPerRun, fmtCalls(s.CallsPerMsg), s.DynaliteMsPerMsg, s.Failures, s.Check)
	}
	if c := r.Coldstart; c != nil {
		b.WriteString("\n**coldstart** (aws-lambda-rie, one SQS message; medians of " + fmt.Sprint(c.Starts) + " starts):\n\n")
		b.WriteString("| function | binary MB | cold: start to first response, ms | of which init, ms | of which first handler, ms | warm invoke, ms | warm handler, ms | DynamoDB calls per invoke |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
		for _, name := range slices.Sorted(maps.Keys(c.Functions)) {
			fr := c.Functions[name]
			fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %s |\n", name, float64(fr.BinaryBytes)/1e6, fr.ColdMedianMs,
				fr.InitMedianMs, fr.FirstHandlerMedianMs, fr.WarmMedianMs, fr.WarmHandlerMedianMs, fmtCalls(fr.ColdCallsFirst))
		}
		fmt.Fprintf(&b, "\nDifference of the cold medians: %+.1f ms (init %+.1f ms, first handler %+.1f ms; a warm handler differs by %+.1f ms).\n",
			c.DiffMs, c.InitDiffMs, c.FirstHandlerDiffMs, c.WarmHandlerDiffMs)
	}
	if len(r.Micro) > 0 {
		b.WriteString("\n| microbenchmark (in-process, testing.Benchmark) | ns/op | thread CPU ns/op | allocs/op | B/op |\n| --- | ---: | ---: | ---: | ---: |\n")
		for _, k := range slices.Sorted(maps.Keys(r.Micro)) {
			mr := r.Micro[k]
			fmt.Fprintf(&b, "| %s | %.0f | %.0f | %d | %d |\n", k, mr.NsPerOp, mr.CPUNsPerOp, mr.AllocsPerOp, mr.BytesPerOp)
		}
	}
	if len(r.ItemSize) > 0 {
		b.WriteString("\n| result | content | compression | reserve item B | completed item B | result item B | WCU first execution (reserve + complete + result item) | WCU of a duplicate's failed put | RCU of a consistent get |\n| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, it := range r.ItemSize {
			fmt.Fprintf(&b, "| %d B | %s | %s | %d | %d | %d | %d + %d + %d | %d | %d |\n", it.ResultBytes, it.Content, it.Compression, it.ReserveBytes, it.CompleteBytes,
				it.ResultItemBytes, it.ReserveWCU, it.CompleteWCU, it.ResultItemWCU, it.DuplicateWCU, it.GetRCU)
		}
	}
	if a := r.AllOld; a != nil {
		fmt.Fprintf(&b, "\nOn %s (returns ALL_OLD), %d events: first execution %s, duplicate of completed %s, live in-progress %s, "+
			"retry of a retryable failure %s, takeover of an expired lease %s per event.\n",
			a.Server, a.Events, fmtCalls(a.FirstCalls), fmtCalls(a.DuplicateCalls), fmtCalls(a.LiveCalls),
			fmtCalls(a.RetryCalls), fmtCalls(a.TakeoverCalls))
		var units []string
		for _, k := range slices.Sorted(maps.Keys(a.Capacity)) {
			units = append(units, fmt.Sprintf("%s %s + %s", k, fmtUnits(a.Capacity[k].WritePerEvent), fmtUnits(a.Capacity[k].ReadPerEvent)))
		}
		fmt.Fprintf(&b, "Capacity units per event on %s (write + read, computed from the items sent): %s.\n", a.Server, strings.Join(units, ", "))
	}
	b.WriteString(capMarkdown(r.Capacity))
	b.WriteString(recordsMarkdown(r.Records))
	b.WriteString(r.Storm.markdown())
	if len(r.Stores) > 0 {
		b.WriteString("\n| store | scenario | p50 ms | p99 ms | store ops/event | server requests/event | executions/event | verdict |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
		for _, s := range r.Stores {
			fmt.Fprintf(&b, "| %s | %s | %.3f | %.3f | %.2f | %.2f | %.2f | %s |\n", s.Store, s.Scenario, s.P50Ms, s.P99Ms, s.StoreOps, s.Requests, s.Executions, s.Verdict)
		}
	}
	b.WriteString(r.cpuMarkdown())
	b.WriteString("\n| target | measured | status |\n| --- | --- | --- |\n")
	for _, t := range r.Targets {
		st := t.Status
		if t.Note != "" {
			st += " (" + t.Note + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", t.Target, t.Measured, st)
	}
	return b.String()
}
