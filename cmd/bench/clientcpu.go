package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
)

// Flags of the client CPU sections (cpu_floor, soak).
var (
	floorBlocks = flag.Int("floor-blocks", 4, "cpu_floor: measured blocks per path and run (events per block: N/10, from 10 to 200)")
	soakEvents  = flag.Int("soak", -1, "soak: events (default 50×N: 100,000 at the default N; 0 skips the soak)")
	floorProf   = flag.String("floor-profile", "", "cpu_floor: write a CPU profile of its measured blocks (all paths) to this file")
)

// Targets of the client CPU sections.
const (
	targetCPURatio   = 1.15 // idem's client CPU per first execution / its calls as raw signed HTTP
	targetSDKRatio   = 1.05 // idem's client CPU per first execution / its calls through the SDK
	targetP50Ratio   = 1.10 // idem's seq p50 / the p50 of its raw calls
	targetInitDiffMs = 1.0  // cold-start init phase, idem minus bare
	targetSoakRatio  = 1.10 // heap after GC at the end / at the 10th of the soak
)

// clientCPU runs the CPU floor and the soak (when selected) and puts them
// in the report.
func clientCPU(ctx context.Context, b *bench, rep *report, f flags) error {
	if f.selected("cpu_floor") {
		blockN := min(200, max(10, f.n/10))
		fl, err := cpuFloor(ctx, b, blockN, f.runs*max(1, *floorBlocks))
		if err != nil {
			return fmt.Errorf("cpu floor: %w", err)
		}
		rep.Floor = fl
	}
	n := *soakEvents
	if n < 0 {
		n = 50 * f.n
	}
	if f.selected("soak") && n > 0 {
		s, err := soak(ctx, n)
		if err != nil {
			return fmt.Errorf("soak: %w", err)
		}
		rep.Soak = s
		if s.Ratio > targetSoakRatio {
			logf("soak: the heap grew by more than %.0f %%", (targetSoakRatio-1)*100)
		}
	}
	return nil
}

// cpuTargets adds the client CPU targets.
func (r *report) cpuTargets(add func(target)) {
	if fl := r.Floor; fl != nil {
		raw := fl.Paths[pathRaw]
		for _, p := range []string{pathIdem, pathIdemFast} {
			f := fl.Paths[p]
			add(target{Target: fmt.Sprintf("client CPU per first execution ≤ %.2f× its calls as raw signed HTTP (%s)", targetCPURatio, p),
				Measured: fmt.Sprintf("%.2f× (%.0f µs vs %.0f µs; median of per-block ratios %.2f×; the same calls through the SDK: %.2f×)",
					fl.CPURatio[p], f.CPUUsPerEvent, raw.CPUUsPerEvent, fl.CPURatioRuns[p], fl.CPURatio[sdkOf(p)]),
				Status: status(fl.CPURatio[p] <= targetCPURatio)})
		}
		f := fl.Paths[pathIdem]
		sdk := fl.Paths[pathSDK]
		add(target{Target: fmt.Sprintf("client CPU per first execution ≤ %.2f× its calls through the SDK", targetSDKRatio),
			Measured: fmt.Sprintf("%.2f× (%.0f µs vs %.0f µs, the inputs prebuilt); %.2f× the same calls with their inputs built per call (%s)",
				ratioOf(f.CPUUsPerEvent, sdk.CPUUsPerEvent), f.CPUUsPerEvent, sdk.CPUUsPerEvent,
				ratioOf(f.CPUUsPerEvent, fl.Paths[pathSDKBuilt].CPUUsPerEvent), pathSDKBuilt),
			Status: status(ratioOf(f.CPUUsPerEvent, sdk.CPUUsPerEvent) <= targetSDKRatio)})
		add(target{Target: fmt.Sprintf("seq p50 of a first execution ≤ %.2f× the p50 of its raw calls", targetP50Ratio),
			Measured: fmt.Sprintf("%.2f× (%.2f ms vs %.2f ms); fast client %.2f×", fl.P50Ratio[pathIdem], f.P50Ms, raw.P50Ms, fl.P50Ratio[pathIdemFast]),
			Status:   status(fl.P50Ratio[pathIdem] <= targetP50Ratio)})
	}
	if c := r.Coldstart; c != nil {
		add(target{Target: fmt.Sprintf("cold-start init within %.0f ms of a bare aws-lambda-go function", targetInitDiffMs),
			Measured: fmt.Sprintf("%+.2f ms (init medians of %d starts)", c.InitDiffMs, c.Starts), Status: status(c.InitDiffMs <= targetInitDiffMs)})
	}
	if s := r.Soak; s != nil {
		add(target{Target: fmt.Sprintf("soak of %d events: heap after GC within %.0f %% from event %d to the last", s.Events, (targetSoakRatio-1)*100, s.RefEvents),
			Measured: fmt.Sprintf("%.3f× (%.2f MB → %.2f MB; %s)", s.Ratio, float64(s.HeapRef)/1e6, float64(s.HeapEnd)/1e6, s.Store),
			Status:   status(s.Ratio <= targetSoakRatio)})
	}
}

// ratioOf is a/b, or 0 when b is 0.
func ratioOf(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func sdkOf(p string) string {
	if p == pathIdemFast {
		return pathSDKFast
	}
	return pathSDK
}

// cpuMarkdown renders the client CPU sections.
func (r *report) cpuMarkdown() string {
	var b strings.Builder
	if fl := r.Floor; fl != nil {
		fmt.Fprintf(&b, "\n**cpu_floor** (seq; %d blocks of %d first executions per path, interleaved; medians of blocks):\n\n", fl.Blocks, fl.BlockEvents)
		b.WriteString("| path | client CPU µs/event | × raw | p50 ms | × raw | p99 ms | DynamoDB calls/event |\n| --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
		for _, p := range floorPaths {
			f := fl.Paths[p]
			cr, pr := "1.00", "1.00"
			if p != pathRaw {
				cr, pr = fmt.Sprintf("%.2f", fl.CPURatio[p]), fmt.Sprintf("%.2f", fl.P50Ratio[p])
			}
			fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s | %s | %s |\n", p, f.CPUUsPerEvent, cr, fmtMs(f.P50Ms), pr, fmtMs(f.P99Ms), fmtCalls(f.CallsPerEvent))
		}
	}
	if s := r.Soak; s != nil {
		fmt.Fprintf(&b, "\n**soak**: %d first executions, %d in flight, %s, in %.0f s: heap after GC %.2f MB at event %d, %.2f MB at the end (%.3f×); goroutines %d → %d.\n",
			s.Events, s.Concurrent, s.Store, s.WallS, float64(s.HeapRef)/1e6, s.RefEvents, float64(s.HeapEnd)/1e6, s.Ratio,
			s.Samples[0].Goroutines, s.Samples[len(s.Samples)-1].Goroutines)
	}
	return b.String()
}
