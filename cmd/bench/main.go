// Command bench runs idem's benchmark workload (the Performance section of the README)
// against a local dynalite that it starts itself, behind a counting proxy,
// and prints one JSON document (scenario → figures) on stdout and a
// Markdown table on stderr:
//
//	go run ./cmd/bench [-n 2000] [-runs 3] [-json out.json] [-md out.md]
//
// `go run ./cmd/bench peers` runs the same scenarios with idem and with Powertools for
// AWS Lambda (TypeScript) idempotency side by side (peers.go).
//
// Every server it starts (dynalite, the proxy, moto, the Lambda runtime
// interface emulator) listens on 127.0.0.1 only and is stopped by its PID
// on exit, on error and on SIGINT/SIGTERM. Progress goes to stderr.
//
// Each figure is measured -runs times (a fresh table per run) and the median
// is reported. Performance targets are checked and reported, never enforced;
// the exit status is 1 only when a correctness check fails (a call got an
// unexpected outcome, a handler ran an unexpected number of times, a race
// executed a key twice) or the bench itself failed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem/internal/devserver"
)

type flags struct {
	n          int
	runs       int
	warmup     int
	jsonPath   string
	mdPath     string
	svgDir     string
	only       *regexp.Regexp
	coldstarts int
	allOld     string
	sqsReps    int
	raceTrials int
	verbose    bool
	microtime  time.Duration
	capEvents  int
	storm      int
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == "-proxy-child" {
		os.Exit(runProxyChild(os.Args[2], os.Args[3] == "reported"))
	}
	if len(os.Args) >= 2 && os.Args[1] == "peers" {
		os.Exit(runPeers(os.Args[2:]))
	}
	if len(os.Args) >= 2 && os.Args[1] == "charts" {
		os.Exit(runCharts(os.Args[2:]))
	}
	os.Exit(run())
}

func defaultN() int {
	if v, err := strconv.Atoi(os.Getenv("BENCH_N")); err == nil && v > 0 {
		return v
	}
	return 2000
}

func run() int {
	var f flags
	var only string
	flag.IntVar(&f.n, "n", defaultN(), "events per scenario and mode (default: $BENCH_N, else 2000)")
	flag.IntVar(&f.runs, "runs", 3, "measurements of every figure; the median is reported")
	flag.IntVar(&f.warmup, "warmup", 200, "unmeasured warm-up: this many unique events, then the same again as duplicates, per run and mode")
	flag.StringVar(&f.jsonPath, "json", "", "also write the JSON document to this file")
	flag.StringVar(&f.mdPath, "md", "", "also write the Markdown table to this file")
	flag.StringVar(&f.svgDir, "svg", "", "also write the SVG charts (docs/benchmarks.md) into this directory")
	flag.StringVar(&only, "only", "", "run only the scenarios whose name matches this regular expression")
	flag.IntVar(&f.coldstarts, "coldstarts", 7, "cold starts of each function for coldstart")
	flag.StringVar(&f.allOld, "allold", "auto", "count the calls of a duplicate, a retry and a takeover on moto, which returns ALL_OLD: on, off, or auto (when moto is installed)")
	flag.IntVar(&f.sqsReps, "sqs-reps", 15, "batches of 10 and of 1 per run for sqs_batch10")
	flag.IntVar(&f.raceTrials, "race-trials", 10, "trials per run for c_race")
	flag.IntVar(&f.capEvents, "cap-events", 10, "events (executions, waiters' keys, wrapper requests) per capability in the capacity section")
	flag.IntVar(&f.storm, "storm", 10000, "deliveries of one key in progress for the storm (on dynalite and in the simulation)")
	flag.BoolVar(&f.verbose, "v", false, "log more progress")
	flag.DurationVar(&f.microtime, "microtime", 0, "run time of each in-process microbenchmark, per run (default 300ms, or 100ms when -n < 500)")
	flag.Parse()
	verbose = f.verbose
	if f.microtime <= 0 {
		f.microtime = 300 * time.Millisecond
		if f.n < 500 {
			f.microtime = 100 * time.Millisecond
		}
	}
	if f.n < 1 || f.runs < 1 || f.warmup < 0 || f.coldstarts < 1 || f.sqsReps < 1 || f.raceTrials < 1 || f.capEvents < 1 || f.storm < 1 {
		fmt.Fprintln(os.Stderr, "bench: -n, -runs, -coldstarts, -sqs-reps, -race-trials, -cap-events and -storm must be positive, -warmup not negative")
		return 2
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: -only: %v\n", err)
			return 2
		}
		f.only = re
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := benchmark(ctx, f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	if err := output(rep, f); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	if len(rep.Failures) > 0 {
		fmt.Fprintf(os.Stderr, "bench: %d correctness check(s) failed:\n  %s\n", len(rep.Failures), strings.Join(rep.Failures, "\n  "))
		return 1
	}
	return 0
}

// verbose is -v.
var verbose bool

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (f flags) selected(name string) bool { return f.only == nil || f.only.MatchString(name) }

// newClient returns one DynamoDB client on endpoint, with static test
// credentials and an HTTP pool large enough for 32 calls in flight, and
// extra options applied after those.
func newClient(ctx context.Context, endpoint string, extra ...func(*dynamodb.Options)) (*dynamodb.Client, error) {
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.Proxy = nil
		t.MaxIdleConns = 256
		t.MaxIdleConnsPerHost = 64
	})
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		config.WithHTTPClient(hc),
	)
	if err != nil {
		return nil, err
	}
	opts := append([]func(*dynamodb.Options){func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) }}, extra...)
	return dynamodb.NewFromConfig(cfg, opts...), nil
}

// benchmark starts the servers, runs everything and returns the report.
func benchmark(ctx context.Context, f flags) (*report, error) {
	start := time.Now()
	root, err := devserver.RepoRoot()
	if err != nil {
		return nil, err
	}
	rep := newReport(f)
	rep.Meta.Machine = machine(root)

	dyn, err := devserver.StartDynalite(ctx, root)
	if err != nil {
		return nil, err
	}
	defer stopServer("dynalite", dyn.PID, dyn.Stop)
	logf("dynalite pid %d at %s", dyn.PID, dyn.Endpoint)
	prx, err := startProxy(ctx, dyn.Endpoint, true)
	if err != nil {
		return nil, err
	}
	defer stopServer("proxy", prx.PID, func() error { prx.Stop(); return nil })
	logf("counting proxy pid %d at %s", prx.PID, prx.Endpoint)
	client, err := newClient(ctx, prx.Endpoint)
	if err != nil {
		return nil, err
	}
	b := &bench{ctx: ctx, client: client, proxy: prx, dynaPID: dyn.PID, n: f.n, warmup: f.warmup}

	for r := 1; r <= f.runs; r++ {
		if err := b.oneRun(rep, client, f, r); err != nil {
			return nil, fmt.Errorf("run %d: %w", r, err)
		}
	}
	if f.selected("stores") {
		rows, err := storeComparison(ctx, b, root, f.n)
		if err != nil {
			return nil, fmt.Errorf("store comparison: %w", err)
		}
		rep.Stores = rows
	}
	if f.selected("coldstart") {
		cs, err := coldstart(ctx, root, prx, f)
		if err != nil {
			return nil, fmt.Errorf("coldstart: %w", err)
		}
		rep.Coldstart = cs
	}
	if f.selected("item_size") {
		is, err := itemSizes(ctx, client)
		if err != nil {
			return nil, fmt.Errorf("item size: %w", err)
		}
		rep.ItemSize = is
	}
	moto, stopMoto, err := maybeMoto(ctx, root, f)
	if err != nil {
		return nil, err
	}
	defer stopMoto()
	if moto != nil && f.selected("allold") {
		if rep.AllOld, err = allOldCheck(ctx, rep, moto, f); err != nil {
			return nil, fmt.Errorf("ALL_OLD check on moto: %w", err)
		}
	}
	if err := capacitySection(ctx, rep, b, moto, f); err != nil {
		return nil, err
	}
	if err := clientCPU(ctx, b, rep, f); err != nil {
		return nil, err
	}
	if f.selected("micro") {
		rep.Micro = micro(f.runs, f.microtime)
	}
	rep.finish()
	rep.Meta.DurationS = round(time.Since(start).Seconds(), 1)
	rep.Meta.Machine.LoadAvgEnd = loadAvg()
	return rep, nil
}

// maybeMoto starts moto behind its own proxy when a section that uses it is
// selected and -allold allows (auto: when moto is installed); nil when not.
func maybeMoto(ctx context.Context, root string, f flags) (*motoEnv, func(), error) {
	none := func() {}
	if f.allOld == "off" || !f.selected("allold") && !f.selected("capacity") {
		return nil, none, nil
	}
	env, stop, err := startMoto(ctx, root)
	switch {
	case errors.Is(err, devserver.ErrNotInstalled) && f.allOld == "auto":
		logf("moto not installed: the ALL_OLD check, staged completion and large results skipped (%v)", err)
		return nil, none, nil
	case err != nil:
		return nil, none, fmt.Errorf("moto: %w", err)
	}
	return env, stop, nil
}

// capacitySection measures every capability's capacity units, on dynalite
// and on moto, and the storm.
func capacitySection(ctx context.Context, rep *report, b *bench, moto *motoEnv, f flags) error {
	if f.selected("capacity") {
		dyn, done, err := newCapEnv(ctx, rep, "dynalite "+rep.Meta.Machine.Dynalite, b.proxy, b.client, "idem_bench_capacity", f.capEvents)
		if err != nil {
			return err
		}
		defer done()
		var me *capEnv
		if moto != nil {
			var mdone func()
			if me, mdone, err = newCapEnv(ctx, rep, moto.version, moto.proxy, moto.client, "idem_bench_capacity", f.capEvents); err != nil {
				return err
			}
			defer mdone()
			if me.s3, err = newS3Env(ctx, moto.server.Endpoint); err != nil {
				return fmt.Errorf("capacity: S3 on moto: %w", err)
			}
		}
		if rep.Capacity, err = capabilities(dyn, me); err != nil {
			return fmt.Errorf("capacity: %w", err)
		}
		if rep.Records, err = recordRows(dyn); err != nil {
			return fmt.Errorf("capacity: records: %w", err)
		}
	}
	if f.selected("storm") {
		st, err := storm(ctx, rep, b, f.storm)
		if err != nil {
			return fmt.Errorf("storm: %w", err)
		}
		rep.Storm = st
	}
	return nil
}

func stopServer(name string, pid int, stop func() error) {
	if err := stop(); err != nil {
		logf("stopping %s (pid %d): %v", name, pid, err)
	}
}

// machine describes where the bench runs.
func machine(root string) machineInfo {
	m := machineInfo{NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "node_modules", "dynalite", "package.json")); err == nil {
		var p struct{ Version string }
		if json.Unmarshal(b, &p) == nil {
			m.Dynalite = p.Version
		}
	}
	if out, err := runOutput("node", "--version"); err == nil {
		m.Node = strings.TrimSpace(out)
	}
	m.LoadAvgStart = loadAvg()
	return m
}

// loadAvg returns the 1, 5 and 15 minute load averages: how busy the
// machine was while the bench ran.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
