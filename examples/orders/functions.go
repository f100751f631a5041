package orders

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
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
	// Logger receives the runner's and the wrapper's JSON logs (nil: none).
	Logger *slog.Logger
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

// NewAPI returns orders-api's handler: POST /orders, made idempotent by
// idemlambda.HTTPAPI (the Idempotency-Key header is required).
func NewAPI(d Deps) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	if d.Orders == nil {
		return nil, errors.New("orders: no orders table")
	}
	r, err := d.runner()
	if err != nil {
		return nil, err
	}
	return idemlambda.HTTPAPI(r, func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (idemlambda.Response, error) {
		return placeOrder(ctx, d, req)
	}, idemlambda.WithLogger(d.Logger))
}

func placeOrder(ctx context.Context, d Deps, req events.APIGatewayV2HTTPRequest) (idemlambda.Response, error) {
	if req.RequestContext.HTTP.Method != http.MethodPost || req.RawPath != "/orders" {
		return jsonResponse(http.StatusNotFound, map[string]string{"error": "no such route"}), nil
	}
	if d.TestHooks {
		if ms, err := strconv.Atoi(header(req.Headers, "x-test-sleep-ms")); err == nil && ms > 0 {
			time.Sleep(time.Duration(ms) * time.Millisecond)
		}
		if code, err := strconv.Atoi(header(req.Headers, "x-test-fail")); err == nil && code >= 500 && code <= 599 {
			return jsonResponse(code, map[string]string{"error": "test hook: failing with " + strconv.Itoa(code)}), nil
		}
	}
	body, err := idemlambda.DecodeBody(req.Body, req.IsBase64Encoded)
	if err != nil { // the wrapper refuses such a body before the handler runs
		return jsonResponse(http.StatusBadRequest, map[string]string{"error": "body is not valid base64"}), nil
	}
	var in PlaceOrder
	if err := json.Unmarshal(body, &in); err != nil {
		return jsonResponse(http.StatusBadRequest, map[string]string{"error": "body is not a JSON order: " + err.Error()}), nil
	}
	if msg := in.validate(); msg != "" {
		return jsonResponse(http.StatusBadRequest, map[string]string{"error": msg}), nil
	}
	key, ok := idemlambda.StoredKey(ctx)
	if !ok {
		return idemlambda.Response{}, errors.New("orders: no idempotency key in the handler's context")
	}
	// The order id comes from the request's key, not from a random draw: a
	// run repeated after a failure (the message not sent, say) writes the
	// same order again instead of a second one, and sends the same event id.
	o := Order{OrderID: OrderID(key), CustomerID: in.CustomerID, Items: in.Items, PlacedAt: time.Now().UTC()}
	for _, it := range in.Items {
		o.AmountCents += it.Qty * it.PriceCents
	}
	if err := d.Orders.PutOrder(ctx, o); err != nil {
		return idemlambda.Response{}, err
	}
	if d.Publisher != nil {
		ev := OrderPlaced{Type: "OrderPlaced", EventID: "evt_" + o.OrderID[len("ord_"):], OrderID: o.OrderID, CustomerID: o.CustomerID, AmountCents: o.AmountCents}
		if err := d.Publisher.Publish(ctx, ev); err != nil {
			return idemlambda.Response{}, err
		}
	}
	resp := jsonResponse(http.StatusCreated, Placed{OrderID: o.OrderID, Status: "placed", AmountCents: o.AmountCents})
	resp.Headers["Location"] = "/orders/" + o.OrderID
	return resp, nil
}

func (p PlaceOrder) validate() string {
	if p.CustomerID == "" {
		return "customer_id is required"
	}
	if len(p.Items) == 0 {
		return "an order needs at least one item"
	}
	for i, it := range p.Items {
		if it.SKU == "" || it.Qty < 1 || it.PriceCents < 0 {
			return fmt.Sprintf("item %d needs a sku, a qty of at least 1 and a price_cents of at least 0", i)
		}
	}
	return ""
}

func header(h map[string]string, name string) string {
	for k, v := range h {
		if http.CanonicalHeaderKey(k) == http.CanonicalHeaderKey(name) {
			return v
		}
	}
	return ""
}

func jsonResponse(status int, v any) idemlambda.Response {
	b, _ := json.Marshal(v) // the example's bodies always marshal
	return idemlambda.Response{StatusCode: status, Headers: map[string]string{"Content-Type": "application/json"}, Body: string(b)}
}

// NewConsumer returns orders-consumer's handler: one ledger entry per
// OrderPlaced event, made idempotent by idemlambda.SQS keyed by the body's
// event_id. Permanent failures are reported, for the queue's redrive policy
// to move them to the dead-letter queue.
func NewConsumer(d Deps) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	if d.Ledger == nil {
		return nil, errors.New("orders: no ledger table")
	}
	r, err := d.runner()
	if err != nil {
		return nil, err
	}
	opts := []idemlambda.BatchOption{idemlambda.WithLogger(d.Logger), idemlambda.WithPermanentFailuresToDLQ()}
	if d.SafetyMargin >= 0 {
		opts = append(opts, idemlambda.WithSafetyMargin(d.SafetyMargin))
	}
	return idemlambda.SQS(r, LedgerAction, idemlambda.KeyFromBodyField("event_id"), func(ctx context.Context, msg events.SQSMessage) ([]byte, error) {
		return appendLedger(ctx, d, msg)
	}, opts...)
}

// errPoison is the test hook's permanent failure.
var errPoison = errors.New("orders: poison message (test hook)")

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
		switch ev.Fail {
		case "poison":
			return nil, core.MarkPermanent(errPoison)
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

// OrderID returns the id of the order placed by the request whose stored
// idempotency key (idemlambda.StoredKey) is key: "ord_" and 16 hex digits of
// a hash of the key, the same on every run of that request.
func OrderID(key string) string {
	sum := sha256.Sum256([]byte("order\n" + key))
	return "ord_" + hex.EncodeToString(sum[:8])
}

// NewID returns prefix followed by 16 random hex digits.
func NewID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return prefix + hex.EncodeToString(b[:])
}

// NewLogger returns the functions' JSON logger on stdout (which Lambda sends
// to CloudWatch Logs), with the function's name on every record.
func NewLogger(function string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stdout, nil)).With(slog.String("function", function))
}

// APIFromEnv builds orders-api's handler from the environment (APIEnv) and
// the AWS SDK's default configuration (region, credentials, endpoints such as
// AWS_ENDPOINT_URL_DYNAMODB).
func APIFromEnv(ctx context.Context) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	cfg, err := ConfigFromEnv(os.Getenv, APIEnv)
	if err != nil {
		return nil, err
	}
	logger := NewLogger("orders-api")
	d, err := awsDeps(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	if cfg.QueueURL == "" {
		logger.Warn("ORDERS_QUEUE_URL is empty: no OrderPlaced messages will be sent")
	}
	return NewAPI(d)
}

// ConsumerFromEnv builds orders-consumer's handler from the environment
// (ConsumerEnv) and the AWS SDK's default configuration.
func ConsumerFromEnv(ctx context.Context) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	cfg, err := ConfigFromEnv(os.Getenv, ConsumerEnv)
	if err != nil {
		return nil, err
	}
	d, err := awsDeps(ctx, cfg, NewLogger("orders-consumer"))
	if err != nil {
		return nil, err
	}
	return NewConsumer(d)
}

func awsDeps(ctx context.Context, cfg Config, logger *slog.Logger) (Deps, error) {
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return Deps{}, fmt.Errorf("orders: AWS configuration: %w", err)
	}
	db := dynamodb.NewFromConfig(awsCfg)
	store, err := ddbstore.New(db, cfg.IdemTable)
	if err != nil {
		return Deps{}, err
	}
	tables := DynamoTables{Client: db, OrdersTable: cfg.OrdersTable, LedgerTable: cfg.LedgerTable, AuditTable: cfg.AuditTable}
	d := Deps{
		Store: store, Orders: tables, Ledger: tables, Audit: tables, Logger: logger,
		LeaseMargin: cfg.LeaseMargin, SafetyMargin: cfg.SafetyMargin, TestHooks: cfg.TestHooks,
	}
	if cfg.QueueURL != "" {
		d.Publisher = SQSPublisher{Client: sqs.NewFromConfig(awsCfg), QueueURL: cfg.QueueURL}
	}
	return d, nil
}
