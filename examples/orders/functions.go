package orders

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/emf"
	idemlambda "github.com/idemgo/idem/lambda"
)

// Deps are what the functions run on. The bootstraps fill them from the
// environment (APIFromEnv, ConsumerFromEnv); the demo fills them with
// clients of local servers, the tests with in-memory parts.
type Deps struct {
	// Store keeps the idempotency records (required).
	Store idem.Store
	// Orders keeps orders (orders-api).
	Orders Orders
	// Ledger keeps ledger entries (orders-consumer).
	Ledger Ledger
	// Audit keeps audit entries (orders-stream).
	Audit Audit
	// Publisher sends OrderPlaced messages (orders-api); nil sends none.
	Publisher Publisher
	// Logger receives the runner's records, the wrappers' included (nil:
	// idem.DefaultLogger()).
	Logger *slog.Logger
	// Observer receives the runner's observations, the wrappers' included
	// (nil: none; the bootstraps give CloudWatch metrics, NewMetrics).
	Observer idem.Observer
	// LeaseMargin is the runner's lease margin (zero: idem's default).
	LeaseMargin time.Duration
	// SafetyMargin is the consumers' safety margin (negative: the
	// wrapper's default).
	SafetyMargin time.Duration
	// TestHooks turns the test hooks on.
	TestHooks bool
	// RunnerOptions are added to the runner's options (tests: a fake clock).
	RunnerOptions []idem.Option
}

func (d Deps) runner() (*idem.Runner, error) {
	if d.Store == nil {
		return nil, errors.New("orders: no idempotency store")
	}
	opts := []idem.Option{idem.WithLogger(d.Logger)}
	if d.Observer != nil {
		opts = append(opts, idem.WithObserver(d.Observer))
	}
	if d.LeaseMargin > 0 {
		opts = append(opts, idem.WithLease(d.LeaseMargin, idem.DefaultLease))
	}
	return idem.New(d.Store, append(opts, d.RunnerOptions...)...)
}

// PlaceOrder is the body of POST /orders.
type PlaceOrder struct {
	CustomerID string `json:"customer_id"` // CustomerID is required.
	Items      []Item `json:"items"`       // Items are at least one line.
}

// Placed is the body of POST /orders' 201 answer.
type Placed struct {
	OrderID     string `json:"order_id"`     // OrderID is the new order's id.
	Status      string `json:"status"`       // Status is "placed".
	AmountCents int64  `json:"amount_cents"` // AmountCents is the order's amount.
}

// NewConsumer returns orders-consumer's handler: one ledger entry per
// OrderPlaced event, made idempotent by idemlambda.SQS keyed by the body's
// event_id. Every message that does not succeed is reported (the wrapper's
// default), for the queue's redrive policy to move it to the dead-letter
// queue.
func NewConsumer(d Deps) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	if d.Ledger == nil {
		return nil, errors.New("orders: no ledger table")
	}
	r, err := d.runner()
	if err != nil {
		return nil, err
	}
	var opts []idemlambda.BatchOption
	if d.SafetyMargin >= 0 {
		opts = append(opts, idemlambda.WithSafetyMargin(d.SafetyMargin))
	}
	return idemlambda.SQS(r, LedgerAction, idemlambda.KeyFromBodyField("event_id"), func(ctx context.Context, msg events.SQSMessage) ([]byte, error) {
		return appendLedger(ctx, d, msg)
	}, opts...)
}

// errPoison is the test hook's permanent failure; errSMTP its ordinary
// error, which no classifier knows.
var (
	errPoison = errors.New("orders: poison message (test hook)")
	errSMTP   = errors.New("535 authentication failed (test hook)")
)

// warehouseDown is the outage of the test hook outage_receives: the
// warehouse answering 503, which core.HTTPStatusClassifier takes for
// transient, as it would the error of an HTTP client that reports the
// status.
type warehouseDown struct{}

func (warehouseDown) Error() string {
	return "orders: warehouse answered 503 Service Unavailable (test hook)"
}
func (warehouseDown) HTTPStatusCode() int { return 503 }

func appendLedger(ctx context.Context, d Deps, msg events.SQSMessage) ([]byte, error) {
	var ev OrderPlaced
	if err := json.Unmarshal([]byte(msg.Body), &ev); err != nil {
		return nil, core.MarkPermanent(fmt.Errorf("orders: body is not an OrderPlaced event: %w", err))
	}
	if ev.OrderID == "" {
		return nil, core.MarkPermanent(errors.New("orders: OrderPlaced without order_id"))
	}
	if d.TestHooks {
		receives, _ := strconv.Atoi(msg.Attributes["ApproximateReceiveCount"])
		if ev.SleepMs > 0 && receives <= 1 {
			time.Sleep(time.Duration(ev.SleepMs) * time.Millisecond) // deliberately deaf to ctx
		}
		if receives <= ev.OutageReceives {
			return nil, fmt.Errorf("orders: reserve stock: %w", warehouseDown{})
		}
		switch ev.Fail {
		case "poison":
			return nil, core.MarkPermanent(errPoison)
		case "error":
			// No mark, no classifier: not retried in the call, run
			// again by the next receive.
			return nil, fmt.Errorf("orders: notify the customer: %w", errSMTP)
		case "transient":
			return nil, core.MarkTransient(errors.New("orders: ledger unavailable (test hook)"))
		case "transient_once":
			if receives <= 1 {
				return nil, core.MarkTransient(errors.New("orders: ledger unavailable on first delivery (test hook)"))
			}
		}
	}
	e := Entry{EntryID: NewID("ent_"), EventID: ev.EventID, OrderID: ev.OrderID, AmountCents: ev.AmountCents, RecordedAt: time.Now().UTC()}
	if err := d.Ledger.Append(ctx, e); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]string{"entry_id": e.EntryID})
}

// orderIDPrefix starts every order id.
const orderIDPrefix = "ord_"

// OrderID returns the id of the order placed by the request whose stored
// idempotency key (idemlambda.StoredKey) is key: "ord_" and the first 16 hex
// digits of the key's downstream key for "order" (core.DownstreamKey, which
// the handler gets as idem.DownstreamKey(ctx, "order")), the same on every
// run of that request.
func OrderID(key string) string {
	return orderIDPrefix + core.DownstreamKey(key, "order")[:16]
}

// NewID returns prefix followed by 16 random hex digits.
func NewID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return prefix + hex.EncodeToString(b[:])
}

// NewLogger returns the functions' logger: idem's default (in Lambda, on
// stdout, which Lambda sends to CloudWatch Logs, in the format and from the
// level of the function's logging configuration), with the request id and
// cold start of each invocation (idemlambda.LogHandler) and the function's
// name on every record.
func NewLogger(function string) *slog.Logger {
	return slog.New(idemlambda.LogHandler(idem.DefaultLogger().Handler())).With(slog.String("function", function))
}

// ConsumerFromEnv builds orders-consumer's handler from the environment
// (ConsumerEnv) and the AWS SDK's default configuration.
func ConsumerFromEnv(ctx context.Context) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	cfg, err := ConfigFromEnv(os.Getenv, ConsumerEnv)
	if err != nil {
		return nil, err
	}
	d, err := awsDeps(ctx, cfg, "orders-consumer")
	if err != nil {
		return nil, err
	}
	return NewConsumer(d)
}

// awsDeps are the dependencies of the function named function over AWS, its
// logs and metrics (NewMetrics) on stdout; its records in the idempotency
// table are under KeyPrefix(function).
func awsDeps(ctx context.Context, cfg Config, function string) (Deps, error) {
	metrics, err := NewMetrics(os.Stdout, function)
	if err != nil {
		return Deps{}, err
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return Deps{}, fmt.Errorf("orders: AWS configuration: %w", err)
	}
	db := dynamodb.NewFromConfig(awsCfg)
	store, err := ddbstore.New(db, cfg.IdemTable, ddbstore.WithKeyPrefix(KeyPrefix(function)))
	if err != nil {
		return Deps{}, err
	}
	// A table keyed otherwise than the store expects stops the function at
	// its initialisation (Runtime.InitError), before it takes any event.
	if err := store.CheckTable(ctx); err != nil {
		return Deps{}, err
	}
	tables := DynamoTables{Client: db, OrdersTable: cfg.OrdersTable, LedgerTable: cfg.LedgerTable, AuditTable: cfg.AuditTable}
	d := Deps{
		Store: store, Orders: tables, Ledger: tables, Audit: tables, Logger: NewLogger(function), Observer: metrics,
		LeaseMargin: cfg.LeaseMargin, SafetyMargin: cfg.SafetyMargin, TestHooks: cfg.TestHooks,
	}
	if cfg.QueueURL != "" {
		d.Publisher = SQSPublisher{Client: sqs.NewFromConfig(awsCfg), QueueURL: cfg.QueueURL}
	}
	return d, nil
}

// MetricDimension is the dimension that names the function in the metrics NewMetrics
// publishes; the template's alarms on idem's verdicts select by it.
const MetricDimension = "FunctionName"

// NewMetrics returns the observer that publishes a function's calls as CloudWatch
// metrics (emf, namespace emf.DefaultNamespace) to w, with the function's name as
// MetricDimension: Lambda's AWS_LAMBDA_FUNCTION_NAME, or function outside Lambda.
func NewMetrics(w io.Writer, function string) (*emf.Emitter, error) {
	if name := os.Getenv("AWS_LAMBDA_FUNCTION_NAME"); name != "" {
		function = name
	}
	return emf.New(w, emf.WithDimension(MetricDimension, function))
}
