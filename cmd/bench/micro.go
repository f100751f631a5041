package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/memstore"
)

// microResult is one in-process microbenchmark (testing.Benchmark), the
// median over runs.
type microResult struct {
	NsPerOp float64 `json:"ns_per_op"`
	// CPUNsPerOp is the thread's CPU time per op (getrusage RUSAGE_THREAD
	// over a locked OS thread): on a busy machine it leaves out the time
	// the thread waited for a CPU, which ns_per_op includes.
	CPUNsPerOp  float64 `json:"cpu_ns_per_op"`
	AllocsPerOp int64   `json:"allocs_per_op"`
	BytesPerOp  int64   `json:"bytes_per_op"`
	PayloadB    int     `json:"payload_bytes,omitempty"`
}

// benchPayload is core/bench_test.go's payload: a JSON order of at most
// size bytes with keys out of order.
func benchPayload(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"id": "bench-seq-1", "n": 1, "amount": 101, "currency": "EUR", "customer": {"name": "Ada Lovelace", "email": "ada@example.com", "country": "GB"}, "items": [`)
	for i := 0; ; i++ {
		item := fmt.Sprintf(`{"sku": "SKU-%06d", "qty": %d, "price": %d.%02d, "title": "item number %d <gift> & co", "tags": ["a", "b"], "gift": %v}`,
			i, i%5+1, 10+i%90, i%100, i, i%2 == 0)
		if i > 0 {
			item = ", " + item
		}
		if b.Len()+len(item)+2 > size {
			break
		}
		b.WriteString(item)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// The sinks receive the microbenchmarks' results, so that the compiler
// keeps the calls; they are never read.
var (
	sinkOK  bool
	sinkSum [32]byte
	sinkFP  string
	sinkDec core.Decision
)

// micro runs the core microbenchmarks runs times and keeps the medians.
func micro(runs int, benchtime time.Duration) map[string]microResult {
	p1 := benchPayload(1 << 10)
	p64 := benchPayload(64 << 10)
	// A hostile body: 1 MiB of '[', rejected where its nesting passes
	// core.MaxDepth.
	pDeep := []byte(strings.Repeat("[", 1<<20))
	fp1, _ := core.Fingerprint(p1)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	rec := &core.Record{Key: "bench-seq-1", Fingerprint: fp1, Status: core.StatusSucceeded, LeaseToken: "0123456789abcdef0123456789abcdef",
		ExpiresAt: now.Add(time.Hour), Attempts: 1, Result: []byte(`{"ok":true}`), UpdatedAt: now}
	pol := core.Policy{MaxAttempts: 5}
	ctx := context.Background()
	ev := makeEvent("a_unique", "seq", 0, 100)
	fn := func(context.Context) ([]byte, error) { return ev.result, nil }
	memRunner, err1 := idem.New(memstore.New(), runnerOptions()...)
	cacheRunner, err2 := idem.New(memstore.New(), runnerOptions(idem.WithCache(16))...)
	if err1 != nil || err2 != nil {
		panic(errors.Join(err1, err2))
	}
	for _, r := range []*idem.Runner{memRunner, cacheRunner} {
		if _, err := r.Do(ctx, ev.key, ev.payload, fn); err != nil {
			panic(err)
		}
	}
	keyN := 1
	benches := []struct {
		name    string
		payload int
		op      func()
	}{
		{"core.Decide", 0, func() { sinkDec = core.Decide("bench-seq-1", rec, fp1, now, pol) }},
		{"core.Fingerprint_1KB", len(p1), func() { sinkFP, _ = core.Fingerprint(p1) }},
		{"core.Fingerprint_64KB", len(p64), func() { sinkFP, _ = core.Fingerprint(p64) }},
		{"core.Fingerprint_adversarial_1MiB", len(pDeep), func() { sinkFP, _ = core.Fingerprint(pDeep) }},
		{"decide+fingerprint_1KB", len(p1), func() {
			fp, _ := core.Fingerprint(p1)
			sinkDec = core.Decide("bench-seq-1", rec, fp, now, pol)
		}},
		// The runner's own cost per call over the in-memory store: idem's
		// share of a call, without the SDK and the network. First
		// executions use new keys ("a_unique-seq-<i>"); their formatting is
		// included.
		{"idem.Do_first_memstore", len(ev.payload), func() {
			k := "a_unique-seq-" + strconv.Itoa(keyN)
			keyN++
			_, _ = memRunner.Do(ctx, k, ev.payload, fn)
		}},
		{"idem.Do_duplicate_memstore", len(ev.payload), func() { _, _ = memRunner.Do(ctx, ev.key, ev.payload, fn) }},
		{"idem.Do_duplicate_cache", len(ev.payload), func() { _, _ = cacheRunner.Do(ctx, ev.key, ev.payload, fn) }},
		// References for this machine's speed: the standard library's
		// validator alone, and the hash alone, on the same payload.
		{"ref:encoding/json.Valid_1KB", len(p1), func() { sinkOK = json.Valid(p1) }},
		{"ref:crypto/sha256.Sum256_1KB", len(p1), func() { sinkSum = sha256.Sum256(p1) }},
	}
	// testing.Benchmark reads -test.benchtime, which testing.Init registers.
	testing.Init()
	_ = flag.Set("test.benchtime", benchtime.String())
	out := map[string]microResult{}
	for _, bm := range benches {
		var ns, cpu []float64
		var last testing.BenchmarkResult
		for range runs {
			last = testing.Benchmark(func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					bm.op()
				}
			})
			ns = append(ns, float64(last.NsPerOp()))
			cpu = append(cpu, threadCPUPerOp(bm.op, max(1, last.N/2)))
		}
		out[bm.name] = microResult{NsPerOp: round(median(ns), 1), CPUNsPerOp: round(median(cpu), 1), AllocsPerOp: last.AllocsPerOp(),
			BytesPerOp: last.AllocedBytesPerOp(), PayloadB: bm.payload}
		logf("micro %-24s %10.0f ns/op %10.0f CPU ns/op %4d allocs/op %7d B/op", bm.name, median(ns), median(cpu), last.AllocsPerOp(), last.AllocedBytesPerOp())
	}
	return out
}

// threadCPUPerOp runs op n times on a locked OS thread and returns the
// thread's CPU time per op, in ns.
func threadCPUPerOp(op func(), n int) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var r0, r1 syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD
	if syscall.Getrusage(rusageThread, &r0) != nil {
		return 0
	}
	for range n {
		op()
	}
	if syscall.Getrusage(rusageThread, &r1) != nil {
		return 0
	}
	d := (r1.Utime.Nano() + r1.Stime.Nano()) - (r0.Utime.Nano() + r0.Stime.Nano())
	return float64(d) / float64(n)
}
