package linz_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/linz"
)

// envWorker, when set, makes the test binary a worker of TestProcesses:
// it runs the workload its value (a worker, JSON) describes and writes the
// entries of its history on stdout, one JSON object a line.
const envWorker = "IDEM_LINZ_WORKER"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(envWorker); cfg != "" {
		if err := runWorker(cfg); err != nil {
			fmt.Fprintln(os.Stderr, "linz worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// worker is what one process of TestProcesses runs.
type worker struct {
	Store    string // "dynamodb" or "redis"
	Table    string // dynamodb
	Addr     string // redis
	Workload linz.Workload
	Rates    linz.Rates
	StartAt  time.Time // when the workload starts, so that the processes overlap
}

func runWorker(cfg string) error {
	var w worker
	if err := json.Unmarshal([]byte(cfg), &w); err != nil {
		return err
	}
	ctx := context.Background()
	faults := linz.NewFaults(w.Workload.Seed, w.Rates)
	var target *linz.Target
	switch w.Store {
	case "dynamodb":
		client, err := linz.DynamoClient(ctx, faults)
		if err != nil {
			return err
		}
		if target, err = linz.DynamoTarget(client, "ddbstore on "+os.Getenv("IDEM_DDB_SERVER"), w.Table, "", false); err != nil {
			return err
		}
	case "redis":
		t, closeClient, err := linz.RedisTarget(w.Addr, w.Workload.Prefix+":", faults)
		if err != nil {
			return err
		}
		defer func() { _ = closeClient() }() // a client of a server the process leaves running
		target = t
	default:
		return fmt.Errorf("unknown store %q", w.Store)
	}
	time.Sleep(time.Until(w.StartAt))
	h := linz.NewHistory()
	w.Workload.Run(ctx, target, h)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for _, e := range h.Entries() {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return out.Flush()
}

// Sizes of TestProcesses (IDEM_LINZ_OPS and IDEM_LINZ_CLIENTS override
// the calls and clients of each process).
const (
	processes       = 3
	processClients  = 2
	processRunners  = 1
	processOps      = 60
	processKeys     = 3
	processStartLag = 300 * time.Millisecond
)

// TestProcesses runs workloads in several OS processes (this test binary,
// re-run as a worker) against one DynamoDB table on dynalite and one Redis
// server, each process with its own clients, connections and fake clock
// (so their clocks drift apart, as servers' do), with faults injected,
// and checks the merged history for linearizability. Timestamps of calls
// and returns come from the machine's wall clock, which the processes
// share.
func TestProcesses(t *testing.T) {
	t.Run("dynamodb", func(t *testing.T) {
		t.Parallel()
		integration(t, "AWS_ENDPOINT_URL_DYNAMODB", "run it under `go run ./internal/cmd/testenv -server dynalite`")
		if s := os.Getenv("IDEM_DDB_SERVER"); s != "dynalite" && os.Getenv("IDEM_DDB_RACES") != "1" {
			t.Skipf("IDEM_DDB_SERVER=%q: the processes race on one table, which needs a server that is atomic under concurrency "+
				"(dynalite; moto is not); set IDEM_DDB_RACES=1 to run it on this server", s)
		}
		runProcesses(t, worker{Store: "dynamodb", Table: newTable(t)})
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		integration(t, "IDEM_REDIS_ADDR", "run it under `go run ./internal/cmd/testenv -redis`")
		runProcesses(t, worker{Store: "redis", Addr: os.Getenv("IDEM_REDIS_ADDR")})
	})
}

// integration fails t when the server's variable is not set, unless
// IDEM_SKIP_INTEGRATION=1 says to skip it.
func integration(t *testing.T, env, how string) {
	t.Helper()
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1: integration test skipped")
	}
	if os.Getenv(env) == "" {
		t.Fatalf("%s is not set: %s, or set IDEM_SKIP_INTEGRATION=1 to skip the integration tests", env, how)
	}
}

func newTable(t *testing.T) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := linz.DynamoClient(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	client = dynamodb.New(client.Options(), func(o *dynamodb.Options) { o.RetryMaxAttempts = 5 }) // setup may retry
	table := "idem-linz-" + linz.RunID()
	if _, err := ddbstore.CreateTable(ctx, client, table); err != nil {
		t.Fatalf("CreateTable(%s) = %v", table, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return table
}

// runProcesses runs the processes of w and checks their merged history.
func runProcesses(t *testing.T, w worker) {
	sz := linz.Size{Clients: processClients, Ops: processOps}.FromEnv(t)
	seed := linz.Seed(t)
	start := time.Now().Truncate(time.Millisecond)
	w.Rates = linz.DefaultRates
	w.StartAt = start.Add(processStartLag)
	w.Workload = linz.Workload{Clients: sz.Clients, Runners: processRunners, Ops: sz.Ops, Keys: processKeys, KeyLife: linz.KeyLife,
		Prefix: "lp:" + linz.RunID(), Start: start}
	var mu sync.Mutex
	var entries []linz.Entry
	var wg sync.WaitGroup
	for p := range processes {
		pw := w
		pw.Workload.Seed = seed + uint64(p)
		pw.Workload.FirstClient = p * (sz.Clients + processRunners)
		cfg, err := json.Marshal(pw)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := runProcess(cfg)
			if err != nil {
				t.Errorf("process %d: %v", p, err)
			}
			mu.Lock()
			defer mu.Unlock()
			entries = append(entries, got...)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	target := &linz.Target{Name: w.Store + " in " + strconv.Itoa(processes) + " processes", Res: linz.DynamoResolution, StepsApart: true}
	if w.Store == "redis" {
		target.Res, target.StepsApart = linz.RedisResolution, false
	}
	linz.CheckHistory(t, target, start, entries, fmt.Sprintf("%s seed %d", t.Name(), seed))
	t.Logf("%s, seed %d: %d calls; %s", target.Name, seed, len(entries), linz.Summary(entries))
}

// runProcess runs this test binary as a worker of cfg and returns the
// entries it wrote.
func runProcess(cfg []byte) ([]linz.Entry, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWorker+"="+string(cfg))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, stderr.Bytes())
	}
	var entries []linz.Entry
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var e linz.Entry
		if err := dec.Decode(&e); err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	return entries, nil
}
