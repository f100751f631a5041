package orders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
)

// NewStream returns orders-stream's handler: one audit entry per order
// placed, read from the orders table's stream (INSERT records), made
// idempotent by idemlambda.DynamoDBStream keyed by the order's item keys.
// Other records (the event source mapping filters them out already) are
// dropped before the wrapper sees them, which acknowledges them: under item
// keys, a later change of an order would otherwise be refused as a reused
// key. Permanent failures are reported as their shard's checkpoint, so that
// the mapping's retry limit and on-failure destination record them.
func NewStream(d Deps) (func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error), error) {
	if d.Audit == nil {
		return nil, errors.New("orders: no audit table")
	}
	r, err := d.runner()
	if err != nil {
		return nil, err
	}
	var opts []idemlambda.BatchOption
	if d.SafetyMargin >= 0 {
		opts = append(opts, idemlambda.WithSafetyMargin(d.SafetyMargin))
	}
	handle, err := idemlambda.DynamoDBStream(r, AuditAction, idemlambda.DynamoDBKeyFromItemKeys(), func(ctx context.Context, rec events.DynamoDBEventRecord) ([]byte, error) {
		return auditOrder(ctx, d, rec)
	}, opts...)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		ev.Records = slices.DeleteFunc(slices.Clone(ev.Records), func(r events.DynamoDBEventRecord) bool {
			return r.EventName != string(events.DynamoDBOperationTypeInsert) // not an order placed
		})
		return handle(ctx, ev)
	}, nil
}

func auditOrder(ctx context.Context, d Deps, rec events.DynamoDBEventRecord) ([]byte, error) {
	img := rec.Change.NewImage
	e := AuditEntry{
		AuditID: NewID("aud_"), OrderID: attrString(img, OrdersKeyAttr), CustomerID: attrString(img, "customer_id"),
		Event: "OrderPlaced", RecordedAt: time.Now().UTC(),
	}
	if e.OrderID == "" {
		return nil, core.MarkPermanent(fmt.Errorf("orders: INSERT record without a string %s in its NewImage (is the stream's view type NEW_IMAGE?)", OrdersKeyAttr))
	}
	e.AmountCents, _ = strconv.ParseInt(attrNumber(img, "amount_cents"), 10, 64)
	if d.TestHooks {
		if err := streamHooks(img); err != nil {
			return nil, err
		}
	}
	if err := d.Audit.AppendAudit(ctx, e); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]string{"audit_id": e.AuditID})
}

// errPoisonRecord is the stream test hook's permanent failure.
var errPoisonRecord = errors.New("orders: poison record (test hook)")

// streamHooks obeys orders-stream's test hooks, attributes of the NewImage
// that orders-api never writes (see the package documentation).
func streamHooks(img map[string]events.DynamoDBAttributeValue) error {
	if path := attrString(img, "test_hold_file"); path != "" {
		for _, err := os.Stat(path); err != nil; _, err = os.Stat(path) {
			time.Sleep(10 * time.Millisecond) // deliberately deaf to ctx
		}
	}
	switch attrString(img, "test_fail") {
	case "poison":
		return core.MarkPermanent(errPoisonRecord)
	case "transient":
		return core.MarkTransient(errors.New("orders: audit table unavailable (test hook)"))
	}
	return nil
}

// attrString is the string attribute name of img, or "".
func attrString(img map[string]events.DynamoDBAttributeValue, name string) string {
	if v, ok := img[name]; ok && v.DataType() == events.DataTypeString {
		return v.String()
	}
	return ""
}

// attrNumber is the number attribute name of img as DynamoDB sends it, or "".
func attrNumber(img map[string]events.DynamoDBAttributeValue, name string) string {
	if v, ok := img[name]; ok && v.DataType() == events.DataTypeNumber {
		return v.Number()
	}
	return ""
}

// StreamFromEnv builds orders-stream's handler from the environment
// (StreamEnv) and the AWS SDK's default configuration.
func StreamFromEnv(ctx context.Context) (func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error), error) {
	cfg, err := ConfigFromEnv(os.Getenv, StreamEnv)
	if err != nil {
		return nil, err
	}
	d, err := awsDeps(ctx, cfg, "orders-stream")
	if err != nil {
		return nil, err
	}
	return NewStream(d)
}
