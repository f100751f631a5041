package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/devserver"
)

// coldFunction is one function measured by coldstart.
type coldFunction struct {
	Name, Pkg string
	bootstrap string
}

// coldRun is what one cold start of a function measured.
type coldRun struct {
	ColdMs float64 // first invoke: process start to first response
	WarmMs float64 // second invoke on the same sandbox
	Calls  map[string]int64
	// From the emulator's log: the init phase (process start to the
	// runtime's first request for an event) and the handler's duration of
	// the first and second invokes.
	InitMs, FirstHandlerMs, WarmHandlerMs float64
}

var (
	initReport = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)
	invokeDone = regexp.MustCompile(`INVOKE RTDONE\(status: [a-z]+, produced bytes: [0-9]+, duration: ([0-9.]+)ms\)`)
)

// parseRIELog reads the init duration and the handler durations of the
// first two invokes from an emulator's log.
func parseRIELog(log string) (initMs, first, second float64, err error) {
	m := initReport.FindStringSubmatch(log)
	d := invokeDone.FindAllStringSubmatch(log, 2)
	if m == nil || len(d) < 2 {
		return 0, 0, 0, fmt.Errorf("emulator log has no INIT REPORT or fewer than two INVOKE RTDONE lines:\n%s", tail(log, 20))
	}
	initMs, _ = strconv.ParseFloat(m[1], 64)
	first, _ = strconv.ParseFloat(d[0][1], 64)
	second, _ = strconv.ParseFloat(d[1][1], 64)
	return initMs, first, second, nil
}

// coldResult is the coldstart figures of one function.
type coldResult struct {
	Package        string             `json:"package"`
	BinaryBytes    int64              `json:"binary_bytes"`
	ColdMs         []float64          `json:"cold_ms"`
	WarmMs         []float64          `json:"warm_ms"`
	ColdMedianMs   float64            `json:"cold_median_ms"`
	WarmMedianMs   float64            `json:"warm_median_ms"`
	ColdCallsFirst map[string]float64 `json:"calls_of_first_invoke"`
	// Split of the cold start, from the emulator's log (medians).
	InitMedianMs         float64   `json:"init_median_ms"`
	FirstHandlerMedianMs float64   `json:"first_handler_median_ms"`
	WarmHandlerMedianMs  float64   `json:"warm_handler_median_ms"`
	InitMs               []float64 `json:"init_ms"`
	FirstHandlerMs       []float64 `json:"first_handler_ms"`
	WarmHandlerMs        []float64 `json:"warm_handler_ms"`
}

// coldstartResult compares the example's SQS consumer with a bare
// aws-lambda-go function doing the same DynamoDB work without idem.
type coldstartResult struct {
	Starts    int                    `json:"starts"`
	Functions map[string]*coldResult `json:"functions"`
	DiffMs    float64                `json:"cold_median_diff_ms"`
	// The difference split: init phase, handler of the first invoke, and
	// handler of a warm invoke (the per-event cost of idempotency, paid on
	// every invoke, not only the cold one).
	InitDiffMs         float64 `json:"init_median_diff_ms"`
	FirstHandlerDiffMs float64 `json:"first_handler_median_diff_ms"`
	WarmHandlerDiffMs  float64 `json:"warm_handler_median_diff_ms"`
	Note               string  `json:"note"`
}

// coldstart builds both functions as bootstraps and starts each under its
// own aws-lambda-rie f.coldstarts times, alternating: the time from the
// first invoke (which starts the bootstrap process) to its response is the
// cold start; a second invoke on the same emulator gives the warm time.
func coldstart(ctx context.Context, root string, prx *proxy, f flags) (*coldstartResult, error) {
	rie, err := devserver.LookupRIE(root)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "idem-bench-coldstart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	fns := []*coldFunction{
		{Name: "idem (examples/orders/cmd/orders-consumer)", Pkg: "./examples/orders/cmd/orders-consumer"},
		{Name: "bare (examples/bare)", Pkg: "./examples/bare"},
	}
	res := &coldstartResult{Starts: f.coldstarts, Functions: map[string]*coldResult{},
		Note: "each start is a new aws-lambda-rie; cold = first invoke, which starts the bootstrap, to its response; " +
			"warm = the second invoke; one SQS message per invoke, DynamoDB behind the counting proxy"}
	for i, fn := range fns {
		t0 := time.Now()
		out := fmt.Sprintf("%s/%d", dir, i)
		if err := os.MkdirAll(out, 0o755); err != nil {
			return nil, err
		}
		if fn.bootstrap, err = devserver.BuildBootstrap(ctx, root, fn.Pkg, out); err != nil {
			return nil, err
		}
		st, err := os.Stat(fn.bootstrap)
		if err != nil {
			return nil, err
		}
		res.Functions[fn.Name] = &coldResult{Package: fn.Pkg, BinaryBytes: st.Size()}
		logf("coldstart: built %s (%d bytes) in %.1f s", fn.Pkg, st.Size(), time.Since(t0).Seconds())
	}

	client, err := newClient(ctx, prx.Endpoint)
	if err != nil {
		return nil, err
	}
	const idemTable, ledgerTable = "idem_bench_cold_idem", "idem_bench_cold_ledger"
	if _, err := ddbstore.CreateTable(ctx, client, idemTable); err != nil {
		return nil, err
	}
	defer deleteTable(ctx, client, idemTable)
	if err := createLedger(ctx, client, ledgerTable); err != nil {
		return nil, err
	}
	defer deleteTable(ctx, client, ledgerTable)
	env := []string{
		"AWS_LAMBDA_FUNCTION_TIMEOUT=30",
		"AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_SESSION_TOKEN=",
		"AWS_ENDPOINT_URL_DYNAMODB=" + prx.Endpoint,
		"IDEM_TABLE=" + idemTable, "LEDGER_TABLE=" + ledgerTable,
		"ORDERS_TEST_HOOKS=0",
	}
	for k := range f.coldstarts {
		for i, fn := range fns {
			// Alternate which function goes first, so that neither always
			// follows the other.
			if k%2 == 1 {
				fn = fns[len(fns)-1-i]
			}
			r, err := coldOnce(ctx, rie, fn, env, prx, k)
			if err != nil {
				return nil, fmt.Errorf("%s start %d: %w", fn.Pkg, k, err)
			}
			cr := res.Functions[fn.Name]
			cr.ColdMs = append(cr.ColdMs, round(r.ColdMs, 2))
			cr.WarmMs = append(cr.WarmMs, round(r.WarmMs, 2))
			cr.InitMs = append(cr.InitMs, round(r.InitMs, 2))
			cr.FirstHandlerMs = append(cr.FirstHandlerMs, round(r.FirstHandlerMs, 2))
			cr.WarmHandlerMs = append(cr.WarmHandlerMs, round(r.WarmHandlerMs, 2))
			if cr.ColdCallsFirst == nil {
				cr.ColdCallsFirst = map[string]float64{}
				for op, n := range r.Calls {
					cr.ColdCallsFirst[op] = float64(n)
				}
			}
		}
	}
	for _, cr := range res.Functions {
		cr.ColdMedianMs = round(median(cr.ColdMs), 2)
		cr.WarmMedianMs = round(median(cr.WarmMs), 2)
		cr.InitMedianMs = round(median(cr.InitMs), 2)
		cr.FirstHandlerMedianMs = round(median(cr.FirstHandlerMs), 2)
		cr.WarmHandlerMedianMs = round(median(cr.WarmHandlerMs), 2)
	}
	id, bare := res.Functions[fns[0].Name], res.Functions[fns[1].Name]
	res.DiffMs = round(id.ColdMedianMs-bare.ColdMedianMs, 2)
	res.InitDiffMs = round(id.InitMedianMs-bare.InitMedianMs, 2)
	res.FirstHandlerDiffMs = round(id.FirstHandlerMedianMs-bare.FirstHandlerMedianMs, 2)
	res.WarmHandlerDiffMs = round(id.WarmHandlerMedianMs-bare.WarmHandlerMedianMs, 2)
	logf("coldstart: idem %.1f ms, bare %.1f ms (medians of %d), difference %.1f ms: init %+.1f ms, first handler %+.1f ms (warm handler %+.1f ms)",
		id.ColdMedianMs, bare.ColdMedianMs, f.coldstarts, res.DiffMs, res.InitDiffMs, res.FirstHandlerDiffMs, res.WarmHandlerDiffMs)
	return res, nil
}

func createLedger(ctx context.Context, client *dynamodb.Client, table string) error {
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("entry_id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("entry_id"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		return err
	}
	w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	return w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 30*time.Second)
}

// coldOnce starts one emulator for fn and invokes it twice.
func coldOnce(ctx context.Context, rieBin string, fn *coldFunction, env []string, prx *proxy, k int) (coldRun, error) {
	var r coldRun
	rie, err := devserver.StartRIE(ctx, rieBin, fn.bootstrap, env)
	if err != nil {
		return r, err
	}
	defer stopServer("aws-lambda-rie", rie.PID, rie.Stop)
	invoke := func(n int) (time.Duration, error) {
		id := fmt.Sprintf("coldstart-%s-%d-%d", strings.Fields(fn.Name)[0], k, n)
		body, _ := json.Marshal(map[string]any{"type": "OrderPlaced", "event_id": "evt_" + id, "order_id": "ord_" + id,
			"customer_id": "cus_bench", "amount_cents": 1000 + n})
		ev, _ := json.Marshal(sqsEvent([]event{{key: id, payload: body}}))
		ictx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		t0 := time.Now()
		status, out, err := rie.Invoke(ictx, ev)
		d := time.Since(t0)
		if err != nil {
			return 0, err
		}
		var resp struct {
			BatchItemFailures []struct{ ItemIdentifier string } `json:"batchItemFailures"`
		}
		if status != 200 || json.Unmarshal(out, &resp) != nil || resp.BatchItemFailures == nil || len(resp.BatchItemFailures) != 0 {
			return 0, fmt.Errorf("invoke: status %d, answer %q; emulator log:\n%s", status, out, tail(rie.Log(), 20))
		}
		return d, nil
	}
	c0, err := prx.Counts(ctx)
	if err != nil {
		return r, err
	}
	cold, err := invoke(0)
	if err != nil {
		return r, err
	}
	c1, err := prx.Counts(ctx)
	if err != nil {
		return r, err
	}
	warm, err := invoke(1)
	if err != nil {
		return r, err
	}
	r.ColdMs, r.WarmMs, r.Calls = ms(cold), ms(warm), diffCounts(c0, c1)
	// The emulator may log the end of an invoke just after answering it.
	for wait := 0; ; wait++ {
		r.InitMs, r.FirstHandlerMs, r.WarmHandlerMs, err = parseRIELog(rie.Log())
		if err == nil {
			break
		}
		if wait == 100 {
			return r, err
		}
		time.Sleep(10 * time.Millisecond)
	}
	if verbose {
		logf("coldstart %s start %d: cold %.1f ms, warm %.1f ms; emulator log:\n%s", fn.Pkg, k, r.ColdMs, r.WarmMs, tail(rie.Log(), 30))
	}
	return r, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
