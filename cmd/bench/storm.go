package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/sim"
	"github.com/idemgo/idem/memstore"
)

// The storm: one key delivered again and again while its first execution
// holds it (a queue's redrive, a client retrying hard), on dynalite through
// the counting proxy and in the simulation (internal/sim, sim.Storm). What
// it costs: write units per delivery and per second of the lease the
// deliveries fall within, and the conditional writes that fail.

const (
	// stormSandboxes is how many processes (runners) the deliveries are
	// spread over.
	stormSandboxes = 4
	// stormConc is how many deliveries are in flight at once on dynalite.
	stormConc = 16
)

// stormLease is the lease a storm falls within: the workload's invocation
// deadline plus the default lease margin.
var stormLease = invocationTime + idem.DefaultLeaseMargin

// stormFigures are one storm's costs.
type stormFigures struct {
	Where            string             `json:"where"`
	Deliveries       int                `json:"deliveries"`
	Sandboxes        int                `json:"sandboxes"`
	Calls            map[string]int64   `json:"calls"`
	CallsPerDelivery map[string]float64 `json:"calls_per_delivery"`
	// WriteUnits and ReadUnits are the storm's units in all; per delivery,
	// and per second of the lease (stormLease) the storm falls within.
	WriteUnits          float64        `json:"write_units"`
	ReadUnits           float64        `json:"read_units"`
	WritePerDelivery    float64        `json:"write_units_per_delivery"`
	ReadPerDelivery     float64        `json:"read_units_per_delivery"`
	WritePerLeaseSecond float64        `json:"write_units_per_second_of_lease"`
	FailedConditions    int64          `json:"failed_conditional_writes"`
	FailedPerDelivery   float64        `json:"failed_conditional_writes_per_delivery"`
	Executions          int64          `json:"handler_executions"`
	WallS               float64        `json:"wall_s,omitempty"`
	WritePerWallSecond  float64        `json:"write_units_per_wall_second,omitempty"`
	Outcomes            map[string]int `json:"outcomes"`
	UnitsSource         string         `json:"units_source"`
}

// stormResult is the storm section of the report: the runners' default
// (their memory of keys in progress on) and, for comparison, the same storm
// with the memory off (WithInProgressMemory(0)): the cost before it.
type stormResult struct {
	LeaseS           float64       `json:"lease_s"`
	Dynalite         *stormFigures `json:"dynalite"`
	Sim              *stormFigures `json:"simulation"`
	DynaliteNoMemory *stormFigures `json:"dynalite_without_memory"`
	SimNoMemory      *stormFigures `json:"simulation_without_memory"`
	Note             string        `json:"note"`
}

// storm runs the storm on dynalite and in the simulation, with the
// runners' memory of keys in progress and without it.
func storm(ctx context.Context, rep *report, b *bench, n int) (*stormResult, error) {
	res := &stormResult{LeaseS: stormLease.Seconds(),
		Note: fmt.Sprintf("one key in progress (its holder's lease: the workload's %s deadline plus the %s default margin), delivered %d times to %d sandboxes; "+
			"per second of lease: the storm's units / %s", invocationTime, idem.DefaultLeaseMargin, n, stormSandboxes, stormLease)}
	for _, memory := range []bool{true, false} {
		d, err := stormDynalite(ctx, rep, b, n, memory)
		if err != nil {
			return nil, err
		}
		s, err := stormSim(n, d, memory)
		if err != nil {
			return nil, err
		}
		if memory {
			res.Dynalite, res.Sim = d, s
		} else {
			res.DynaliteNoMemory, res.SimNoMemory = d, s
		}
	}
	return res, nil
}

// stormOptions are the storm's runner options: the workload's, with the
// memory of keys in progress off unless memory.
func stormOptions(memory bool) []idem.Option {
	if memory {
		return runnerOptions()
	}
	return runnerOptions(idem.WithInProgressMemory(0))
}

// memoryText names a storm's runners.
func memoryText(memory bool) string {
	if memory {
		return "default runners (memory of keys in progress)"
	}
	return "memory of keys in progress off"
}

// stormDynalite delivers one key n times, stormConc at a time, to
// stormSandboxes runners (their memory of keys in progress on if memory),
// while a record holds it in progress (written beforehand, its lease
// ending in 10 minutes, so that the storm falls within it however slowly
// dynalite answers).
func stormDynalite(ctx context.Context, rep *report, b *bench, n int, memory bool) (*stormFigures, error) {
	const table = "idem_bench_storm"
	if _, err := ddbstore.CreateTable(ctx, b.client, table); err != nil {
		return nil, err
	}
	defer deleteTable(ctx, b.client, table)
	st, err := ddbstore.New(b.client, table)
	if err != nil {
		return nil, err
	}
	runners := make([]*idem.Runner, stormSandboxes)
	for i := range runners {
		if runners[i], err = idem.New(st, stormOptions(memory)...); err != nil {
			return nil, err
		}
	}
	ev := makeEvent("storm", "c16", 0, 100)
	if err := prewriteInProgress(10*time.Minute)(b, st, []event{ev}); err != nil {
		return nil, err
	}
	evs := make([]event, n)
	for i := range evs {
		evs[i] = ev
	}
	var next, execs atomic.Int64
	m, err := b.drive(evs, stormConc, func(ctx context.Context, ev event) (idem.Outcome, error) {
		r := runners[int(next.Add(1))%len(runners)]
		return r.Do(ctx, ev.key, ev.payload, handler(ev, false, &execs, 0))
	}, &execs)
	if err != nil {
		return nil, err
	}
	rep.checkCapacity("storm", m.Capacity, m.Calls)
	if m.Outcomes["in_progress"] != n || m.Executions != 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("storm: %d of %d deliveries in progress, %d executions; want all, 0", m.Outcomes["in_progress"], n, m.Executions))
	}
	sum := m.Capacity.Totals.Sum()
	f := newStormFigures(fmt.Sprintf("dynalite %s, through the counting proxy, %s", rep.Meta.Machine.Dynalite, memoryText(memory)), n, m.Calls, sum.Write, sum.Read, sum.ConditionFailed)
	f.Executions, f.Outcomes = m.Executions, m.Outcomes
	f.WallS, f.WritePerWallSecond = round(m.Wall.Seconds(), 2), round(sum.Write/m.Wall.Seconds(), 0)
	f.UnitsSource = unitsSource(sum.Reported, sum.Calls)
	logf("storm on dynalite (%s): %d deliveries, %s write units per delivery, %s per second of lease, %d failed conditional writes, %s",
		memoryText(memory), n, fmtUnits(f.WritePerDelivery), fmtUnits(f.WritePerLeaseSecond), f.FailedConditions, fmtCalls(f.CallsPerDelivery))
	return f, nil
}

func newStormFigures(where string, n int, calls map[string]int64, write, read float64, failed int64) *stormFigures {
	f := &stormFigures{Where: where, Deliveries: n, Sandboxes: stormSandboxes, Calls: calls, CallsPerDelivery: perEvent(calls, n),
		WriteUnits: write, ReadUnits: read, FailedConditions: failed}
	f.WritePerDelivery, f.ReadPerDelivery = round(write/float64(n), 3), round(read/float64(n), 3)
	f.WritePerLeaseSecond = round(write/stormLease.Seconds(), 1)
	f.FailedPerDelivery = round(float64(failed)/float64(n), 3)
	return f
}

// stormSim runs sim.Storm with n deliveries over the in-memory store (the
// runners' memory of keys in progress on if memory) and prices its store
// calls with the units dynalite charged per call in the same storm (dyn):
// the simulation counts calls, not bytes.
func stormSim(n int, dyn *stormFigures, memory bool) (*stormFigures, error) {
	sv := sim.Storm(stormSandboxes)
	if !memory {
		sv.InProgressMemory = -1
	}
	res, err := sim.Run(sim.Config{Seed: 21, Deliveries: n, Services: []sim.Service{sv},
		NewStore: func() idem.Store { return memstore.New() }})
	if err != nil {
		return nil, err
	}
	if len(res.Violations) > 0 {
		return nil, fmt.Errorf("the simulated storm broke an invariant: %v", res.Violations[0].Error())
	}
	st := res.Stats
	writes := dyn.WriteUnits / float64(max(1, dyn.Calls["UpdateItem"]+dyn.Calls["PutItem"]))
	calls := map[string]int64{"store writes": int64(st.StoreWrites), "store reads": int64(st.StoreReads)}
	f := newStormFigures(fmt.Sprintf("internal/sim (sim.Storm, seed 21, memstore; %v simulated), %s, store calls priced at dynalite's %s write units per write",
		res.SimTime.Round(time.Millisecond), memoryText(memory), fmtUnits(writes)), n, calls, float64(st.StoreWrites)*writes, 0, int64(st.StoreRefusals))
	f.Executions = int64(st.Tries)
	f.Outcomes = map[string]int{"executed": st.Successes, "in_progress": st.InProgress}
	f.UnitsSource = "simulated store calls × dynalite's units per write"
	return f, nil
}

// markdown is the storm's paragraph.
func (s *stormResult) markdown() string {
	if s == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n**storm** (%s):\n\n| where | deliveries | write units per delivery | write units per second of lease | failed conditional writes per delivery | read units per delivery | calls per delivery |\n| --- | ---: | ---: | ---: | ---: | ---: | --- |\n", s.Note)
	for _, f := range []*stormFigures{s.DynaliteNoMemory, s.SimNoMemory, s.Dynalite, s.Sim} {
		if f == nil {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s |\n", f.Where, f.Deliveries, fmtUnits(f.WritePerDelivery), fmtUnits(f.WritePerLeaseSecond),
			fmtUnits(f.FailedPerDelivery), fmtUnits(f.ReadPerDelivery), fmtCalls(f.CallsPerDelivery))
	}
	return b.String()
}
