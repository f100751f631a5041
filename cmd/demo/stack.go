package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/examples/orders"
	"github.com/idemgo/idem/internal/devserver"
	"github.com/idemgo/idem/internal/esm"
)

// The demo's resources.
const (
	idemTable, ordersTable, ledgerTable = "demo-idempotency", "demo-orders", "demo-ledger"
	queueName                           = "orders-demo"
	// visibilityTimeout is the queue's visibility timeout, short so that the redeliveries
	// of the script take seconds.
	visibilityTimeout = 2 * time.Second
	// maxReceiveCount is the queue's redrive policy: receives before the dead-letter queue.
	maxReceiveCount = 2
	// functionTimeout is the consumer's timeout (at most the visibility timeout, as Lambda
	// requires), and safetyMargin its wrapper's safety margin.
	functionTimeout = 2 * time.Second
	safetyMargin    = 500 * time.Millisecond
	// pollWait is the event source mapping's long poll.
	pollWait = time.Second
)

// notInstalledError reports that the local servers are not installed.
type notInstalledError struct{ err error }

func (e *notInstalledError) Error() string { return e.err.Error() }
func (e *notInstalledError) Unwrap() error { return e.err }

// help says what to run.
func (e *notInstalledError) help() string {
	return "demo: the local servers are not installed (" + e.err.Error() + ").\n" +
		"Run `make demo`, which installs them first, or run `make deps` once and then `go run ./cmd/demo`."
}

// stack is the demo's servers, clients and functions.
type stack struct {
	out     io.Writer
	logger  *slog.Logger
	root    string
	binDir  string // where the idem command is built
	idemBin string
	servers []*devserver.Server
	db      *dynamodb.Client
	sqs     *sqs.Client
	q       esm.Queues
	api     func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
	deps    orders.Deps // the functions' dependencies, for a new deployment of the consumer
	// poisonBody is the body of the script's poison message, left in the dead-letter queue.
	poisonBody string

	// consumer is the deployed orders-consumer; fix replaces it.
	consumer atomic.Pointer[func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)]
	mu       sync.Mutex
	verdicts []idem.Verdict // of the consumer's calls since the last batch
}

// startStack starts the servers, creates the tables and queues, builds the idem command and
// the functions. On error it stops what it started.
func startStack(ctx context.Context, out, logOut io.Writer, logs bool, binDir string) (_ *stack, err error) {
	st := &stack{out: out}
	if logs {
		st.logger = slog.New(slog.NewJSONHandler(logOut, nil))
	}
	if st.root, err = devserver.RepoRoot(); err != nil {
		return nil, err
	}
	if binDir == "" {
		binDir = filepath.Join(st.root, ".cache", "bin")
	}
	if st.binDir, err = filepath.Abs(binDir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			st.stop()
		}
	}()
	fmt.Fprintf(out, "starting dynalite and moto on 127.0.0.1 and building the idem command into %s "+
		"(the first time, moto and the build take a while)\n", st.binDir)
	if err := st.startServers(ctx); err != nil {
		return nil, err
	}
	if err := st.createTables(ctx); err != nil {
		return nil, err
	}
	if st.q, err = esm.CreateQueues(ctx, st.sqs, queueName, esm.QueueConfig{VisibilityTimeout: visibilityTimeout, MaxReceiveCount: maxReceiveCount}); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "created queue %s (visibility timeout %v, maxReceiveCount %d) and its dead-letter queue %s-dlq\n",
		queueName, visibilityTimeout, maxReceiveCount, queueName)
	return st, st.functions()
}

// startServers starts dynalite and moto and builds the idem command, at the same time.
// moto's first start on a fresh machine takes several seconds; the go build of the idem
// command as long, the first time.
func (st *stack) startServers(ctx context.Context) error {
	var dyn, moto *devserver.Server
	var dynErr, motoErr, buildErr error
	var wg sync.WaitGroup
	wg.Add(3)
	// The servers outlive an interrupt: stop stops them, in order, after the demo's own
	// shutdown (and they get SIGTERM should the demo die).
	srvCtx := context.WithoutCancel(ctx)
	go func() { defer wg.Done(); dyn, dynErr = devserver.StartDynalite(srvCtx, st.root) }()
	go func() { defer wg.Done(); moto, motoErr = devserver.StartMoto(srvCtx, st.root) }()
	go func() { defer wg.Done(); st.idemBin, buildErr = buildIdem(ctx, st.root, st.binDir) }()
	wg.Wait()
	if dynErr != nil || motoErr != nil || buildErr != nil {
		for _, s := range []*devserver.Server{dyn, moto} {
			if s != nil {
				_ = s.Stop() // the start-up error below is the one to report
			}
		}
	} else {
		st.servers = []*devserver.Server{dyn, moto}
	}
	var missing []string
	for _, err := range []error{dynErr, motoErr} {
		if errors.Is(err, devserver.ErrNotInstalled) {
			missing = append(missing, err.Error())
		}
	}
	if len(missing) > 0 {
		return &notInstalledError{errors.New(strings.Join(missing, "; "))}
	}
	if err := errors.Join(dynErr, motoErr, buildErr); err != nil {
		return err
	}
	fmt.Fprintf(st.out, "started dynalite at %s (pid %d)\nstarted moto at %s (pid %d)\nbuilt the idem command: %s\n",
		dyn.Endpoint, dyn.PID, moto.Endpoint, moto.PID, st.idemBin)
	creds := credentials.NewStaticCredentialsProvider("demo", "demo", "")
	st.db = dynamodb.New(dynamodb.Options{Region: "us-east-1", Credentials: creds, BaseEndpoint: aws.String(dyn.Endpoint)})
	st.sqs = sqs.New(sqs.Options{Region: "us-east-1", Credentials: creds, BaseEndpoint: aws.String(moto.Endpoint)})
	return nil
}

// buildIdem builds cmd/idem into dir and returns the binary's path.
func buildIdem(ctx context.Context, root, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "idem")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/idem")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the idem command: %w\n%s", err, out)
	}
	return bin, nil
}

// stop stops the servers by their PIDs.
func (st *stack) stop() {
	for i := len(st.servers) - 1; i >= 0; i-- {
		s := st.servers[i]
		if err := s.Stop(); err != nil {
			fmt.Fprintf(st.out, "stopped %s (pid %d): %v\n", s.Name, s.PID, err)
			continue
		}
		fmt.Fprintf(st.out, "stopped %s (pid %d)\n", s.Name, s.PID)
	}
	st.servers = nil
}

func (st *stack) createTables(ctx context.Context) error {
	if _, err := ddbstore.CreateTable(ctx, st.db, idemTable); err != nil {
		return err
	}
	for table, key := range map[string]string{ordersTable: orders.OrdersKeyAttr, ledgerTable: orders.LedgerKeyAttr} {
		if _, err := st.db.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            aws.String(table),
			BillingMode:          types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(key), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(key), KeyType: types.KeyTypeHash}},
		}); err != nil {
			return err
		}
	}
	fmt.Fprintf(st.out, "created tables %s, %s, %s\n", idemTable, ordersTable, ledgerTable)
	return nil
}

// functions builds orders-api (sending to the queue) and orders-consumer (with its test
// hooks on, so that a message can be poison), over the DynamoDB store.
func (st *stack) functions() error {
	store, err := ddbstore.New(st.db, idemTable)
	if err != nil {
		return err
	}
	tables := orders.DynamoTables{Client: st.db, OrdersTable: ordersTable, LedgerTable: ledgerTable}
	d := orders.Deps{Store: store, Orders: tables, Ledger: tables, Logger: st.logger, SafetyMargin: safetyMargin,
		Publisher: orders.SQSPublisher{Client: st.sqs, QueueURL: st.q.URL}}
	st.deps = d
	if st.api, err = orders.NewAPI(d); err != nil {
		return err
	}
	return st.deployConsumer(d, true)
}

// deployConsumer makes a consumer with the test hooks on or off the one the event source
// mapping invokes. Its runner reports each call's verdict to the demo.
func (st *stack) deployConsumer(d orders.Deps, hooks bool) error {
	d.TestHooks = hooks
	d.RunnerOptions = []idem.Option{idem.WithObserver(idem.ObserverFunc(func(_ context.Context, o idem.Observation) {
		st.mu.Lock()
		defer st.mu.Unlock()
		st.verdicts = append(st.verdicts, o.Verdict)
	}))}
	c, err := orders.NewConsumer(d)
	if err != nil {
		return err
	}
	st.consumer.Store(&c)
	return nil
}

// takeVerdicts returns the consumer's verdicts since the last call.
func (st *stack) takeVerdicts() []idem.Verdict {
	st.mu.Lock()
	defer st.mu.Unlock()
	v := st.verdicts
	st.verdicts = nil
	return v
}

// newPoller returns the event source mapping from the queue to the deployed consumer.
func (st *stack) newPoller(ctx context.Context, observe func(esm.Batch)) (*esm.Poller, error) {
	fn := esm.Handler(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return (*st.consumer.Load())(ctx, ev)
	})
	opts := []esm.Option{esm.WithReportBatchItemFailures(), esm.WithFunctionTimeout(functionTimeout), esm.WithWaitTime(pollWait)}
	if observe != nil {
		opts = append(opts, esm.WithObserver(observe))
	}
	return esm.New(ctx, st.sqs, st.q.URL, fn, opts...)
}

// count returns the number of items in table.
func (st *stack) count(ctx context.Context, table string) (int, error) {
	out, err := st.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), Select: types.SelectCount, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return 0, err
	}
	return int(out.Count), nil
}
