package main

import (
	"context"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

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
	Note           string             `json:"note"`
}

// allOldCheck counts calls only: moto's latencies say nothing about
// DynamoDB's or dynalite's.
func allOldCheck(ctx context.Context, root string, f flags) (*allOldResult, error) {
	moto, err := devserver.StartMoto(ctx, root)
	if err != nil {
		return nil, err
	}
	defer stopServer("moto", moto.PID, moto.Stop)
	logf("moto pid %d at %s (ALL_OLD call counts)", moto.PID, moto.Endpoint)
	prx, err := startProxy(ctx, moto.Endpoint)
	if err != nil {
		return nil, err
	}
	defer stopServer("proxy (moto)", prx.PID, func() error { prx.Stop(); return nil })
	client, err := newClient(ctx, prx.Endpoint)
	if err != nil {
		return nil, err
	}
	const table = "idem_bench_allold"
	if _, err := ddbstore.CreateTable(ctx, client, table); err != nil {
		return nil, err
	}
	st, err := ddbstore.New(client, table)
	if err != nil {
		return nil, err
	}
	r, err := idem.New(st, runnerOptions()...)
	if err != nil {
		return nil, err
	}
	n := min(f.n, 100)
	res := &allOldResult{Server: "moto " + motoVersion(root), Events: n, Outcomes: map[string]int{},
		Note: "call counts only; moto's latency is not comparable"}
	b := &bench{ctx: ctx, client: client, proxy: prx}
	count := func(evs []event, fn func(context.Context, event) error) (map[string]float64, error) {
		c0, err := prx.Counts(ctx)
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
	if res.FirstCalls, err = count(evs, do); err != nil {
		return nil, err
	}
	if res.DuplicateCalls, err = count(evs, do); err != nil {
		return nil, err
	}
	live := makeEvents("f_live_inprogress", "seq", n, 0)
	if err := prewriteInProgress(liveLease)(b, st, live); err != nil {
		return nil, err
	}
	if res.LiveCalls, err = count(live, do); err != nil {
		return nil, err
	}
	if res.RetryCalls, err = allOldRetry(r, res, count); err != nil {
		return nil, err
	}
	expired := makeEvents("f_expired_inprogress", "seq", n, 0)
	if err := prewriteInProgress(-time.Second)(b, st, expired); err != nil {
		return nil, err
	}
	if res.TakeoverCalls, err = count(expired, do); err != nil {
		return nil, err
	}
	return res, nil
}

// allOldRetry counts the calls of a retry of a retryable failure: the
// events fail transiently once (e_throw, unmeasured), then run again.
func allOldRetry(r *idem.Runner, res *allOldResult, count func([]event, func(context.Context, event) error) (map[string]float64, error)) (map[string]float64, error) {
	evs := makeEvents("e_throw", "seq", res.Events, 0)
	var execs atomic.Int64
	run := func(throw bool) func(context.Context, event) error {
		return func(ctx context.Context, ev event) error {
			out, err := r.Do(ctx, ev.key, ev.payload, handler(ev, throw, &execs, 0))
			res.Outcomes[outcome(out, err)]++
			return nil
		}
	}
	if _, err := count(evs, run(true)); err != nil {
		return nil, err
	}
	return count(evs, run(false))
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
