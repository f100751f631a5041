package main

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/memstore"
)

// soakRetention is the soak runner's retention. The soak's runner reads a
// fake clock that moves on by soakStep after every batch of n/10 events, so a
// record has expired when its key comes back (one batch later) whatever the
// machine's speed: every event is a first execution and the store holds at
// most n/10 records.
const (
	soakRetention = time.Minute
	soakStep      = 2 * soakRetention
)

// soakSample is the heap after a forced GC at one point of the soak.
type soakSample struct {
	Events     int    `json:"events"`
	HeapAlloc  uint64 `json:"heap_alloc_bytes"`
	HeapObj    uint64 `json:"heap_objects"`
	Goroutines int    `json:"goroutines"`
}

// soakResult is the soak section of the report.
type soakResult struct {
	Events     int          `json:"events"`
	Store      string       `json:"store"`
	Concurrent int          `json:"in_flight"`
	Keys       int          `json:"distinct_keys"`
	RefEvents  int          `json:"reference_event"`
	HeapRef    uint64       `json:"heap_at_reference_bytes"`
	HeapEnd    uint64       `json:"heap_at_end_bytes"`
	Ratio      float64      `json:"heap_end_to_reference_ratio"`
	Samples    []soakSample `json:"samples"`
	WallS      float64      `json:"wall_s"`
	Note       string       `json:"note"`
}

// soak sends n first executions, 16 in flight, through a runner over
// memstore, and reads the heap after a forced GC every n/10 events: the
// heap at the 10th of the way (the 10,000th event of 100,000) against the
// heap at the end. Event i has key i mod n/10, and the runner's clock moves
// on by twice the retention after each batch of n/10 events, so the key's
// earlier record has expired when it comes back: every event
// executes (reserving over the expired record) and memstore holds at most
// n/10 records, all there by the reference point. What grows after it is
// the runner's.
func soak(ctx context.Context, n int) (*soakResult, error) {
	var clock atomic.Int64 // the runner's time, in nanoseconds since the Unix epoch
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	r, err := idem.New(memstore.New(), idem.WithRetention(soakRetention), idem.WithRetry(1, idem.DefaultBackoffBase, idem.DefaultBackoffMax),
		idem.WithClock(func() time.Time { return time.Unix(0, clock.Load()) }))
	if err != nil {
		return nil, err
	}
	keys := max(1, n/10)
	res := &soakResult{Events: n, Store: "memstore", Concurrent: 16, Keys: keys, RefEvents: keys,
		Note: "first executions, 16 in flight; key of event i: i mod events/10, retention 1 min on a fake clock that moves 2 min after each batch of events/10 (the key's earlier record has expired when it comes back); " +
			"heap: runtime.MemStats.HeapAlloc after runtime.GC, every tenth of the events"}
	t0 := time.Now()
	var execs atomic.Int64
	b := &bench{ctx: ctx}
	for done := 0; done < n; {
		size := min(keys, n-done)
		evs := make([]event, size)
		for i := range evs {
			evs[i] = soakEvent(done+i, keys)
		}
		if err := b.run(evs, 16, func(ctx context.Context, ev event) error {
			out, err := r.Do(ctx, ev.key, ev.payload, handler(ev, false, &execs, 0))
			if err == nil && out.Verdict != idem.Executed {
				err = fmt.Errorf("soak %s: got %s, want executed", ev.key, out.Verdict)
			}
			return err
		}); err != nil {
			return nil, err
		}
		done += size
		clock.Add(int64(soakStep))
		res.Samples = append(res.Samples, heapSample(done))
	}
	res.WallS = round(time.Since(t0).Seconds(), 1)
	res.HeapRef, res.HeapEnd = res.Samples[0].HeapAlloc, res.Samples[len(res.Samples)-1].HeapAlloc
	res.Ratio = round(float64(res.HeapEnd)/float64(res.HeapRef), 3)
	if got := execs.Load(); got != int64(n) {
		return nil, fmt.Errorf("soak: %d executions for %d events", got, n)
	}
	logf("soak: %d events over memstore in %.1f s, heap after GC %.2f MB at event %d, %.2f MB at the end: ratio %.3f",
		n, res.WallS, float64(res.HeapRef)/1e6, res.RefEvents, float64(res.HeapEnd)/1e6, res.Ratio)
	return res, nil
}

// soakEvent is event i of the soak: the workload's event shape, with key
// i mod keys.
func soakEvent(i, keys int) event {
	id := fmt.Sprintf("soak-c16-%d", i%keys)
	return event{
		key:     id,
		payload: fmt.Appendf(nil, `{"id": %q, "n": %d, "amount": %d, "currency": "EUR"}`, id, i, 100+i),
		result:  fmt.Appendf(nil, `{"ok": true, "id": %q, "n": %d}`, id, i),
	}
}

func heapSample(events int) soakSample {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return soakSample{Events: events, HeapAlloc: m.HeapAlloc, HeapObj: m.HeapObjects, Goroutines: runtime.NumGoroutine()}
}
