package main

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/devserver"
	"github.com/idemgo/idem/memstore"
	"github.com/idemgo/idem/redisstore"
)

// storeRow is one scenario over one store, in seq mode: latency, and the
// store operations (Reserve, Complete, Get) and server requests per event.
type storeRow struct {
	Store      string  `json:"store"`
	Scenario   string  `json:"scenario"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	StoreOps   float64 `json:"store_ops_per_event"`
	Requests   float64 `json:"server_requests_per_event"`
	Executions float64 `json:"executions_per_event"`
	Verdict    string  `json:"verdict"`
}

// countingStore counts the store operations the runner makes.
type countingStore struct {
	idem.Store
	ops atomic.Int64
}

func (s *countingStore) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	s.ops.Add(1)
	return s.Store.Reserve(ctx, rec, prev, now)
}

func (s *countingStore) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	s.ops.Add(1)
	return s.Store.Complete(ctx, rec)
}

// countingAcquirer is a countingStore over an idem.Acquirer, which it
// stays: the runner reserves through it in one write, as through the store.
type countingAcquirer struct{ *countingStore }

func (s countingAcquirer) Acquire(ctx context.Context, rec core.Record, now time.Time, p core.Policy) (core.Record, *core.Record, error) {
	s.ops.Add(1)
	return s.Store.(idem.Acquirer).Acquire(ctx, rec, now, p)
}

// redisCounter counts the commands sent to Redis.
type redisCounter struct{ n atomic.Int64 }

func (c *redisCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *redisCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *redisCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// storeUnderTest is a store and a count of the requests it sends its server.
type storeUnderTest struct {
	name     string
	store    idem.Store
	requests func() int64
}

// storeComparison runs the core scenarios over memstore, ddbstore (on
// dynalite, behind the counting proxy) and redisstore (on a Redis it starts),
// side by side in one run.
func storeComparison(ctx context.Context, b *bench, root string, n int) ([]storeRow, error) {
	table := "idem_bench_stores"
	if _, err := ddbstore.CreateTable(ctx, b.client, table); err != nil {
		return nil, err
	}
	defer deleteTable(ctx, b.client, table)
	ddb, err := ddbstore.New(b.client, table)
	if err != nil {
		return nil, err
	}
	stores := []storeUnderTest{
		{name: "memstore", store: memstore.New(), requests: func() int64 { return 0 }},
		{name: "ddbstore (dynalite)", store: ddb, requests: func() int64 { return proxyTotal(ctx, b.proxy) }},
	}
	srv, err := devserver.StartRedis(ctx, root)
	if err != nil {
		logf("redis not started, left out of the store comparison: %v", err)
	} else {
		defer stopServer("redis", srv.PID, srv.Stop)
		client := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer func() {
			if err := client.Close(); err != nil {
				logf("redis client: %v", err)
			}
		}()
		cnt := &redisCounter{}
		client.AddHook(cnt)
		rs, err := redisstore.New(client, redisstore.WithPrefix("bench:"))
		if err != nil {
			return nil, err
		}
		stores = append(stores, storeUnderTest{name: "redisstore", store: rs, requests: cnt.n.Load})
	}
	var rows []storeRow
	for _, st := range stores {
		r, err := storeScenarios(ctx, st, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.name, err)
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

func proxyTotal(ctx context.Context, p *proxy) int64 {
	counts, err := p.Counts(ctx)
	if err != nil {
		return 0
	}
	var t int64
	for _, c := range counts {
		t += c
	}
	return t
}

// storeScenarios measures each scenario over one store, one call at a time.
func storeScenarios(ctx context.Context, st storeUnderTest, n int) ([]storeRow, error) {
	cs := &countingStore{Store: st.store}
	var counted idem.Store = cs
	if _, ok := st.store.(idem.Acquirer); ok {
		counted = countingAcquirer{cs}
	}
	r, err := idem.New(counted, runnerOptions()...)
	if err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("st%d", time.Now().UnixNano()%1_000_000)
	steps := []struct {
		name, events string
		delta        int
		throw        bool
		setup        func([]event) error
	}{
		{"a_unique", "a", 0, false, nil},
		{"b_duplicate_completed", "a", 0, false, nil},
		{"d_mismatch", "a", 1, false, nil},
		{"e_throw", "e", 0, true, nil},
		{"e_retry", "e", 0, false, nil},
		{"f_expired_inprogress", "f", 0, false, func(evs []event) error { return prewriteDead(ctx, st.store, evs) }},
	}
	var rows []storeRow
	for _, s := range steps {
		evs := makeEvents(prefix+s.events, "seq", n, s.delta)
		if s.setup != nil {
			if err := s.setup(evs); err != nil {
				return nil, err
			}
		}
		row, err := measureStore(ctx, r, cs, st, s.name, evs, s.throw)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func measureStore(ctx context.Context, r *idem.Runner, cs *countingStore, st storeUnderTest, name string, evs []event, throw bool) (storeRow, error) {
	var execs atomic.Int64
	ops0, req0 := cs.ops.Load(), st.requests()
	lat := make([]time.Duration, len(evs))
	verdicts := map[string]int{}
	for i, ev := range evs {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		t := time.Now()
		out, err := r.Do(cctx, ev.key, ev.payload, handler(ev, throw, &execs, 0))
		lat[i] = time.Since(t)
		cancel()
		verdicts[outcome(out, err)]++
	}
	slices.Sort(lat)
	n := float64(len(evs))
	row := storeRow{Store: st.name, Scenario: name, P50Ms: ms(lat[len(lat)/2]), P99Ms: ms(lat[len(lat)*99/100]),
		StoreOps: float64(cs.ops.Load()-ops0) / n, Requests: float64(st.requests()-req0) / n, Executions: float64(execs.Load()) / n}
	for v, c := range verdicts {
		if row.Verdict == "" || c > verdicts[row.Verdict] {
			row.Verdict = v
		}
	}
	logf("stores %-20s %-22s p50 %6.3f ms  p99 %6.3f ms  store ops %.2f  requests %.2f  %v", st.name, name, row.P50Ms, row.P99Ms, row.StoreOps, row.Requests, verdicts)
	return row, nil
}

// prewriteDead writes, for each event, an in-progress record whose lease
// ended a second ago: its holder died.
func prewriteDead(ctx context.Context, s idem.Store, evs []event) error {
	now := time.Now()
	for _, ev := range evs {
		fp, err := core.Fingerprint(ev.payload)
		if err != nil {
			return err
		}
		rec := core.Reserve(ev.key, fp, "dead-"+ev.key, nil, now.Add(-2*time.Second), now.Add(-time.Second), time.Hour)
		if err := s.Reserve(ctx, rec, nil, now.Add(-2*time.Second)); err != nil {
			return err
		}
	}
	return nil
}
