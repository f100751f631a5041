package ddbstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/capacity"
	"github.com/idemgo/idem/internal/fakeclock"
)

// ledgerTransport charges every DynamoDB request it forwards with a
// capacity.Ledger (DynamoDB's published rules, from the items sent), as
// the benchmark's counting proxy does. Requests are made one at a time by
// the tests that use it; safe for concurrent use all the same.
type ledgerTransport struct {
	inner  http.RoundTripper
	ledger *capacity.Ledger

	mu     sync.Mutex
	totals capacity.Totals // guarded by mu
	errs   []string        // guarded by mu: requests not charged exactly
}

func newLedgerTransport() *ledgerTransport {
	return &ledgerTransport{inner: http.DefaultTransport, ledger: capacity.NewLedger(), totals: capacity.Totals{}}
}

func (l *ledgerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	op := operation(req)
	body, err := bufferRequest(req)
	if err != nil {
		return nil, err
	}
	resp, err := l.inner.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	answer, ab, err := buffered(resp.Body)
	if err != nil {
		return nil, err
	}
	resp.Body = ab
	c, cerr := l.ledger.Charge(op, body, answer, resp.StatusCode)
	l.mu.Lock()
	defer l.mu.Unlock()
	if cerr != nil || c.Approximate {
		l.errs = append(l.errs, fmt.Sprintf("%s: %v (approximate %v)", op, cerr, c.Approximate))
	}
	l.totals.Add(c, false)
	return resp, nil
}

// sum returns the units charged so far, and the requests not charged
// exactly.
func (l *ledgerTransport) sum() (capacity.Tally, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.totals.Sum(), append([]string(nil), l.errs...)
}

func (l *ledgerTransport) writeUnits() float64 {
	s, _ := l.sum()
	return s.Write
}

// ledgerStore returns a store on a new table whose requests l charges.
func ledgerStore(t *testing.T, l *ledgerTransport, opts ...ddbstore.Option) *ddbstore.Store {
	t.Helper()
	integration(t)
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: l}
		o.RetryMaxAttempts = 1
	})
	table, _ := newTable(t, client, opts...)
	s, err := ddbstore.New(client, table, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stepResult is step i's result: about 20 bytes of JSON ("small"), or
// 4096 random bytes ("4KB").
func stepResult(t *testing.T, i int, size string) []byte {
	if size == "small" {
		return fmt.Appendf(nil, `{"step":%d,"ok":true}`, i)
	}
	b := make([]byte, 4096)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// stepsCost is what an execution of steps cost, in write units: its steps
// (each idem.Step call), and its completion.
type stepsCost struct {
	steps      []float64
	completion float64
}

func (c stepsCost) total() (sum float64) {
	for _, u := range c.steps {
		sum += u
	}
	return sum
}

// runSteps runs one execution of k steps of results of size through r,
// charged by l, one call at a time.
func runSteps(t *testing.T, r *idem.Runner, l *ledgerTransport, k int, size string) stepsCost {
	t.Helper()
	var c stepsCost
	var handlerEnd float64
	key := fmt.Sprintf("evt:stepcost-%s-%d-%d:run", size, k, time.Now().UnixNano())
	out, err := r.Do(context.Background(), key, []byte(`{"order":1}`), func(ctx context.Context) ([]byte, error) {
		for i := 1; i <= k; i++ {
			before := l.writeUnits()
			if _, err := idem.Step(ctx, fmt.Sprintf("step-%02d", i), func(context.Context) ([]byte, error) { return stepResult(t, i, size), nil }); err != nil {
				return nil, err
			}
			c.steps = append(c.steps, l.writeUnits()-before)
		}
		handlerEnd = l.writeUnits()
		return []byte(`{"ok":true}`), nil
	})
	if err != nil || out.Verdict != idem.Executed {
		t.Fatalf("Do of %d %s steps = %s, %v; want executed", k, size, out.Verdict, err)
	}
	c.completion = l.writeUnits() - handlerEnd
	return c
}

// TestStepCostIndependentOfStepsBefore: the write units of an execution's
// steps, computed by internal/capacity from the store's requests to the
// server, grow linearly with the steps: 50 steps cost at most 50 times one
// step (10 % allowed for rounding: a record grows by each step's name and
// 9 bytes), with small and with 4 KB results; and the completion after 50
// steps costs at most one unit more than after one.
func TestStepCostIndependentOfStepsBefore(t *testing.T) {
	l := newLedgerTransport()
	r, err := idem.New(ledgerStore(t, l), idem.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []string{"small", "4KB"} {
		one, fifty := runSteps(t, r, l, 1, size), runSteps(t, r, l, 50, size)
		ratio := fifty.total() / (50 * one.total())
		t.Logf("%s results: 1 step %v write units (completion %v); 50 steps %v (%.2f× 50 single steps; by position %v; completion %v)",
			size, one.total(), one.completion, fifty.total(), ratio, fifty.steps, fifty.completion)
		if ratio > 1.1 {
			t.Errorf("%s results: 50 steps cost %v write units, %.2f times 50 single steps (%v each); want at most 1.1", size, fifty.total(), ratio, one.total())
		}
		if fifty.completion > one.completion+1 {
			t.Errorf("%s results: the completion after 50 steps costs %v write units, after one %v; want at most one more", size, fifty.completion, one.completion)
		}
	}
	if _, errs := l.sum(); len(errs) > 0 {
		t.Errorf("requests not charged exactly: %q", errs)
	}
}

// TestCallsPerStepPath counts the calls of the paths of an execution with
// steps, through idem.Runner: a step is one PutItem (its item) and one
// UpdateItem (its reference); a duplicate refused while the steps' holder
// runs reads no step; a takeover reads the steps it carries with one
// BatchGetItem and does not run them again; a retry within the call runs
// under the call's reservation and costs no call of its own (its step is
// kept in memory); Get reads them with one BatchGetItem.
func TestCallsPerStepPath(t *testing.T) {
	integration(t)
	f := newFixture(t)
	clock := fakeclock.New(time.Now().Truncate(time.Second))
	r := newRunnerOpts(t, f.store, clock, idem.WithRetry(2, 0, 0))
	ctx := context.Background()
	extra := 0
	if !returnsAllOld() {
		extra = 1
	}
	type want struct{ updates, puts, gets, batches int }
	check := func(name string, w want, fn func()) {
		t.Helper()
		f.rec.reset()
		fn()
		got := want{f.rec.count("UpdateItem"), f.rec.count("PutItem"), f.rec.count("GetItem"), f.rec.count("BatchGetItem")}
		t.Logf("%-40s UpdateItem %d PutItem %d GetItem %d BatchGetItem %d", name, got.updates, got.puts, got.gets, got.batches)
		if got != w {
			t.Errorf("%s on %q: %+v; want %+v", name, server(), got, w)
		}
	}
	runs := map[string]int{}
	steps := func(names ...string) idem.Handler {
		return func(ctx context.Context) ([]byte, error) {
			for _, n := range names {
				if _, err := idem.Step(ctx, n, func(context.Context) ([]byte, error) { runs[n]++; return []byte(n), nil }); err != nil {
					return nil, err
				}
			}
			return []byte(`"ok"`), nil
		}
	}
	check("first run, 3 steps", want{1 + 3, 1 + 3, 0, 0}, func() { mustDo(t, ctx, r, "calls:steps:1", steps("a", "b", "c")) })

	// A holder that recorded 3 steps and died.
	now := clock.Now()
	held := core.Reserve("calls:steps:2", emptyFP, "tok-dead", nil, now, now.Add(time.Minute), time.Hour)
	if err := f.store.Reserve(ctx, held, nil, now); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		if err := f.store.RecordStep(ctx, held.Key, "tok-dead", core.Step{Name: n, Result: []byte(n)}, now); err != nil {
			t.Fatal(err)
		}
	}
	check("in progress elsewhere, 3 steps", want{1, 0, extra, 0}, func() {
		if _, err := r.Do(ctx, held.Key, []byte(`{}`), steps("a", "b", "c")); !errors.Is(err, core.ErrInProgress) {
			t.Fatalf("Do = %v, want ErrInProgress", err)
		}
	})
	check("Get, 3 steps", want{0, 0, 1, 1}, func() {
		if got, err := f.store.Get(ctx, held.Key, clock.Now()); err != nil || len(got.Steps) != 3 {
			t.Fatalf("Get = %d steps, %v", len(got.Steps), err)
		}
	})
	clock.Advance(2 * time.Minute)
	runs = map[string]int{}
	check("takeover, 3 steps carried, 1 new", want{1 + 1, 1 + 1, 0, 1}, func() {
		mustDo(t, ctx, r, held.Key, steps("a", "b", "c", "d"))
	})
	if runs["a"]+runs["b"]+runs["c"] != 0 || runs["d"] != 1 {
		t.Errorf("the takeover ran %v, want d only", runs)
	}
	tries := 0
	check("retry in the call, 1 step kept", want{1 + 1, 1 + 1, 0, 0}, func() {
		mustDo(t, ctx, r, "calls:steps:3", func(ctx context.Context) ([]byte, error) {
			if _, err := idem.Step(ctx, "a", func(context.Context) ([]byte, error) { return []byte("a"), nil }); err != nil {
				return nil, err
			}
			if tries++; tries == 1 {
				return nil, core.MarkTransient(errors.New("try again"))
			}
			return []byte(`"ok"`), nil
		})
	})
}

// denyBatch answers BatchGetItem with AccessDeniedException, as DynamoDB
// does for a policy that does not grant it, and counts the requests.
type denyBatch struct {
	inner http.RoundTripper
	mu    sync.Mutex
	ops   map[string]int
}

func (d *denyBatch) RoundTrip(req *http.Request) (*http.Response, error) {
	op := operation(req)
	d.mu.Lock()
	d.ops[op]++
	d.mu.Unlock()
	if op == "BatchGetItem" {
		return jsonError(req, 400, "AccessDeniedException", "User: arn:aws:iam::000000000000:user/x is not authorized to perform: dynamodb:BatchGetItem"), nil
	}
	return d.inner.RoundTrip(req)
}

// TestStepsWhereBatchGetItemIsDenied: where BatchGetItem is refused for
// access (a policy written for an older version), reading a record's steps
// fails, loudly and each time: a permanent misconfiguration that names
// dynamodb:BatchGetItem, after the one BatchGetItem and no other request
// in its place.
func TestStepsWhereBatchGetItemIsDenied(t *testing.T) {
	integration(t)
	d := &denyBatch{inner: http.DefaultTransport, ops: map[string]int{}}
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.HTTPClient, o.RetryMaxAttempts = &http.Client{Transport: d}, 1 })
	table, _ := newTable(t, client)
	s, err := ddbstore.New(client, table)
	if err != nil {
		t.Fatal(err)
	}
	ctx, now := context.Background(), time.Now().Truncate(time.Second)
	rec := core.Reserve("evt:denied:1", emptyFP, "tok-a", nil, now, now.Add(time.Minute), time.Hour)
	if err := s.Reserve(ctx, rec, nil, now); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		if err := s.RecordStep(ctx, rec.Key, "tok-a", core.Step{Name: n, Result: []byte(n)}, now); err != nil {
			t.Fatal(err)
		}
	}
	d.mu.Lock()
	clear(d.ops)
	d.mu.Unlock()
	for range 2 {
		got, err := s.Get(ctx, rec.Key, now)
		if !errors.Is(err, idem.ErrMisconfigured) || !errors.Is(err, ddbstore.ErrAccessDenied) || core.Classify(err) != core.Permanent ||
			!strings.Contains(err.Error(), "dynamodb:BatchGetItem") {
			t.Fatalf("Get = %d steps, %v; want a permanent misconfiguration naming dynamodb:BatchGetItem", len(got.Steps), err)
		}
	}
	if d.ops["BatchGetItem"] != 2 || d.ops["GetItem"] != 2 {
		t.Errorf("%d BatchGetItem, %d GetItem; want one of each per Get", d.ops["BatchGetItem"], d.ops["GetItem"])
	}
}
