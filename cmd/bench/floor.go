package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/ddbinput"
)

// The CPU floor: idem's first executions against the very DynamoDB calls
// they make, sent through the SDK and as raw signed HTTP, measured side by
// side in one run.

// Paths of the CPU floor, in the order of the report.
const (
	pathIdem     = "idem"
	pathIdemFast = "idem_fast_client"
	pathSDK      = "sdk"
	pathSDKFast  = "sdk_fast_client"
	pathSDKBuilt = "sdk_built_per_call"
	pathRaw      = "raw_signed_http"
)

var floorPaths = []string{pathIdem, pathIdemFast, pathSDK, pathSDKFast, pathSDKBuilt, pathRaw}

// floorNotes say what each path sends, for the JSON output.
var floorNotes = map[string]string{
	pathIdem:     "runner.Do, first execution of a new key, one call in flight, SDK client as the workload's (newClient)",
	pathIdemFast: "the same with the client built with ddbstore.FastClientOptions()",
	pathSDK:      "the requests idem makes for a first execution (captured), sent with the workload's SDK client",
	pathSDKFast:  "the same requests through a client built with ddbstore.FastClientOptions()",
	pathSDKBuilt: "the same requests on the workload's SDK client, each input (item, names, values) built anew per call, as a caller writing the calls by hand does",
	pathRaw:      "the same requests as raw signed HTTP: JSON built by hand, aws/signer/v4, net/http",
}

// capturer is a ddbstore.API that answers every write at once and keeps
// the requests: a store over it makes the requests of a first execution
// without sending them. Methods the store may call that are not overridden
// here panic on the nil embedded API.
type capturer struct {
	ddbstore.API
	mu   sync.Mutex
	reqs []any // guarded by mu
}

func (c *capturer) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.add(in)
	return &dynamodb.PutItemOutput{}, nil
}

func (c *capturer) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.add(in)
	return &dynamodb.UpdateItemOutput{}, nil
}

func (c *capturer) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return nil, errors.New("bench: a first execution does not read")
}

func (c *capturer) add(in any) {
	c.mu.Lock()
	c.reqs = append(c.reqs, in)
	c.mu.Unlock()
}

// captureFirst returns, for each event, the requests a first execution of
// it makes through a store on table.
func captureFirst(ctx context.Context, table string, evs []event) ([][]any, error) {
	c := &capturer{}
	st, err := ddbstore.New(c, table)
	if err != nil {
		return nil, err
	}
	r, err := idem.New(st, runnerOptions()...)
	if err != nil {
		return nil, err
	}
	out := make([][]any, len(evs))
	for i, ev := range evs {
		c.reqs = nil
		o, err := r.Do(ctx, ev.key, ev.payload, func(context.Context) ([]byte, error) { return ev.result, nil })
		if err != nil || o.Verdict != idem.Executed {
			return nil, fmt.Errorf("bench: capture of %s: %v %v", ev.key, o.Verdict, err)
		}
		out[i] = c.reqs
	}
	return out, nil
}

// sendRaw sends captured requests as raw signed HTTP, in order, building
// each body as it goes.
func sendRaw(ctx context.Context, s *rawSender, reqs []any) error {
	for _, in := range reqs {
		op, body, err := rawBody(in)
		if err != nil {
			return err
		}
		if err := s.send(ctx, op, body); err != nil {
			return err
		}
	}
	return nil
}

// floorPathFigures are one path's figures: medians over blocks.
type floorPathFigures struct {
	Note          string             `json:"note"`
	CPUUsPerEvent float64            `json:"client_cpu_us_per_event"`
	CPUPerBlock   []float64          `json:"client_cpu_us_per_event_per_block"`
	P50Ms         float64            `json:"p50_ms"`
	P99Ms         float64            `json:"p99_ms"`
	CallsPerEvent map[string]float64 `json:"calls_per_event"`
	lat           []time.Duration
	calls         map[string]int64
	events        int
}

// floorResult is the CPU floor section of the report.
type floorResult struct {
	BlockEvents int                          `json:"events_per_block"`
	Blocks      int                          `json:"blocks_per_path"`
	Paths       map[string]*floorPathFigures `json:"paths"`
	// Ratios of medians: client CPU per event and p50 latency, against
	// the raw path.
	CPURatio     map[string]float64 `json:"cpu_ratio_to_raw"`
	P50Ratio     map[string]float64 `json:"p50_ratio_to_raw"`
	CPURatioRuns map[string]float64 `json:"cpu_ratio_to_raw_median_of_blocks"`
	Note         string             `json:"note"`
}

// floorSetup is what the paths of the CPU floor use.
type floorSetup struct {
	b              *bench
	client, fast   *dynamodb.Client
	idem, idemFast *idem.Runner
	raw            *rawSender
	table          string
	blockN         int
}

// cpuFloor measures the CPU floor: blocks of blockN events per path,
// blocks rounds, the paths' order rotating each round; runtime.GC before
// every block, outside the measurement.
func cpuFloor(ctx context.Context, b *bench, blockN, blocks int) (*floorResult, error) {
	fs, cleanup, err := newFloorSetup(ctx, b, blockN)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	res := &floorResult{BlockEvents: blockN, Blocks: blocks, Paths: map[string]*floorPathFigures{},
		CPURatio: map[string]float64{}, P50Ratio: map[string]float64{}, CPURatioRuns: map[string]float64{},
		Note: "client CPU: this process's getrusage user+system time over a block / events of the block (GC included); " +
			"latency: one event (idem: one runner.Do; sdk and raw: the event's requests in sequence); seq; blocks interleaved"}
	for _, p := range floorPaths {
		res.Paths[p] = &floorPathFigures{Note: floorNotes[p], calls: map[string]int64{}}
	}
	// One unmeasured block per path warms connections and caches.
	for _, p := range floorPaths {
		if _, err := fs.block(p, "warm", blockN, nil); err != nil {
			return nil, err
		}
	}
	stop, err := startProfile(*floorProf)
	if err != nil {
		return nil, err
	}
	defer stop()
	for k := range blocks {
		for j := range floorPaths {
			p := floorPaths[(j+k)%len(floorPaths)]
			if _, err := fs.block(p, fmt.Sprintf("b%d", k), blockN, res.Paths[p]); err != nil {
				return nil, err
			}
		}
	}
	res.finish()
	logf("cpu floor: client CPU µs/event %s; p50 ms %s", res.summary(func(f *floorPathFigures) float64 { return f.CPUUsPerEvent }),
		res.summary(func(f *floorPathFigures) float64 { return f.P50Ms }))
	return res, nil
}

func newFloorSetup(ctx context.Context, b *bench, blockN int) (*floorSetup, func(), error) {
	fast, err := newClient(ctx, b.proxy.Endpoint, ddbstore.FastClientOptions())
	if err != nil {
		return nil, nil, err
	}
	table := "idem_bench_floor"
	if _, err := ddbstore.CreateTable(ctx, b.client, table); err != nil {
		return nil, nil, err
	}
	cleanup := func() { deleteTable(ctx, b.client, table) }
	fs := &floorSetup{b: b, client: b.client, fast: fast, raw: newRawSender(b.proxy.Endpoint), table: table, blockN: blockN}
	for _, pair := range []struct {
		r      **idem.Runner
		client *dynamodb.Client
	}{{&fs.idem, b.client}, {&fs.idemFast, fast}} {
		st, err := ddbstore.New(pair.client, table)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		if *pair.r, err = idem.New(st, runnerOptions()...); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	return fs, cleanup, nil
}

// block runs one block of path p and adds its figures to into (nil: not
// measured).
func (fs *floorSetup) block(p, tag string, n int, into *floorPathFigures) (float64, error) {
	evs := makeEvents("floor_"+p, tag, n, 0)
	send, err := fs.sender(p, evs)
	if err != nil {
		return 0, err
	}
	ctx := fs.b.ctx
	c0, err := fs.b.proxy.Counts(ctx)
	if err != nil {
		return 0, err
	}
	lat := make([]time.Duration, n)
	runtime.GC()
	cpu0 := processCPU()
	for i := range evs {
		cctx, cancel := context.WithTimeout(ctx, invocationTime)
		t0 := time.Now()
		err := send(cctx, i)
		lat[i] = time.Since(t0)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("cpu floor %s %s: %w", p, evs[i].key, err)
		}
	}
	cpu := us(processCPU()-cpu0) / float64(n)
	c1, err := fs.b.proxy.Counts(ctx)
	if err != nil {
		return 0, err
	}
	if into != nil {
		into.CPUPerBlock = append(into.CPUPerBlock, round(cpu, 1))
		into.lat = append(into.lat, lat...)
		for op, v := range diffCounts(c0, c1) {
			into.calls[op] += v
		}
		into.events += n
	}
	return cpu, ctx.Err()
}

// sender returns the function that sends event i of evs on path p.
// Requests for the sdk and raw paths are captured before the block.
func (fs *floorSetup) sender(p string, evs []event) (func(context.Context, int) error, error) {
	switch p {
	case pathIdem, pathIdemFast:
		r := fs.idem
		if p == pathIdemFast {
			r = fs.idemFast
		}
		return func(ctx context.Context, i int) error {
			ev := evs[i]
			out, err := r.Do(ctx, ev.key, ev.payload, func(context.Context) ([]byte, error) { return ev.result, nil })
			if err == nil && out.Verdict != idem.Executed {
				err = fmt.Errorf("got %s, want executed", out.Verdict)
			}
			return err
		}, nil
	}
	reqs, err := captureFirst(fs.b.ctx, fs.table, evs)
	if err != nil {
		return nil, err
	}
	switch p {
	case pathSDK:
		return func(ctx context.Context, i int) error { return ddbinput.Send(ctx, fs.client, reqs[i], false) }, nil
	case pathSDKFast:
		return func(ctx context.Context, i int) error { return ddbinput.Send(ctx, fs.fast, reqs[i], false) }, nil
	case pathSDKBuilt:
		return func(ctx context.Context, i int) error { return ddbinput.Send(ctx, fs.client, reqs[i], true) }, nil
	case pathRaw:
		return func(ctx context.Context, i int) error { return sendRaw(ctx, fs.raw, reqs[i]) }, nil
	}
	return nil, fmt.Errorf("bench: unknown cpu floor path %q", p)
}

func (r *floorResult) finish() {
	for _, f := range r.Paths {
		slices.Sort(f.lat)
		f.CPUUsPerEvent = round(median(f.CPUPerBlock), 1)
		f.P50Ms = round(ms(percentile(f.lat, 0.5)), 3)
		f.P99Ms = round(ms(percentile(f.lat, 0.99)), 3)
		f.CallsPerEvent = perEvent(f.calls, max(1, f.events))
	}
	raw := r.Paths[pathRaw]
	for _, p := range floorPaths {
		if p == pathRaw || raw.CPUUsPerEvent == 0 || raw.P50Ms == 0 {
			continue
		}
		f := r.Paths[p]
		r.CPURatio[p] = round(f.CPUUsPerEvent/raw.CPUUsPerEvent, 3)
		r.P50Ratio[p] = round(f.P50Ms/raw.P50Ms, 3)
		// The median of the per-block ratios: each block's neighbour in
		// time is the raw block of the same round.
		var xs []float64
		for k := range min(len(f.CPUPerBlock), len(raw.CPUPerBlock)) {
			if raw.CPUPerBlock[k] > 0 {
				xs = append(xs, f.CPUPerBlock[k]/raw.CPUPerBlock[k])
			}
		}
		r.CPURatioRuns[p] = round(median(xs), 3)
	}
}

func (r *floorResult) summary(v func(*floorPathFigures) float64) string {
	s := ""
	for _, p := range floorPaths {
		s += fmt.Sprintf(" %s %.1f", p, v(r.Paths[p]))
	}
	return s
}

// startProfile starts a CPU profile into path (nothing when path is empty)
// and returns the function that stops it.
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			logf("cpu profile: %v", err)
		}
	}, nil
}
