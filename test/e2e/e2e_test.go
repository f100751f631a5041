package e2e

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/examples/orders"
	"github.com/idemgo/idem/internal/devserver"
)

const (
	// functionTimeout is AWS_LAMBDA_FUNCTION_TIMEOUT, whole seconds.
	functionTimeout = 3
	// leaseMargin is IDEM_LEASE_MARGIN: a killed invocation's key is free
	// functionTimeout seconds plus this after it started.
	leaseMargin = 300 * time.Millisecond
	queueARN    = "arn:aws:sqs:us-east-1:123456789012:orders"
	// holdTimeout is the timeout of a sandbox whose request a test holds in progress
	// (X-Test-Hold-File) until it has sent the request's duplicate: far longer than any
	// machine takes, so the hold ends when the test says, never by the deadline.
	holdTimeout = 120
)

// checkLease checks that a key held by an invocation sent at sent has a lease that ends at
// the invocation's deadline plus the margin: at least timeout+leaseMargin after the test sent
// the invoke (the deadline counts from when the emulator received it), and at most that long
// after the function reserved the key (UpdatedAt, by the function's own clock); both to the
// millisecond the store keeps. Bounds from events, not from how fast the machine is.
func checkLease(t *testing.T, held core.Record, sent time.Time, timeout time.Duration) {
	t.Helper()
	want := timeout + leaseMargin
	earliest, latest := sent.Add(want).Add(-time.Millisecond), held.UpdatedAt.Add(want).Add(time.Millisecond)
	if held.LeaseUntil.Before(earliest) || held.LeaseUntil.After(latest) {
		t.Errorf("lease ends at %v, want between %v (sent + %v) and %v (reserved + %v): the deadline plus the margin",
			held.LeaseUntil, earliest, want, latest, want)
	}
}

// hold returns the path of a file that does not exist yet, for the X-Test-Hold-File
// hook, and the function that creates it, ending the hold.
func hold(t *testing.T) (path string, release func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "release")
	return path, func() {
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Error(err)
		}
	}
}

// bootstraps are built once per test binary, for the host's architecture:
// the example's functions, and a Kinesis consumer that exists for these
// tests (testdata/kinesis-ledger).
var (
	buildOnce sync.Once
	buildErr  error
	bins      = map[string]string{} // function name → bootstrap
	buildDir  string
)

// functionPkgs are the packages of the functions the tests run, by name.
var functionPkgs = map[string]string{
	"orders-api":      "./examples/orders/cmd/orders-api",
	"orders-alb":      "./examples/orders/cmd/orders-alb",
	"orders-consumer": "./examples/orders/cmd/orders-consumer",
	"orders-stream":   "./examples/orders/cmd/orders-stream",
	"kinesis-ledger":  "./test/e2e/testdata/kinesis-ledger",
	// The durable functions' dispatchers: the example's, fed by SQS, and a
	// GitHub webhook's behind a function URL.
	"durable-dispatcher": "./examples/durable/dispatcher",
	"durable-webhook":    "./test/e2e/testdata/durable-webhook",
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// setup checks the environment and returns the RIE binary and the
// repository root, building the bootstraps on first use.
func setup(t *testing.T) (rie string) {
	t.Helper()
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1")
	}
	var missing []string
	for _, v := range []string{"AWS_ENDPOINT_URL_DYNAMODB", "IDEM_RIE"} {
		if os.Getenv(v) == "" {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("end-to-end tests need %s: run them with `make test` (internal/cmd/testenv sets them), or set IDEM_SKIP_INTEGRATION=1 to skip them", strings.Join(missing, " and "))
	}
	rie = os.Getenv("IDEM_RIE")
	if _, err := os.Stat(rie); err != nil {
		t.Fatalf("IDEM_RIE=%s: %v: run `make deps`", rie, err)
	}
	buildOnce.Do(func() {
		root, err := devserver.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		if buildDir, err = os.MkdirTemp("", "idem-e2e-"); err != nil {
			buildErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for name, pkg := range functionPkgs {
			dir := filepath.Join(buildDir, name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				buildErr = err
				return
			}
			if bins[name], err = devserver.BuildBootstrap(ctx, root, pkg, dir); err != nil {
				buildErr = err
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatalf("building the bootstraps: %v", buildErr)
	}
	return rie
}

// stack is one test's tables, clients and functions.
type stack struct {
	t                                   *testing.T
	rie                                 string
	db                                  *dynamodb.Client
	idemTable, ordersTable, ledgerTable string
	auditTable                          string
	sqs                                 *fakeSQS
}

func newStack(t *testing.T) *stack {
	rie := setup(t)
	ctx := t.Context()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{t: t, rie: rie, db: dynamodb.NewFromConfig(cfg)}
	prefix := strings.ToLower(strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())) + "-" + orders.NewID("")[:8]
	s.idemTable, s.ordersTable, s.ledgerTable, s.auditTable = prefix+"-idem", prefix+"-orders", prefix+"-ledger", prefix+"-audit"
	if _, err := ddbstore.CreateTable(ctx, s.db, s.idemTable); err != nil {
		t.Fatal(err)
	}
	for table, key := range map[string]string{s.ordersTable: orders.OrdersKeyAttr, s.ledgerTable: orders.LedgerKeyAttr, s.auditTable: orders.AuditKeyAttr} {
		_, err := s.db.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            aws.String(table),
			BillingMode:          types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(key), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(key), KeyType: types.KeyTypeHash}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	s.sqs = newFakeSQS(t)
	return s
}

// start runs a function's bootstrap under its own RIE instance, with a timeout of
// functionTimeout seconds and the test hooks on.
func (s *stack) start(name string) *devserver.RIE {
	s.t.Helper()
	return s.startWith(name, functionTimeout, true)
}

// startWith runs a function's bootstrap under its own RIE instance with a timeout of
// timeout seconds (AWS_LAMBDA_FUNCTION_TIMEOUT), the test hooks on or off. orders-api
// sends its messages to the stack's fake SQS.
func (s *stack) startWith(name string, timeout int, hooks bool) *devserver.RIE {
	s.t.Helper()
	return runFunction(s.t, s.rie, name, timeout, []string{
		orders.EnvIdemTable + "=" + s.idemTable,
		orders.EnvOrdersTable + "=" + s.ordersTable,
		orders.EnvLedgerTable + "=" + s.ledgerTable,
		orders.EnvAuditTable + "=" + s.auditTable,
		orders.EnvQueueURL + "=" + s.sqs.srv.URL + "/123456789012/orders",
		"AWS_ENDPOINT_URL_SQS=" + s.sqs.srv.URL,
		orders.EnvLeaseMargin + "=" + leaseMargin.String(),
		orders.EnvSafetyMargin + "=500ms",
		orders.EnvTestHooks + "=" + strconv.FormatBool(hooks),
	})
}

// runFunction runs the bootstrap of the function name under its own RIE
// instance (rie), with a timeout of timeout seconds, JSON logs at INFO and
// env; the test's cleanup stops it, showing its log if the test failed.
func runFunction(t *testing.T, rie, name string, timeout int, env []string) *devserver.RIE {
	t.Helper()
	bin, ok := bins[name]
	if !ok {
		t.Fatalf("no function %q", name)
	}
	r, err := devserver.StartRIE(t.Context(), rie, bin, append([]string{
		fmt.Sprintf("AWS_LAMBDA_FUNCTION_TIMEOUT=%d", timeout),
		"AWS_LAMBDA_FUNCTION_NAME=" + name,
		// What Lambda sets for template.yaml's LoggingConfig (LogFormat: JSON, the
		// default ApplicationLogLevel), which the functions' default logger follows.
		"AWS_LAMBDA_LOG_FORMAT=JSON",
		"AWS_LAMBDA_LOG_LEVEL=INFO",
	}, env...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log:\n%s", name, r.Log())
		}
		r.Stop()
	})
	return r
}

// invoke posts event to r and returns the raw answer.
func (s *stack) invoke(r *devserver.RIE, event any) []byte {
	s.t.Helper()
	b, err := json.Marshal(event)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(s.t.Context(), 30*time.Second)
	defer cancel()
	status, body, err := r.Invoke(ctx, b)
	if err != nil || status != http.StatusOK {
		s.t.Fatalf("invoke: status %d, %v: %s", status, err, body)
	}
	return body
}

func (s *stack) sqsBatch(r *devserver.RIE, msgs ...events.SQSMessage) []string {
	s.t.Helper()
	body := s.invoke(r, events.SQSEvent{Records: msgs})
	var resp events.SQSEventResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		s.t.Fatalf("SQS answer %s: %v", body, err)
	}
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func (s *stack) http(r *devserver.RIE, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	s.t.Helper()
	body := s.invoke(r, req)
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(body, &resp); err != nil || resp.StatusCode == 0 {
		s.t.Fatalf("API answer %s: %v", body, err)
	}
	return resp
}

// scan returns every item of table with its string attributes.
func (s *stack) scan(table string) []map[string]string {
	s.t.Helper()
	out, err := s.db.Scan(s.t.Context(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		s.t.Fatal(err)
	}
	var items []map[string]string
	for _, it := range out.Items {
		m := map[string]string{}
		for k, v := range it {
			if sv, ok := v.(*types.AttributeValueMemberS); ok {
				m[k] = sv.Value
			}
		}
		items = append(items, m)
	}
	return items
}

// ledgerByEvent counts ledger entries per event id.
func (s *stack) ledgerByEvent() map[string]int {
	n := map[string]int{}
	for _, it := range s.scan(s.ledgerTable) {
		n[it["event_id"]]++
	}
	return n
}

// storeOf returns a store over the stack's idempotency table as the function
// named function has it: the examples' functions keep their records under
// orders.KeyPrefix(function); the test's own function, kinesis-ledger, under
// no prefix.
func (s *stack) storeOf(function string) *ddbstore.Store {
	s.t.Helper()
	var opts []ddbstore.Option
	if strings.HasPrefix(function, "orders-") {
		opts = append(opts, ddbstore.WithKeyPrefix(orders.KeyPrefix(function)))
	}
	st, err := ddbstore.New(s.db, s.idemTable, opts...)
	if err != nil {
		s.t.Fatal(err)
	}
	return st
}

// waitInProgress polls function's store until key's record is in progress
// (the function has reserved it) and returns it. Polling waits for an event,
// not for time to pass; the loop is bounded.
func (s *stack) waitInProgress(function, key string) core.Record {
	s.t.Helper()
	store := s.storeOf(function)
	for range 400 {
		rec, err := store.Get(s.t.Context(), key, time.Now())
		if err == nil && rec.Status == core.StatusInProgress {
			return rec
		}
		if err != nil && !errors.Is(err, idem.ErrNotFound) {
			s.t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatalf("key %s never went in progress", idem.HashKey(key))
	return core.Record{}
}

// event returns an OrderPlaced body.
func event(id string, extra string) string {
	return fmt.Sprintf(`{"type":"OrderPlaced","event_id":%q,"order_id":"ord_%s","customer_id":"c-1","amount_cents":2500%s}`, id, id, extra)
}

func record(msgID, body string, receives int) events.SQSMessage {
	return orders.SQSRecord(msgID, body, receives, queueARN)
}

// fakeSQS answers SendMessage (JSON protocol) on 127.0.0.1 and keeps the
// bodies sent, in order. While refuse is above zero, it refuses a send with
// a non-retryable error instead, and counts refuse down.
type fakeSQS struct {
	srv    *httptest.Server
	mu     sync.Mutex
	sent   []string
	refuse int
}

func newFakeSQS(t *testing.T) *fakeSQS {
	f := &fakeSQS{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			QueueURL    string `json:"QueueUrl"`
			MessageBody string `json:"MessageBody"`
		}
		b, _ := io.ReadAll(r.Body)
		if !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".SendMessage") || json.Unmarshal(b, &in) != nil || in.MessageBody == "" {
			http.Error(w, `{"__type":"InvalidAction"}`, http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		if f.refuse > 0 {
			f.refuse--
			f.mu.Unlock()
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}`)
			return
		}
		f.sent = append(f.sent, in.MessageBody)
		n := len(f.sent)
		f.mu.Unlock()
		sum := md5.Sum([]byte(in.MessageBody))
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		fmt.Fprintf(w, `{"MessageId":"00000000-0000-4000-8000-%012d","MD5OfMessageBody":%q}`, n, hex.EncodeToString(sum[:]))
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// refuseNext makes the next n sends fail.
func (f *fakeSQS) refuseNext(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse = n
}

func (f *fakeSQS) bodies() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sent...)
}
