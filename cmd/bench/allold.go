package main

import (
	"context"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/devserver"
)

// allOldResult is the calls per event of a first execution, a duplicate,
// a call refused by a live lease, a retry of a retryable failure and a
// takeover of an expired lease on moto, a server that returns the blocking
// item with a failed condition (ReturnValuesOnConditionCheckFailure
// ALL_OLD), as DynamoDB does.
type allOldResult struct {
	Server         string             `json:"server"`
	Events         int                `json:"events"`
	FirstCalls     map[string]float64 `json:"a_unique_calls_per_event"`
	DuplicateCalls map[string]float64 `json:"b_duplicate_completed_calls_per_event"`
	LiveCalls      map[string]float64 `json:"f_live_inprogress_calls_per_event"`
	RetryCalls     map[string]float64 `json:"e_retry_calls_per_event"`
	TakeoverCalls  map[string]float64 `json:"f_expired_inprogress_calls_per_event"`
	Outcomes       map[string]int     `json:"outcomes"`
	// Capacity is each scenario's capacity units per event, by name.
	Capacity map[string]*capFigures `json:"capacity"`
	Note     string                 `json:"note"`
}

// motoEnv is a moto server behind a counting proxy (whose capacity units
// are computed: moto's reports are constants), with a client of it.
type motoEnv struct {
	version string
	server  *devserver.Server
	proxy   *proxy
	client  *dynamodb.Client
}

// startMoto starts moto and its proxy; the returned function stops them.
func startMoto(ctx context.Context, root string) (*motoEnv, func(), error) {
	moto, err := devserver.StartMoto(ctx, root)
	if err != nil {
		return nil, nil, err
	}
	logf("moto pid %d at %s", moto.PID, moto.Endpoint)
	prx, err := startProxy(ctx, moto.Endpoint, false)
	if err != nil {
		stopServer("moto", moto.PID, moto.Stop)
		return nil, nil, err
	}
	stop := func() {
		stopServer("proxy (moto)", prx.PID, func() error { prx.Stop(); return nil })
		stopServer("moto", moto.PID, moto.Stop)
	}
	client, err := newClient(ctx, prx.Endpoint)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return &motoEnv{version: "moto " + motoVersion(root), server: moto, proxy: prx, client: client}, stop, nil
}

// allOldCheck counts calls and capacity units only: moto's latencies say
// nothing about DynamoDB's or dynalite's.
func allOldCheck(ctx context.Context, rep *report, env *motoEnv, f flags) (*allOldResult, error) {
	client, prx := env.client, env.proxy
	const table = "idem_bench_allold"
	if _, err := ddbstore.CreateTable(ctx, client, table); err != nil {
		return nil, err
	}
	defer deleteTable(ctx, client, table)
	st, err := ddbstore.New(client, table)
	if err != nil {
		return nil, err
	}
	r, err := idem.New(st, runnerOptions()...)
	if err != nil {
		return nil, err
	}
	n := min(f.n, 100)
	res := &allOldResult{Server: env.version, Events: n, Outcomes: map[string]int{}, Capacity: map[string]*capFigures{},
		Note: "call counts and capacity units (computed from the items sent) only; moto's latency is not comparable"}
	b := &bench{ctx: ctx, client: client, proxy: prx}
	count := func(name string, evs []event, fn func(context.Context, event) error) (map[string]float64, error) {
		c0, err := prx.Counts(ctx)
		if err != nil {
			return nil, err
		}
		k0, err := prx.Capacity(ctx)
		if err != nil {
			return nil, err
		}
		if err := b.run(evs, 1, fn); err != nil {
			return nil, err
		}
		c1, err := prx.Counts(ctx)
		if err != nil {
			return nil, err
		}
		k1, err := prx.Capacity(ctx)
		if err != nil {
			return nil, err
		}
		d := diffCapacity(k0, k1)
		rep.checkCapacity("allold "+name, d, diffCounts(c0, c1))
		res.Capacity[name] = newCapFigures([]capDelta{d}, len(evs))
		per := map[string]float64{}
		for k, v := range diffCounts(c0, c1) {
			per[k] = float64(v) / float64(len(evs))
		}
		return per, nil
	}
	var execs atomic.Int64
	do := func(ctx context.Context, ev event) error {
		out, err := r.Do(ctx, ev.key, ev.payload, handler(ev, false, &execs, 0))
		res.Outcomes[outcome(out, err)]++
		return nil
	}
	evs := makeEvents("a_unique", "seq", n, 0)
	if res.FirstCalls, err = count("a_unique", evs, do); err != nil {
		return nil, err
	}
	if res.DuplicateCalls, err = count("b_duplicate_completed", evs, do); err != nil {
		return nil, err
	}
	live := makeEvents("f_live_inprogress", "seq", n, 0)
	if err := prewriteInProgress(liveLease)(b, st, live); err != nil {
		return nil, err
	}
	if res.LiveCalls, err = count("f_live_inprogress", live, do); err != nil {
		return nil, err
	}
	if res.RetryCalls, err = allOldRetry(r, res, count); err != nil {
		return nil, err
	}
	expired := makeEvents("f_expired_inprogress", "seq", n, 0)
	if err := prewriteInProgress(-time.Second)(b, st, expired); err != nil {
		return nil, err
	}
	if res.TakeoverCalls, err = count("f_expired_inprogress", expired, do); err != nil {
		return nil, err
	}
	return res, nil
}

// allOldRetry counts the calls of a retry of a retryable failure: the
// events fail transiently once (e_throw, unmeasured), then run again.
func allOldRetry(r *idem.Runner, res *allOldResult, count func(string, []event, func(context.Context, event) error) (map[string]float64, error)) (map[string]float64, error) {
	evs := makeEvents("e_throw", "seq", res.Events, 0)
	var execs atomic.Int64
	run := func(throw bool) func(context.Context, event) error {
		return func(ctx context.Context, ev event) error {
			out, err := r.Do(ctx, ev.key, ev.payload, handler(ev, throw, &execs, 0))
			res.Outcomes[outcome(out, err)]++
			return nil
		}
	}
	if _, err := count("e_throw", evs, run(true)); err != nil {
		return nil, err
	}
	return count("e_retry", evs, run(false))
}

func motoVersion(root string) string {
	out, err := runOutput(root+"/.cache/venv/bin/python", "-c", "import moto; print(moto.__version__)")
	if err != nil {
		return "(version unknown)"
	}
	return strings.TrimSpace(out)
}

func runOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return string(out), err
}
