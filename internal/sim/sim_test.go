package sim_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/sim"
	"github.com/idemgo/idem/memstore"
	"github.com/idemgo/idem/redisstore"
)

var (
	seedFlag = flag.Uint64("sim.seed", 0, "replay this seed (also IDEM_SIM_SEED); 0: each test's own seed")
	nFlag    = flag.Int("sim.n", 0, "deliveries per run (0: each test's own number)")
)

// seed returns the seed to run: -sim.seed, IDEM_SIM_SEED, or def.
func seed(t *testing.T, def uint64) uint64 {
	t.Helper()
	if *seedFlag != 0 {
		return *seedFlag
	}
	if v := os.Getenv("IDEM_SIM_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("IDEM_SIM_SEED=%q: %v", v, err)
		}
		return n
	}
	return def
}

// deliveries returns the number of deliveries of a run: -sim.n, or n scaled
// down under the race detector and -short.
func deliveries(n int) int {
	switch {
	case *nFlag > 0:
		return *nFlag
	case raceEnabled:
		return max(n/10, 1000)
	case testing.Short():
		return max(n/5, 1000)
	}
	return n
}

func memConfig(t *testing.T, def uint64, n int, f sim.Faults, services ...sim.Service) sim.Config {
	return sim.Config{
		Seed: seed(t, def), Deliveries: deliveries(n), Services: services, Faults: f,
		NewStore: func() idem.Store { return memstore.New() }, MaxViolations: 1 << 30,
	}
}

// run runs cfg and fails t with every violation found, and how to replay it.
func run(t *testing.T, cfg sim.Config) sim.Result {
	t.Helper()
	return runWith(t, cfg, "")
}

// runWith is run with a command prefix for the replay hint.
func runWith(t *testing.T, cfg sim.Config, prefix string) sim.Result {
	t.Helper()
	start := time.Now()
	res, err := sim.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d: %d deliveries, %d steps, %v simulated, in %v; hash %016x",
		res.Seed, res.Deliveries, res.Steps, res.SimTime.Round(time.Second), time.Since(start).Round(time.Millisecond), res.Hash)
	t.Logf("stats: %+v", res.Stats)
	for _, v := range res.Violations {
		t.Error(v.Error())
	}
	if res.ViolationCount > 0 {
		t.Errorf("%d violations (the first of each invariant above); replay with:\n  %sgo test ./internal/sim -run '^%s$' -sim.seed=%d -sim.n=%d\n  (or IDEM_SIM_SEED=%d)",
			res.ViolationCount, prefix, t.Name(), res.Seed, cfg.Deliveries, res.Seed)
	}
	return res
}

// TestSim runs every service at once over one in-memory store, with every
// fault.
func TestSim(t *testing.T) {
	cfg := memConfig(t, 1, 100000, sim.AllFaults(), sim.Mixed()...)
	cfg.Draw = 8
	res := run(t, cfg)
	if res.Stats.CommitRefused == 0 {
		t.Errorf("no commit refused in %d deliveries: the run does not exercise it", res.Deliveries)
	}
	if res.Stats.Unclassified == 0 {
		t.Errorf("no call failed with an unclassified error in %d deliveries: the run does not exercise them", res.Deliveries)
	}
}

// TestSimShortRetention: records retained one minute, leases of 15 minutes.
func TestSimShortRetention(t *testing.T) {
	run(t, memConfig(t, 2, 5000, sim.DefaultFaults(), sim.ShortRetention()))
}

// TestSimNoDeadline: no deadline, in-process retries, long handlers. No
// crashes and a generous attempt bound, so that only the lease is at stake.
func TestSimNoDeadline(t *testing.T) {
	sv := sim.NoDeadlineRetries()
	sv.MaxAttempts = 1000
	f := sim.DefaultFaults()
	f.Crash, f.LostAnswer = 0, 0
	run(t, memConfig(t, 3, 5000, f, sv))
}

// TestSimMaxAttemptsWithCrashes: WithMaxAttempts(3) with in-process retries
// and processes that die.
func TestSimMaxAttemptsWithCrashes(t *testing.T) {
	f := sim.DefaultFaults()
	f.Crash, f.LostAnswer = 0.03, 0
	run(t, memConfig(t, 4, 5000, f, sim.MaxAttempts3()))
}

// TestSimCancellation: callers that hang up while their call runs.
func TestSimCancellation(t *testing.T) {
	sv := sim.HTTPService()
	sv.ClientCancel = 0.3
	f := sim.DefaultFaults()
	f.LostAnswer = 0
	run(t, memConfig(t, 5, 5000, f, sv))
}

// TestSimLostAnswers: store writes applied whose answers are lost, so the
// runner retries writes that took effect.
func TestSimLostAnswers(t *testing.T) {
	f := sim.DefaultFaults()
	f.LostAnswer = 0.1
	run(t, memConfig(t, 6, 5000, f, sim.Conservative()))
}

// TestSimConservative runs a configuration that avoids every known defect,
// with crashes, kills, throttling, timeouts and skewed clocks: no invariant
// may break, and every fault must have happened. Under the race detector
// it keeps 5,000 deliveries: the rarest events (a stale completion, an
// overrun overlap) come about once in a thousand.
func TestSimConservative(t *testing.T) {
	f := sim.DefaultFaults()
	f.LostAnswer = 0
	cfg := memConfig(t, 7, 20000, f, sim.Conservative())
	if raceEnabled && *nFlag == 0 {
		cfg.Deliveries = 5000
	}
	res := run(t, cfg)
	st := res.Stats
	for name, n := range map[string]int{
		"crashes": st.Crashes, "kills": st.Kills, "throttles": st.Throttles, "timeouts": st.Timeouts,
		"take-overs": st.TakeOvers, "replays": st.Replays, "in progress": st.InProgress, "key reuses": st.KeyReused,
		"transient failures": st.Transient, "permanent failures": st.Permanent, "redeliveries": st.Redeliveries,
		"stale completions refused": st.StaleRefused, "overrun overlaps": st.OverrunOverlaps,
	} {
		if n == 0 {
			t.Errorf("no %s in %d deliveries: the run does not exercise them", name, res.Deliveries)
		}
	}
}

// TestSimDeterministic runs a seed twice: the runs must be identical, step
// by step; another seed must make another run.
func TestSimDeterministic(t *testing.T) {
	cfg := memConfig(t, 8, 3000, sim.DefaultFaults(), sim.Mixed()...)
	cfg.MaxViolations = 1 << 30
	var results [2]sim.Result
	for i := range results {
		r, err := sim.Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		results[i] = r
	}
	a, b := results[0], results[1]
	if a.Hash != b.Hash || a.Steps != b.Steps || a.Stats != b.Stats || a.ViolationCount != b.ViolationCount {
		t.Errorf("seed %d ran twice: hash %016x, %d steps, %d violations, %+v\nthen hash %016x, %d steps, %d violations, %+v",
			cfg.Seed, a.Hash, a.Steps, a.ViolationCount, a.Stats, b.Hash, b.Steps, b.ViolationCount, b.Stats)
	}
	cfg.Seed++
	c, err := sim.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.Hash == a.Hash {
		t.Errorf("seeds %d and %d made the same run (hash %016x)", cfg.Seed-1, cfg.Seed, a.Hash)
	}
}

// unfenced is a store that forgets the fencing token on completion: it must
// be caught.
type unfenced struct{ *memstore.Store }

func (u unfenced) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	cur, err := u.Get(ctx, rec.Key, rec.UpdatedAt)
	if err == nil && cur.Status == core.StatusInProgress && cur.LeaseToken != rec.LeaseToken {
		rec.LeaseToken = cur.LeaseToken // the bug: any holder may complete
	}
	return u.Store.Complete(ctx, rec)
}

// TestSimCatchesUnfencedStore checks the checker: a store that lets a stale
// holder complete must break the fencing invariant.
func TestSimCatchesUnfencedStore(t *testing.T) {
	f := sim.DefaultFaults()
	f.LostAnswer = 0
	sv := sim.Conservative()
	sv.Overrun = 0.2 // many stale holders
	cfg := memConfig(t, 9, 20000, f, sv)
	cfg.NewStore = func() idem.Store { return unfenced{memstore.New()} }
	res, err := sim.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		if v.Invariant == sim.Fencing || v.Invariant == sim.OneSuccess {
			t.Logf("caught, as it must be:\n%v", v)
			return
		}
	}
	t.Errorf("seed %d: a store without fencing went unnoticed in %d deliveries (violations: %v)", cfg.Seed, res.Deliveries, res.Violations)
}

// TestSimDynalite runs every service over the DynamoDB store on the server
// at AWS_ENDPOINT_URL_DYNAMODB (dynalite under internal/cmd/testenv).
func TestSimDynalite(t *testing.T) {
	dynamoEndpoint(t)
	store := newDynamoStore(t)
	cfg := memConfig(t, 10, 2000, sim.DefaultFaults(), sim.Mixed()...)
	if !raceEnabled && *nFlag == 0 {
		cfg.Deliveries = 2000
	}
	cfg.NewStore = func() idem.Store { return store }
	cfg.StoreResolution = time.Second
	cfg.OmitAbove = ddbstore.MaxItemSize / 2 // without a blob store, large results may not fit
	runWith(t, cfg, "go run ./internal/cmd/testenv -server dynalite -- ")
}

// TestSimRedis runs every service over the Redis store on the server at
// IDEM_REDIS_ADDR (Redis under internal/cmd/testenv -redis).
func TestSimRedis(t *testing.T) {
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1: Redis integration test skipped")
	}
	addr := os.Getenv("IDEM_REDIS_ADDR")
	if addr == "" {
		t.Fatal("no Redis server: run `go run ./internal/cmd/testenv -server none -redis -- go test ./internal/sim/...` " +
			"(or set IDEM_REDIS_ADDR), or set IDEM_SKIP_INTEGRATION=1 to skip the integration tests")
	}
	client := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = client.Close() })
	var b [4]byte
	_, _ = rand.Read(b[:])
	store, err := redisstore.New(client, redisstore.WithPrefix("sim:"+hex.EncodeToString(b[:])+":"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := memConfig(t, 11, 5000, sim.DefaultFaults(), sim.Mixed()...)
	if !raceEnabled && *nFlag == 0 {
		cfg.Deliveries = 5000
	}
	cfg.NewStore = func() idem.Store { return store }
	cfg.StoreResolution = time.Millisecond
	cfg.OmitAbove = redisstore.DefaultMaxRecordSize / 2 // large results may not fit
	runWith(t, cfg, "go run ./internal/cmd/testenv -server none -redis -- ")
}

// dynamoEndpoint fails t when no DynamoDB endpoint is configured, unless
// IDEM_SKIP_INTEGRATION=1 says to skip it.
func dynamoEndpoint(t *testing.T) {
	t.Helper()
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1: DynamoDB integration test skipped")
	}
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Fatal("no DynamoDB endpoint: run `go run ./internal/cmd/testenv -server dynalite -- go test ./internal/sim/...` " +
			"(or set AWS_ENDPOINT_URL_DYNAMODB to a DynamoDB API), or set IDEM_SKIP_INTEGRATION=1 to skip the integration tests")
	}
}

func newDynamoStore(t *testing.T) *ddbstore.Store {
	t.Helper()
	client := newDynamoClient(t)
	s, err := ddbstore.New(client, newTable(t, client, "idem-sim-"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newDynamoClient returns a client of the DynamoDB API the environment
// names, which does not retry.
func newDynamoClient(t *testing.T) *dynamodb.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatalf("load AWS config: %v", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	return dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
}

// retrying returns client as a client that retries like a default one, for
// the setup and the checks around the store under test, which are not under
// test: moto may cut a response (use of closed network connection) even on
// a fresh connection.
func retrying(client *dynamodb.Client) *dynamodb.Client {
	return dynamodb.New(client.Options(), func(o *dynamodb.Options) { o.RetryMaxAttempts = 5 })
}

// newTable creates a table of the store's layout, named prefix and a random
// suffix, deleted when t ends.
func newTable(t *testing.T, client *dynamodb.Client, prefix string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b [4]byte
	_, _ = rand.Read(b[:])
	table := prefix + hex.EncodeToString(b[:])
	client = retrying(client)
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
