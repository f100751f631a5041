// Command demo runs idem's example service (examples/orders) on this machine,
// with no AWS account: `make demo`, or
//
//	go run ./cmd/demo [-memory] [-script-only] [-addr 127.0.0.1:8080] [-logs]
//
// It starts dynalite (a DynamoDB-API server, from node_modules: run `make
// deps` first) on 127.0.0.1, creates the idempotency, orders and ledger
// tables, and runs the example's two functions in this process: the same
// constructors the Lambda bootstraps call (orders.NewAPI, orders.NewConsumer),
// over the DynamoDB store. An in-memory queue stands in for SQS: orders-api
// publishes to it, and the demo delivers its messages to orders-consumer as
// SQS events. With -memory, the in-memory store and tables replace dynalite.
//
// It serves the orders API on 127.0.0.1 (translating HTTP requests into API
// Gateway HTTP API events), runs a short script against it (a new order, its
// retry, a conflicting reuse of the key, a duplicated SQS delivery), prints
// what happened, and then leaves the API up for curl until Ctrl-C (unless
// -script-only). It stops everything it started, dynalite by its PID.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/examples/orders"
	"github.com/idemgo/idem/internal/devserver"
	"github.com/idemgo/idem/memstore"
)

const queueARN = "arn:aws:sqs:us-east-1:000000000000:orders-demo"

// invocationTimeout is the deadline each emulated invocation gets.
const invocationTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// backend is where the functions keep their state.
type backend struct {
	deps        orders.Deps
	countOrders func(context.Context) (int, error)
	countLedger func(context.Context) (int, error)
	describe    string
	stop        func()
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	memory := fs.Bool("memory", false, "use the in-memory store and tables instead of dynalite")
	scriptOnly := fs.Bool("script-only", os.Getenv("IDEM_DEMO_SCRIPT_ONLY") == "1", "exit after the script (also IDEM_DEMO_SCRIPT_ONLY=1)")
	addr := fs.String("addr", "127.0.0.1:8080", "address to serve the orders API on (127.0.0.1 only; a free port is used if it is taken)")
	logs := fs.Bool("logs", false, "print the functions' JSON decision logs to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil || host != "127.0.0.1" {
		return fmt.Errorf("-addr %q: the demo serves on 127.0.0.1 only", *addr)
	}

	var b backend
	if *memory {
		b = memoryBackend()
	} else if b, err = dynaliteBackend(ctx, stdout); err != nil {
		return err
	}
	defer b.stop()
	queue := &orders.MemoryQueue{}
	b.deps.Publisher = queue
	if *logs {
		b.deps.Logger = slog.New(slog.NewJSONHandler(stderr, nil))
	}
	api, err := orders.NewAPI(b.deps)
	if err != nil {
		return err
	}
	consumer, err := orders.NewConsumer(b.deps)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s is taken; using %s instead\n", *addr, ln.Addr())
	}
	d := &demo{api: api, consumer: consumer, queue: queue, b: b, out: stdout}
	srv := &http.Server{Handler: d.mux(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "idem demo: orders API on %s (%s)\n\n", base, b.describe)

	if err := d.script(ctx, base); err != nil {
		return err
	}
	if *scriptOnly {
		return nil
	}
	fmt.Fprintf(stdout, "\nThe API stays up until Ctrl-C. Try:\n\n"+
		"  curl -i -X POST %s/orders \\\n"+
		"    -H 'Content-Type: application/json' -H \"Idempotency-Key: $(uuidgen)\" \\\n"+
		"    -d '{\"customer_id\":\"c-7\",\"items\":[{\"sku\":\"mug\",\"qty\":1,\"price_cents\":900}]}'\n\n"+
		"(run it twice with the same key to see the replay), then deliver the queued\n"+
		"OrderPlaced messages to the consumer, each twice:\n\n"+
		"  curl -s -X POST %s/_demo/deliver\n\n", base, base)
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping")
	shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return srv.Shutdown(shut)
}

func memoryBackend() backend {
	tables := &orders.MemoryTables{}
	return backend{
		deps:        orders.Deps{Store: memstore.New(), Orders: tables, Ledger: tables, SafetyMargin: -1},
		countOrders: func(context.Context) (int, error) { return len(tables.Orders()), nil },
		countLedger: func(context.Context) (int, error) { return len(tables.Entries()), nil },
		describe:    "in-memory store and tables",
		stop:        func() {},
	}
}

func dynaliteBackend(ctx context.Context, stdout io.Writer) (backend, error) {
	root, err := devserver.RepoRoot()
	if err != nil {
		return backend{}, err
	}
	srv, err := devserver.StartDynalite(ctx, root)
	if err != nil {
		if errors.Is(err, devserver.ErrNotInstalled) {
			return backend{}, fmt.Errorf("%w: run `make deps` (or use -memory)", err)
		}
		return backend{}, err
	}
	fmt.Fprintf(stdout, "started dynalite at %s (pid %d)\n", srv.Endpoint, srv.PID)
	stop := func() {
		srv.Stop()
		fmt.Fprintf(stdout, "stopped dynalite (pid %d)\n", srv.PID)
	}
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("demo", "demo", "")))
	if err != nil {
		stop()
		return backend{}, err
	}
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.Endpoint) })
	const idemTable, ordersTable, ledgerTable = "demo-idempotency", "demo-orders", "demo-ledger"
	if _, err := ddbstore.CreateTable(ctx, db, idemTable); err != nil {
		stop()
		return backend{}, err
	}
	for table, key := range map[string]string{ordersTable: orders.OrdersKeyAttr, ledgerTable: orders.LedgerKeyAttr} {
		if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            aws.String(table),
			BillingMode:          types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(key), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(key), KeyType: types.KeyTypeHash}},
		}); err != nil {
			stop()
			return backend{}, err
		}
	}
	fmt.Fprintf(stdout, "created tables %s, %s, %s\n", idemTable, ordersTable, ledgerTable)
	store, err := ddbstore.New(db, idemTable)
	if err != nil {
		stop()
		return backend{}, err
	}
	tables := orders.DynamoTables{Client: db, OrdersTable: ordersTable, LedgerTable: ledgerTable}
	count := func(table string) func(context.Context) (int, error) {
		return func(ctx context.Context) (int, error) {
			out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), Select: types.SelectCount, ConsistentRead: aws.Bool(true)})
			if err != nil {
				return 0, err
			}
			return int(out.Count), nil
		}
	}
	return backend{
		deps:        orders.Deps{Store: store, Orders: tables, Ledger: tables, SafetyMargin: -1},
		countOrders: count(ordersTable),
		countLedger: count(ledgerTable),
		describe:    "DynamoDB store on dynalite",
		stop:        stop,
	}, nil
}

type demo struct {
	api      func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
	consumer func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
	queue    *orders.MemoryQueue
	b        backend
	out      io.Writer
	messages int
}

func (d *demo) mux() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("POST /_demo/deliver", d.deliverHandler)
	m.HandleFunc("/", d.serveAPI)
	return m
}

// serveAPI translates an HTTP request into an API Gateway HTTP API event
// (payload format 2.0), invokes orders-api with a Lambda-like deadline, and
// writes its answer back.
func (d *demo) serveAPI(w http.ResponseWriter, r *http.Request) {
	ev, err := apiGatewayEvent(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), invocationTimeout)
	defer cancel()
	resp, err := d.api(ctx, ev)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for _, c := range resp.Cookies { // as API Gateway sends payload 2.0 cookies
		w.Header().Add("Set-Cookie", c)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			http.Error(w, "function answered bad base64", http.StatusBadGateway)
			return
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(body)
}

// apiGatewayEvent builds the event API Gateway would send for r: header
// names lower-cased and repeated values joined with commas, a body that is
// not UTF-8 base64-encoded.
func apiGatewayEvent(r *http.Request) (events.APIGatewayV2HTTPRequest, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 6<<20))
	if err != nil {
		return events.APIGatewayV2HTTPRequest{}, err
	}
	headers := map[string]string{}
	for k, vs := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: r.Method + " " + r.URL.Path, RawPath: r.URL.Path, RawQueryString: r.URL.RawQuery,
		Headers: headers,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: r.Method + " " + r.URL.Path, AccountID: "000000000000", Stage: "$default",
			RequestID: orders.NewID("demo-"), APIID: "demo", DomainName: r.Host,
			Time: time.Now().UTC().Format("02/Jan/2006:15:04:05 -0700"), TimeEpoch: time.Now().UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: hostOf(r.RemoteAddr), UserAgent: r.UserAgent(),
			},
		},
	}
	if utf8.Valid(body) {
		ev.Body = string(body)
	} else {
		ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	}
	return ev, nil
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

// deliver hands the queued messages to orders-consumer as one SQS batch,
// each message copies times (copies > 1 emulates SQS's at-least-once
// delivery), and returns the batch's reported failures.
func (d *demo) deliver(ctx context.Context, msgs []events.SQSMessage, copies int) ([]string, error) {
	var batch []events.SQSMessage
	for _, m := range msgs {
		for c := 0; c < copies; c++ {
			d.messages++
			batch = append(batch, orders.SQSRecord(fmt.Sprintf("demo-msg-%04d", d.messages), m.Body, 1, queueARN))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, invocationTimeout)
	defer cancel()
	resp, err := d.consumer(ctx, events.SQSEvent{Records: batch})
	if err != nil {
		return nil, err
	}
	failed := []string{}
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	return failed, nil
}

func (d *demo) deliverHandler(w http.ResponseWriter, r *http.Request) {
	msgs := d.queue.Receive(queueARN)
	failed, err := d.deliver(r.Context(), msgs, 2)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	n, err := d.b.countLedger(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"events": len(msgs), "deliveries": 2 * len(msgs), "reported_failures": failed, "ledger_entries": n})
}

type answer struct {
	status   int
	replayed string
	orderID  string
	title    string
}

func post(ctx context.Context, url, key, body string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	client := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	var b struct {
		OrderID string `json:"order_id"`
		Title   string `json:"title"`
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	_ = json.Unmarshal(raw, &b)
	return answer{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed"), orderID: b.OrderID, title: b.Title}, nil
}

// String describes the answer on one line.
func (a answer) String() string {
	s := fmt.Sprintf("%d %s", a.status, http.StatusText(a.status))
	if a.replayed != "" {
		s += ", Idempotent-Replayed: " + a.replayed
	}
	if a.orderID != "" {
		s += ", order_id " + a.orderID
	}
	if a.title != "" {
		s += ", problem: " + a.title
	}
	return s
}

// script runs the scripted sequence against the API at base and prints each
// step and a summary.
func (d *demo) script(ctx context.Context, base string) error {
	key := "demo-" + orders.NewID("")
	order := `{"customer_id":"c-42","items":[{"sku":"book","qty":2,"price_cents":1250}]}`
	retry := `{ "items": [ {"price_cents": 1250, "qty": 2, "sku": "book"} ], "customer_id": "c-42" }`
	other := `{"customer_id":"c-42","items":[{"sku":"pen","qty":1,"price_cents":99}]}`
	w := d.out
	step := 0
	say := func(format string, a ...any) {
		step++
		fmt.Fprintf(w, "step %d: %s\n", step, fmt.Sprintf(format, a...))
	}

	say("POST /orders with a new Idempotency-Key")
	first, err := post(ctx, base+"/orders", key, order)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "        -> %s\n", first)

	say("the client retries: same key, same order (keys reordered, spaces added)")
	second, err := post(ctx, base+"/orders", key, retry)
	if err != nil {
		return err
	}
	same := "no"
	if second.orderID != "" && second.orderID == first.orderID {
		same = "yes"
	}
	fmt.Fprintf(w, "        -> %s (same order: %s)\n", second, same)

	say("the same key with another order")
	third, err := post(ctx, base+"/orders", key, other)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "        -> %s\n", third)

	nOrders, err := d.b.countOrders(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "        orders in the table: %d\n", nOrders)

	msgs := d.queue.Receive(queueARN)
	say("deliver the %d queued OrderPlaced message(s) to the consumer", len(msgs))
	failed, err := d.deliver(ctx, msgs, 1)
	if err != nil {
		return err
	}
	nLedger, err := d.b.countLedger(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "        -> reported for redelivery: %s; ledger entries: %d\n", list(failed), nLedger)

	say("SQS delivers the same message again, twice in one batch (at-least-once)")
	failed, err = d.deliver(ctx, msgs, 2)
	if err != nil {
		return err
	}
	nLedger, err = d.b.countLedger(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "        -> reported for redelivery: %s; ledger entries: %d\n", list(failed), nLedger)

	ok := first.status == 201 && second.status == 201 && second.replayed == "true" && same == "yes" &&
		third.status == 422 && nOrders == 1 && nLedger == 1 && len(msgs) == 1
	fmt.Fprintf(w, "\nsummary: 3 requests -> %d order; %d deliveries -> %d ledger entry; ", nOrders, 1+2*len(msgs), nLedger)
	if ok {
		fmt.Fprintln(w, "no duplicate side effects")
		return nil
	}
	fmt.Fprintln(w, "UNEXPECTED: see the steps above")
	return errors.New("the script did not go as expected")
}

func list(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	sort.Strings(ids)
	return strings.Join(ids, ", ")
}
