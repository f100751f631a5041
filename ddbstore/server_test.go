package ddbstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/storetest"
)

// The integration tests talk to the DynamoDB API at the endpoint the SDK's
// own configuration names (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL),
// which internal/cmd/testenv sets after starting dynalite or moto.
// IDEM_DDB_SERVER names the server ("dynalite", "moto"; anything else or
// unset is taken as DynamoDB itself or LocalStack) for the few checks that
// depend on it.

// server returns IDEM_DDB_SERVER.
func server() string { return os.Getenv("IDEM_DDB_SERVER") }

// returnsAllOld reports whether the server returns the blocking item with a
// failed condition (ReturnValuesOnConditionCheckFailure=ALL_OLD); dynalite
// ignores the parameter.
func returnsAllOld() bool { return server() != "dynalite" }

// atomicServer reports whether the server applies conditional writes
// atomically under concurrency. moto does not: measured with moto 5.2.5, 64
// goroutines racing a conditional PutItem on one key had two winners in
// about one race in ten (TestReserveRaceRounds with IDEM_DDB_RACES=1 failed
// at round 8; storetest's ReserveRace failed 3 times and TakeoverRace once
// in 20 runs each).
func atomicServer() bool { return server() != "moto" }

// serialized is an idem.Store that makes one call at a time, for running
// the conformance suite on a server that is not atomic under concurrency:
// there its race subtests check the store's logic (one winner, the others
// holding the winner's token) but not the server's atomicity, which the
// dynalite runs check.
type serialized struct {
	mu sync.Mutex
	s  idem.Store
}

func (s *serialized) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.s.Reserve(ctx, rec, prev, now)
}

func (s *serialized) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.s.Complete(ctx, rec)
}

func (s *serialized) Acquire(ctx context.Context, rec core.Record, now time.Time, p core.Policy) (core.Record, *core.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.s.(idem.Acquirer).Acquire(ctx, rec, now, p)
}

func (s *serialized) Get(ctx context.Context, key string, now time.Time) (core.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.s.Get(ctx, key, now)
}

func (s *serialized) RecordStep(ctx context.Context, key, leaseToken string, step core.Step, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.s.(idem.StepRecorder).RecordStep(ctx, key, leaseToken, step, now)
}

func (s *serialized) Downgrade(ctx context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.s.(storetest.PreviousEncoding).Downgrade(ctx, key)
}

// previous is f's store, able to rewrite a record in the store's previous
// encoding (storetest.PreviousEncoding, with Store.Downgrade): without
// attempts_carried, which in-progress records and retryable failures did
// not have before the one-write Acquire, and with its steps kept in the
// record, as they were before step items.
type previous struct {
	*ddbstore.Store
}

// conformanceStore returns the store to give storetest.Run: f's store
// (able to write the previous encoding), or on a server that is not atomic
// under concurrency, that store serialized.
func conformanceStore(t *testing.T, f *fixture) idem.Store {
	p := &previous{Store: f.store}
	if atomicServer() {
		return p
	}
	t.Logf("%s does not apply conditional writes atomically under concurrency: the suite's calls are serialized", server())
	return &serialized{s: p}
}

// integration fails the test when no DynamoDB endpoint is configured, unless
// IDEM_SKIP_INTEGRATION=1 says to skip it: never a silent skip.
func integration(t *testing.T) {
	t.Helper()
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1: DynamoDB integration test skipped")
	}
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Fatal("no DynamoDB endpoint: run `go run ./internal/cmd/testenv -server dynalite -- go test ./ddbstore/...` " +
			"(or set AWS_ENDPOINT_URL_DYNAMODB to a DynamoDB API), or set IDEM_SKIP_INTEGRATION=1 to skip the integration tests")
	}
}

// heavy skips, with a reason, the race tests that need a server known to
// apply conditional writes atomically under concurrency.
func heavy(t *testing.T) {
	t.Helper()
	integration(t)
	if server() != "dynalite" && os.Getenv("IDEM_DDB_RACES") != "1" {
		t.Skipf("heavy race test runs on dynalite (IDEM_DDB_SERVER=%q; moto is not atomic under concurrency); set IDEM_DDB_RACES=1 to run it on this server", server())
	}
}

// recorder counts DynamoDB operations by name and injects faults: its own
// rules (inject), and where none applies, what kit (storetest's script, if
// set) says. It is an http.RoundTripper put under the SDK's HTTP client.
// Safe for concurrent use.
type recorder struct {
	inner http.RoundTripper
	kit   *storetest.Faults // set before use, never changed

	mu     sync.Mutex
	counts map[string]int // guarded by mu
	faults []*fault       // guarded by mu
	shapes int            // guarded by mu: kit faults injected, for their turn of shape
}

// faultKind is what an injected fault looks like to the SDK.
type faultKind int

const (
	throttle      faultKind = iota + 1 // 400 ProvisionedThroughputExceededException
	throttleOther                      // 400 ThrottlingException
	serverError                        // 500 InternalServerError
	unavailable                        // 503 with an empty body
	reset                              // connection reset by peer
	timeout                            // i/o timeout
	refused                            // connection refused (a failed dial: certainly not sent)
	cutShort                           // the reply's body cut short: the server's (After), else a throttle's
)

func (k faultKind) String() string {
	return [...]string{"", "throttle", "throttling", "500", "503", "reset", "timeout", "refused", "cut short"}[k]
}

// kitOps are the kinds of request, for storetest.Faults, of the DynamoDB
// operations the store makes.
var kitOps = map[string]storetest.Op{"GetItem": storetest.Read, "BatchGetItem": storetest.Read, "PutItem": storetest.Write, "UpdateItem": storetest.Write}

// kitFaults are the faults of storetest in DynamoDB's shapes, taken in
// turn by the requests that get the fault: a failed dial; a request
// applied whose answer times out, or whose answer (whatever its status) is
// cut short; throttling as DynamoDB answers it (HTTP 400 with
// ProvisionedThroughputExceededException), whole or cut short; a request
// that times out unsent, as the HTTP client's own timeout fails it.
var kitFaults = map[storetest.Fault][]fault{
	storetest.FailBefore: {{Kind: refused}},
	storetest.AnswerLost: {{Kind: timeout, After: true}, {Kind: cutShort, After: true}},
	storetest.Throttled:  {{Kind: throttle}, {Kind: cutShort}},
	storetest.TimedOut:   {{Kind: timeout}},
}

// fault is a rule: for requests of Op whose body contains Match, inject Kind
// before the request is sent, or After the server answered it, Times times
// (negative: always).
type fault struct {
	Op    string
	Match string
	After bool
	Kind  faultKind
	Times int
}

func newRecorder() *recorder {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 256
	// Close idle connections before the server does (Node's default
	// keep-alive timeout, dynalite's, is 5 s): a request sent on a
	// connection the server is closing fails with a reset, and the tests
	// that do not let the SDK retry would see it.
	tr.IdleConnTimeout = 2 * time.Second
	return &recorder{inner: tr, counts: map[string]int{}}
}

func (r *recorder) inject(f fault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, &f)
}

func (r *recorder) clearFaults() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = nil
}

// count returns the number of requests of op made so far (faulted ones
// included).
func (r *recorder) count(op string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[op]
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts = map[string]int{}
}

// operation is req's DynamoDB operation: X-Amz-Target without its prefix.
func operation(req *http.Request) string {
	op := req.Header.Get("X-Amz-Target")
	return op[strings.LastIndexByte(op, '.')+1:]
}

// buffered reads body whole and returns its bytes and a body of the same
// bytes to put in its place (nil for none).
func buffered(body io.ReadCloser) ([]byte, io.ReadCloser, error) {
	if body == nil {
		return nil, nil, nil
	}
	b, err := io.ReadAll(body)
	_ = body.Close()
	if err != nil {
		return nil, nil, err
	}
	return b, io.NopCloser(bytes.NewReader(b)), nil
}

// bufferRequest reads req's body whole, puts the same bytes back, and
// returns them.
func bufferRequest(req *http.Request) ([]byte, error) {
	body, rb, err := buffered(req.Body)
	if rb != nil {
		req.Body = rb
	}
	return body, err
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	op := operation(req)
	body, err := bufferRequest(req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.counts[op]++
	var hit *fault
	for _, f := range r.faults {
		if f.Times != 0 && f.Op == op && bytes.Contains(body, []byte(f.Match)) {
			hit = f
			if f.Times > 0 {
				f.Times--
			}
			break
		}
	}
	r.mu.Unlock()
	if kop, ok := kitOps[op]; ok && hit == nil {
		hit = r.kitFault(r.kit.Next(kop))
	}
	if hit == nil {
		return r.inner.RoundTrip(req)
	}
	var answer []byte
	var resp *http.Response
	if hit.After {
		if resp, err = r.inner.RoundTrip(req); err != nil {
			return nil, err
		}
		answer, _ = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
	}
	return injected(req, hit.Kind, resp, answer)
}

// kitFault is the fault, in its next shape, that stands for f (nil for
// none).
func (r *recorder) kitFault(f storetest.Fault) *fault {
	shapes := kitFaults[f]
	if len(shapes) == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shapes++
	hit := shapes[r.shapes%len(shapes)]
	return &hit
}

// injected is what the client gets for req under a fault of kind: resp,
// the server's answer with its body answer, where the request was sent.
func injected(req *http.Request, kind faultKind, resp *http.Response, answer []byte) (*http.Response, error) {
	switch kind {
	case reset:
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	case timeout:
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	case refused:
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	case throttle:
		return jsonError(req, 400, "ProvisionedThroughputExceededException", "injected: throughput exceeded"), nil
	case throttleOther:
		return jsonError(req, 400, "ThrottlingException", "injected: rate exceeded"), nil
	case serverError:
		return jsonError(req, 500, "InternalServerError", "injected: internal server error"), nil
	case unavailable:
		return &http.Response{StatusCode: 503, Status: "503 Service Unavailable", Header: http.Header{},
			Body: io.NopCloser(strings.NewReader("")), Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
	case cutShort:
		if resp == nil {
			resp = jsonError(req, 400, "ThrottlingException", "injected: rate exceeded, reply cut short")
			answer, _ = io.ReadAll(resp.Body)
		}
		// The status line and headers (Content-Length included) arrive;
		// the connection ends halfway through the body, as net/http
		// reports it.
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(answer[:len(answer)/2]), errReader{io.ErrUnexpectedEOF}))
		resp.ContentLength = int64(len(answer))
		return resp, nil
	}
	return nil, errors.New("unknown fault kind")
}

// errReader fails every read with its error.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func jsonError(req *http.Request, status int, code, msg string) *http.Response {
	body := fmt.Sprintf(`{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":%q}`, code, msg)
	h := http.Header{}
	h.Set("Content-Type", "application/x-amz-json-1.0")
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), Header: h,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req, ProtoMajor: 1, ProtoMinor: 1}
}

// newClient returns a DynamoDB client configured from the environment whose
// requests go through rec, with the SDK's retries set to attempts (1: none).
func newClient(t testing.TB, rec *recorder, attempts int) *dynamodb.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatalf("load AWS config: %v", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: rec}
		o.RetryMaxAttempts = attempts
	})
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// tableName returns a table name of its own for t.
func tableName(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := unsafeChars.ReplaceAllString(t.Name(), "-")
	if len(name) > 80 {
		name = name[:80]
	}
	return fmt.Sprintf("idem-%s-%s", name, hex.EncodeToString(b[:]))
}

// newTable creates a table of its own for t with CreateTable and deletes it
// when t ends.
func newTable(t testing.TB, client *dynamodb.Client, opts ...ddbstore.Option) (string, ddbstore.TableInfo) {
	t.Helper()
	table := tableName(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Setup is not under test, and moto may cut a response even on a
	// fresh connection (use of closed network connection): the table is
	// created and deleted through the client's configuration with retries,
	// whatever the client under test allows itself.
	setup := dynamodb.New(client.Options(), func(o *dynamodb.Options) { o.RetryMaxAttempts = 5 })
	info, err := ddbstore.CreateTable(ctx, setup, table, opts...)
	if err != nil {
		t.Fatalf("CreateTable(%s) = %v", table, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = setup.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return table, info
}

// fixture is a store on a table of its own, with the recorder under its
// client.
type fixture struct {
	rec    *recorder
	client *dynamodb.Client
	table  string
	info   ddbstore.TableInfo
	store  *ddbstore.Store
}

func newFixture(t testing.TB, opts ...ddbstore.Option) *fixture {
	t.Helper()
	f := &fixture{rec: newRecorder()}
	f.client = newClient(t, f.rec, 1)
	f.table, f.info = newTable(t, f.client, opts...)
	s, err := ddbstore.New(f.client, f.table, opts...)
	if err != nil {
		t.Fatal(err)
	}
	f.store = s
	f.rec.reset()
	return f
}
