package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
)

// Workload constants (the Performance section of the README).
const (
	retention = 3600 * time.Second
	// liveLease is the lease of the pre-written in-progress records that must be found
	// live: a day, so that no run, however slow the machine, outlives it.
	liveLease      = 24 * time.Hour
	invocationTime = 30 * time.Second
)

// mode is how many calls are in flight at once.
type mode struct {
	Name string
	Conc int
}

var modes = []mode{{"seq", 1}, {"c16", 16}}

// event is one call of a scenario: its key, payload and the handler's result.
type event struct {
	key     string
	payload []byte
	result  []byte
}

// makeEvent returns event i of scenario (in mode) with the given amount.
func makeEvent(scenario, mode string, i, amount int) event {
	id := fmt.Sprintf("%s-%s-%d", scenario, mode, i)
	return event{
		key:     id,
		payload: fmt.Appendf(nil, `{"id": %q, "n": %d, "amount": %d, "currency": "EUR"}`, id, i, amount),
		result:  fmt.Appendf(nil, `{"ok": true, "id": %q, "n": %d}`, id, i),
	}
}

func makeEvents(scenario, mode string, n, amountDelta int) []event {
	evs := make([]event, n)
	for i := range evs {
		evs[i] = makeEvent(scenario, mode, i, 100+i+amountDelta)
	}
	return evs
}

// outcome names what a call got: its verdict (idem's one vocabulary), with
// "+took_over" when it took an expired lease over.
func outcome(out idem.Outcome, _ error) string {
	if out.TookOver {
		return out.Verdict.String() + "+took_over"
	}
	return out.Verdict.String()
}

// measured is one measurement of a scenario in a mode.
type measured struct {
	Wall        time.Duration
	P50, P99    time.Duration
	Latency     quantiles // of the calls, in milliseconds
	EventsPerS  float64
	ClientCPU   time.Duration // per event
	DynaliteCPU time.Duration // per event
	ProxyCPU    time.Duration // per event
	Calls       map[string]int64
	Capacity    capDelta // capacity units charged at the proxy
	Executions  int64
	Outcomes    map[string]int
	FirstError  string
}

// bench holds what every scenario uses.
type bench struct {
	ctx     context.Context
	client  *dynamodb.Client
	proxy   *proxy
	dynaPID int
	n       int
	warmup  int
}

type snapshot struct {
	t                time.Time
	cpu, dyna, proxy time.Duration
	counts           map[string]int64
	cap              capacityReport
}

func (b *bench) snap() (snapshot, error) {
	c, err := b.proxy.Counts(b.ctx)
	if err != nil {
		return snapshot{}, err
	}
	d, err := pidCPU(b.dynaPID)
	if err != nil {
		return snapshot{}, err
	}
	p, err := pidCPU(b.proxy.PID)
	if err != nil {
		return snapshot{}, err
	}
	cr, err := b.proxy.Capacity(b.ctx)
	if err != nil {
		return snapshot{}, err
	}
	return snapshot{t: time.Now(), cpu: processCPU(), dyna: d, proxy: p, counts: c, cap: cr}, nil
}

// call is one wrapped call: it returns the outcome and error.
type call func(ctx context.Context, ev event) (idem.Outcome, error)

// drive makes len(evs) calls with conc in flight and measures them.
func (b *bench) drive(evs []event, conc int, fn call, executions *atomic.Int64) (measured, error) {
	runtime.GC()
	execs0 := executions.Load()
	s0, err := b.snap()
	if err != nil {
		return measured{}, err
	}
	lat := make([]time.Duration, len(evs))
	outs := make([]string, len(evs))
	var firstErr atomic.Pointer[string]
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(evs) {
					return
				}
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(b.ctx, invocationTime)
				out, err := fn(ctx, evs[i])
				cancel()
				lat[i] = time.Since(t0)
				outs[i] = outcome(out, err)
				if outs[i] == "error" {
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
				}
			}
		}()
	}
	wg.Wait()
	s1, err := b.snap()
	if err != nil {
		return measured{}, err
	}
	if err := b.ctx.Err(); err != nil {
		return measured{}, err
	}
	n := time.Duration(len(evs))
	slices.Sort(lat)
	m := measured{
		Wall:        s1.t.Sub(s0.t),
		P50:         percentile(lat, 0.50),
		P99:         percentile(lat, 0.99),
		Latency:     latencyQuantiles(lat),
		ClientCPU:   (s1.cpu - s0.cpu) / n,
		DynaliteCPU: (s1.dyna - s0.dyna) / n,
		ProxyCPU:    (s1.proxy - s0.proxy) / n,
		Calls:       diffCounts(s0.counts, s1.counts),
		Capacity:    diffCapacity(s0.cap, s1.cap),
		Executions:  executions.Load() - execs0,
		Outcomes:    map[string]int{},
	}
	m.EventsPerS = float64(len(evs)) / m.Wall.Seconds()
	for _, o := range outs {
		m.Outcomes[o]++
	}
	if p := firstErr.Load(); p != nil {
		m.FirstError = *p
	}
	return m, nil
}

// run fires the events with conc in flight, unmeasured (set-up, warm-up).
func (b *bench) run(evs []event, conc int, fn func(context.Context, event) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(evs) || first.Load() != nil {
					return
				}
				ctx, cancel := context.WithTimeout(b.ctx, invocationTime)
				err := fn(ctx, evs[i])
				cancel()
				if err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return b.ctx.Err()
}

// scenario is one row of the workload.
type scenario struct {
	Name string
	// Events returns the scenario's events in mode m.
	Events func(m string, n int) []event
	// Cached selects the runner with the local cache.
	Cached bool
	// Throw makes the handler fail transiently.
	Throw bool
	// Setup, if set, prepares the store before the measurement.
	Setup func(b *bench, st *ddbstore.Store, evs []event) error
	// Expect is the outcome every call must get, and ExecsPerEvent the
	// handler executions per event.
	Expect        string
	ExecsPerEvent int64
	// WantCalls is the DynamoDB calls per event expected on dynalite.
	WantCalls map[string]float64
	// Note says what the scenario does, for the JSON output.
	Note string
	// Bare makes the call one plain PutItem without idem: a reference row,
	// not part of the workload.
	Bare bool
}

func own(name string, delta int) func(m string, n int) []event {
	return func(m string, n int) []event { return makeEvents(name, m, n, delta) }
}

// workload returns the scenarios of the benchmark workload (README, Performance), in order: each
// scenario that resends events follows the one that first sent them.
func workload() []scenario {
	// Every reservation is one UpdateItem (ddbstore.Store.Acquire), every
	// completion one PutItem; dynalite adds a GetItem to each refusal.
	put2 := map[string]float64{"UpdateItem": 1, "PutItem": 1}
	refused := map[string]float64{"UpdateItem": 1, "GetItem": 1}
	return []scenario{
		{Name: "a_unique", Events: own("a_unique", 0), Expect: "executed", ExecsPerEvent: 1, WantCalls: put2,
			Note: "new ids"},
		{Name: "b_duplicate_completed", Events: own("a_unique", 0), Expect: "replayed", WantCalls: refused,
			Note: "a_unique's events again (ids a_unique-<mode>-<i>)"},
		{Name: "d_first", Events: own("d_first", 0), Expect: "executed", ExecsPerEvent: 1, WantCalls: put2,
			Note: "new ids; the payload fingerprint is always checked"},
		{Name: "d_mismatch", Events: own("d_first", 1), Expect: "key_reused", WantCalls: refused,
			Note: "d_first's ids with amount+1: rejected, handler not run"},
		{Name: "d_same", Events: own("d_first", 0), Expect: "replayed", WantCalls: refused,
			Note: "d_first's events again: replayed"},
		{Name: "e_throw", Events: own("e_throw", 0), Throw: true, Expect: "failed_transiently", ExecsPerEvent: 1, WantCalls: put2,
			Note: "handler returns a transient error; 1 attempt per call; a retryable record is left"},
		{Name: "e_retry", Events: own("e_throw", 0), Expect: "executed", ExecsPerEvent: 1, WantCalls: put2,
			Note: "e_throw's events again: the handler runs again and succeeds"},
		{Name: "f_expired_inprogress", Events: own("f_expired_inprogress", 0), Setup: prewriteInProgress(-time.Second),
			Expect: "executed+took_over", ExecsPerEvent: 1, WantCalls: put2,
			Note: "pre-written in_progress records whose lease ended 1 s ago: taken over"},
		{Name: "f_live_inprogress", Events: own("f_live_inprogress", 0), Setup: prewriteInProgress(liveLease),
			Expect: "in_progress", WantCalls: refused,
			Note: "pre-written in_progress records whose lease ends in a day: refused"},
		{Name: "f_completed_expired", Events: own("f_completed_expired", 0), Setup: prewriteExpiredSucceeded,
			Expect: "executed", ExecsPerEvent: 1, WantCalls: put2,
			Note: "pre-written succeeded records whose retention ended 10 s ago (not deleted): run again"},
		{Name: "g_cache_first", Events: own("g_cache_first", 0), Cached: true, Expect: "executed", ExecsPerEvent: 1, WantCalls: put2,
			Note: "new ids, local cache on"},
		{Name: "g_cache_duplicate", Events: own("g_cache_first", 0), Cached: true, Expect: "replayed", WantCalls: map[string]float64{},
			Note: "g_cache_first's events again, answered from the cache"},
		{Name: "ref_sdk_putitem", Events: own("ref_sdk_putitem", 0), Bare: true, Expect: "executed", ExecsPerEvent: 1, WantCalls: map[string]float64{"PutItem": 1},
			Note: "reference, not part of the workload: the handler and one plain PutItem of the event, without idem (the SDK's cost per call)"},
	}
}

// recorder is a ddbstore.API that answers every put at once and keeps the
// item: a store over it encodes records in its own layout without writing
// them, for the set-up's batch writes. The calls it does not answer panic
// on the nil embedded API (the set-up's writes are puts).
type recorder struct {
	ddbstore.API
	mu    sync.Mutex
	items []map[string]types.AttributeValue // guarded by mu
}

func (r *recorder) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	r.mu.Lock()
	r.items = append(r.items, in.Item)
	r.mu.Unlock()
	return &dynamodb.PutItemOutput{}, nil
}

func (r *recorder) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return nil, errors.New("bench: the recorder does not read")
}

// prewrite writes, for each event, the record that write makes through a
// store, in the store's own layout (the store encodes it; the items are
// written with BatchWriteItem, 25 at a time, unmeasured). Only the last item
// written per key is kept.
func prewrite(b *bench, st *ddbstore.Store, evs []event, write func(ctx context.Context, st *ddbstore.Store, ev event, fp string) error) error {
	rec := &recorder{}
	enc, err := ddbstore.New(rec, st.Table())
	if err != nil {
		return err
	}
	items := make([]map[string]types.AttributeValue, 0, len(evs))
	for _, ev := range evs {
		fp, err := core.Fingerprint(ev.payload)
		if err != nil {
			return err
		}
		rec.items = rec.items[:0:0]
		if err := write(b.ctx, enc, ev, fp); err != nil {
			return err
		}
		if len(rec.items) == 0 {
			return errors.New("bench: set-up wrote nothing")
		}
		items = append(items, rec.items[len(rec.items)-1])
	}
	var batches [][]map[string]types.AttributeValue
	for len(items) > 0 {
		n := min(25, len(items))
		batches = append(batches, items[:n])
		items = items[n:]
	}
	return runN(b.ctx, len(batches), 4, func(ctx context.Context, i int) error {
		reqs := make([]types.WriteRequest, len(batches[i]))
		for j, it := range batches[i] {
			reqs[j] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
		}
		in := map[string][]types.WriteRequest{st.Table(): reqs}
		for try := 0; len(in) > 0; try++ {
			if try == 10 {
				return errors.New("bench: BatchWriteItem left items unprocessed 10 times")
			}
			out, err := b.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: in})
			if err != nil {
				return err
			}
			in = out.UnprocessedItems
		}
		return nil
	})
}

// runN runs fn(0..n-1) with conc in flight and returns the first error.
func runN(ctx context.Context, n, conc int, fn func(context.Context, int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || first.Load() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return ctx.Err()
}

// prewriteInProgress pre-writes, for each event, an in-progress record of
// its fingerprint whose lease ends leaseFromNow from now.
func prewriteInProgress(leaseFromNow time.Duration) func(*bench, *ddbstore.Store, []event) error {
	return func(b *bench, st *ddbstore.Store, evs []event) error {
		return prewrite(b, st, evs, func(ctx context.Context, enc *ddbstore.Store, ev event, fp string) error {
			now := time.Now()
			rec := core.Reserve(ev.key, fp, "prewritten-"+ev.key, nil, now, now.Add(leaseFromNow), retention)
			return enc.Reserve(ctx, rec, nil, now)
		})
	}
}

// prewriteExpiredSucceeded pre-writes, for each event, a succeeded record of
// its fingerprint whose retention ended 10 s ago: as after DynamoDB's lazy
// TTL, the item is still there.
func prewriteExpiredSucceeded(b *bench, st *ddbstore.Store, evs []event) error {
	return prewrite(b, st, evs, func(ctx context.Context, enc *ddbstore.Store, ev event, fp string) error {
		now := time.Now()
		rec := core.Reserve(ev.key, fp, "prewritten-"+ev.key, nil, now, now.Add(time.Minute), retention)
		done := core.Succeed(rec, ev.result, now, retention)
		done.ExpiresAt = now.Add(-10 * time.Second)
		_, err := enc.Complete(ctx, done)
		return err
	})
}

// handler returns the scenario's handler, counting executions.
func handler(ev event, throw bool, execs *atomic.Int64, sleep time.Duration) idem.Handler {
	return func(ctx context.Context) ([]byte, error) {
		execs.Add(1)
		if sleep > 0 {
			t := time.NewTimer(sleep)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, core.MarkTransient(ctx.Err())
			}
		}
		if throw {
			return nil, core.MarkTransient(errors.New("bench: transient failure"))
		}
		return ev.result, nil
	}
}

// runnerOptions are the workload's runner settings: retention 3600 s, one
// attempt per call (no in-process retry).
func runnerOptions(extra ...idem.Option) []idem.Option {
	return append([]idem.Option{
		idem.WithRetention(retention),
		idem.WithRetry(1, idem.DefaultBackoffBase, idem.DefaultBackoffMax),
	}, extra...)
}
