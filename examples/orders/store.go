package orders

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Order is one item of the orders table.
type Order struct {
	OrderID     string    `json:"order_id"`     // OrderID is "ord_" and 16 hex digits derived from the request's idempotency key (OrderID).
	CustomerID  string    `json:"customer_id"`  // CustomerID is the ordering customer.
	AmountCents int64     `json:"amount_cents"` // AmountCents is the sum of the items' qty × price.
	Items       []Item    `json:"items"`        // Items are the order's lines.
	PlacedAt    time.Time `json:"placed_at"`    // PlacedAt is when the order was created.
}

// Item is a line of an order.
type Item struct {
	SKU        string `json:"sku"`         // SKU names the product.
	Qty        int64  `json:"qty"`         // Qty is at least 1.
	PriceCents int64  `json:"price_cents"` // PriceCents is the unit price, at least 0.
}

// Entry is one item of the ledger table.
type Entry struct {
	EntryID     string    `json:"entry_id"`     // EntryID is "ent_" and 16 random hex digits, new per execution.
	EventID     string    `json:"event_id"`     // EventID is the OrderPlaced event's id.
	OrderID     string    `json:"order_id"`     // OrderID is the order the entry books.
	AmountCents int64     `json:"amount_cents"` // AmountCents is the order's amount.
	RecordedAt  time.Time `json:"recorded_at"`  // RecordedAt is when the entry was written.
}

// AuditEntry is one item of the audit table: orders-stream's record of an
// order placed, written once per order.
type AuditEntry struct {
	AuditID     string    `json:"audit_id"`     // AuditID is "aud_" and 16 random hex digits, new per execution.
	OrderID     string    `json:"order_id"`     // OrderID is the order placed.
	CustomerID  string    `json:"customer_id"`  // CustomerID is the ordering customer.
	AmountCents int64     `json:"amount_cents"` // AmountCents is the order's amount.
	Event       string    `json:"event"`        // Event is always "OrderPlaced".
	RecordedAt  time.Time `json:"recorded_at"`  // RecordedAt is when the entry was written.
}

// OrderPlaced is the message orders-api sends for each order it creates,
// and the body orders-consumer reads. EventID identifies the business event
// (one per order): the consumer's idempotency key comes from it.
type OrderPlaced struct {
	Type        string `json:"type"`         // Type is always "OrderPlaced".
	EventID     string `json:"event_id"`     // EventID is "evt_" and the order id's hex digits.
	OrderID     string `json:"order_id"`     // OrderID is the order placed.
	CustomerID  string `json:"customer_id"`  // CustomerID is the ordering customer.
	AmountCents int64  `json:"amount_cents"` // AmountCents is the order's amount.
	// Fail, OutageReceives and SleepMs are test hooks (see the package
	// documentation); orders-api never sets them.
	Fail           string `json:"fail,omitempty"`            // Fail is a test hook: transient_once, transient, poison or error.
	OutageReceives int    `json:"outage_receives,omitempty"` // OutageReceives is a test hook: the receives the warehouse answers 503 on.
	SleepMs        int    `json:"sleep_ms,omitempty"`        // SleepMs is a test hook: milliseconds to sleep on a first delivery.
}

// Orders stores orders. Implementations are safe for concurrent use.
type Orders interface {
	// PutOrder writes a new order. If an order with its id exists, it is
	// kept as it is and PutOrder succeeds: the id is derived from the
	// request's idempotency key, so an existing order is this request's own,
	// written by an earlier run that failed later (an idempotent put).
	PutOrder(ctx context.Context, o Order) error
}

// Ledger stores ledger entries. Implementations are safe for concurrent use.
type Ledger interface {
	// Append writes a new entry; an existing entry id is an error.
	Append(ctx context.Context, e Entry) error
}

// Audit stores audit entries. Implementations are safe for concurrent use.
type Audit interface {
	// AppendAudit writes a new entry; an existing audit id is an error.
	AppendAudit(ctx context.Context, e AuditEntry) error
}

// Publisher sends OrderPlaced messages. Implementations are safe for
// concurrent use.
type Publisher interface {
	// Publish sends one message.
	Publish(ctx context.Context, ev OrderPlaced) error
}

// DynamoDBAPI is the part of the DynamoDB client the example's tables use.
type DynamoDBAPI interface {
	// PutItem writes an item (conditionally: never over an existing id).
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// DynamoTables keeps orders, ledger entries and audit entries in DynamoDB
// tables whose partition keys are OrdersKeyAttr, LedgerKeyAttr and
// AuditKeyAttr.
type DynamoTables struct {
	Client      DynamoDBAPI // Client is a *dynamodb.Client in production.
	OrdersTable string      // OrdersTable is the orders table's name.
	LedgerTable string      // LedgerTable is the ledger table's name.
	AuditTable  string      // AuditTable is the audit table's name.
}

// PutOrder implements Orders with a conditional PutItem; a failed condition
// (the order exists) is success.
func (t DynamoTables) PutOrder(ctx context.Context, o Order) error {
	items, err := json.Marshal(o.Items)
	if err != nil {
		return err
	}
	err = t.put(ctx, t.OrdersTable, OrdersKeyAttr, map[string]types.AttributeValue{
		OrdersKeyAttr:  &types.AttributeValueMemberS{Value: o.OrderID},
		"customer_id":  &types.AttributeValueMemberS{Value: o.CustomerID},
		"amount_cents": &types.AttributeValueMemberN{Value: strconv.FormatInt(o.AmountCents, 10)},
		"items":        &types.AttributeValueMemberS{Value: string(items)},
		"placed_at":    &types.AttributeValueMemberS{Value: o.PlacedAt.UTC().Format(time.RFC3339Nano)},
	})
	if ccf := (*types.ConditionalCheckFailedException)(nil); errors.As(err, &ccf) {
		return nil
	}
	return err
}

// Append implements Ledger with a conditional PutItem.
func (t DynamoTables) Append(ctx context.Context, e Entry) error {
	return t.put(ctx, t.LedgerTable, LedgerKeyAttr, map[string]types.AttributeValue{
		LedgerKeyAttr:  &types.AttributeValueMemberS{Value: e.EntryID},
		"event_id":     &types.AttributeValueMemberS{Value: e.EventID},
		"order_id":     &types.AttributeValueMemberS{Value: e.OrderID},
		"amount_cents": &types.AttributeValueMemberN{Value: strconv.FormatInt(e.AmountCents, 10)},
		"recorded_at":  &types.AttributeValueMemberS{Value: e.RecordedAt.UTC().Format(time.RFC3339Nano)},
	})
}

// AppendAudit implements Audit with a conditional PutItem.
func (t DynamoTables) AppendAudit(ctx context.Context, e AuditEntry) error {
	return t.put(ctx, t.AuditTable, AuditKeyAttr, map[string]types.AttributeValue{
		AuditKeyAttr:   &types.AttributeValueMemberS{Value: e.AuditID},
		"order_id":     &types.AttributeValueMemberS{Value: e.OrderID},
		"customer_id":  &types.AttributeValueMemberS{Value: e.CustomerID},
		"amount_cents": &types.AttributeValueMemberN{Value: strconv.FormatInt(e.AmountCents, 10)},
		"event":        &types.AttributeValueMemberS{Value: e.Event},
		"recorded_at":  &types.AttributeValueMemberS{Value: e.RecordedAt.UTC().Format(time.RFC3339Nano)},
	})
}

func (t DynamoTables) put(ctx context.Context, table, keyAttr string, item map[string]types.AttributeValue) error {
	_, err := t.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#k)"),
		ExpressionAttributeNames: map[string]string{"#k": keyAttr},
	})
	if err != nil {
		return fmt.Errorf("orders: put into %s: %w", table, err)
	}
	return nil
}

// MemoryTables keeps orders, ledger entries and audit entries in memory
// (tests). The zero value is ready; safe for concurrent use.
type MemoryTables struct {
	mu     sync.Mutex
	orders map[string]Order
	ledger map[string]Entry
	audit  map[string]AuditEntry
}

// PutOrder implements Orders.
func (m *MemoryTables) PutOrder(_ context.Context, o Order) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.orders[o.OrderID]; ok {
		return nil // kept as it is: see Orders
	}
	if m.orders == nil {
		m.orders = map[string]Order{}
	}
	m.orders[o.OrderID] = o
	return nil
}

// Append implements Ledger.
func (m *MemoryTables) Append(_ context.Context, e Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.ledger[e.EntryID]; ok {
		return fmt.Errorf("orders: entry %s exists", e.EntryID)
	}
	if m.ledger == nil {
		m.ledger = map[string]Entry{}
	}
	m.ledger[e.EntryID] = e
	return nil
}

// AppendAudit implements Audit.
func (m *MemoryTables) AppendAudit(_ context.Context, e AuditEntry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.audit[e.AuditID]; ok {
		return fmt.Errorf("orders: audit entry %s exists", e.AuditID)
	}
	if m.audit == nil {
		m.audit = map[string]AuditEntry{}
	}
	m.audit[e.AuditID] = e
	return nil
}

// AuditEntries returns the audit entries, sorted by id.
func (m *MemoryTables) AuditEntries() []AuditEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]AuditEntry, 0, len(m.audit))
	for _, e := range m.audit {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AuditID < out[j].AuditID })
	return out
}

// Orders returns the stored orders, sorted by id.
func (m *MemoryTables) Orders() []Order {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Order, 0, len(m.orders))
	for _, o := range m.orders {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].OrderID < out[j].OrderID })
	return out
}

// Entries returns the ledger entries, sorted by id.
func (m *MemoryTables) Entries() []Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Entry, 0, len(m.ledger))
	for _, e := range m.ledger {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].EntryID < out[j].EntryID })
	return out
}

// SQSAPI is the part of the SQS client SQSPublisher calls.
type SQSAPI interface {
	// SendMessage sends one message.
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// SQSPublisher sends OrderPlaced messages to an SQS queue, with the event
// id as the message attribute EventId.
type SQSPublisher struct {
	Client   SQSAPI // Client is an *sqs.Client in production.
	QueueURL string // QueueURL is the orders queue's URL.
}

// Publish implements Publisher.
func (p SQSPublisher) Publish(ctx context.Context, ev OrderPlaced) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = p.Client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(p.QueueURL),
		MessageBody: aws.String(string(b)),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			"EventId": {DataType: aws.String("String"), StringValue: aws.String(ev.EventID)},
		},
	})
	if err != nil {
		return fmt.Errorf("orders: send OrderPlaced: %w", err)
	}
	return nil
}

// MemoryQueue is an in-memory stand-in for the orders queue (tests):
// Publish appends, Receive hands out SQS records. The zero value is ready;
// safe for concurrent use.
type MemoryQueue struct {
	mu   sync.Mutex
	msgs []OrderPlaced
	n    int
}

// Publish implements Publisher.
func (q *MemoryQueue) Publish(_ context.Context, ev OrderPlaced) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, ev)
	return nil
}

// Receive removes and returns the queued messages as SQS records of the
// queue arn, as Lambda's event source mapping would deliver them.
func (q *MemoryQueue) Receive(arn string) []events.SQSMessage {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []events.SQSMessage
	for _, ev := range q.msgs {
		q.n++
		b, _ := json.Marshal(ev) // OrderPlaced always marshals
		out = append(out, SQSRecord(fmt.Sprintf("00000000-0000-4000-8000-%012d", q.n), string(b), 1, arn))
	}
	q.msgs = nil
	return out
}

// SQSRecord returns an SQS record as Lambda delivers it: message id, receipt
// handle, MD5 of the body, system attributes (with receiveCount as
// ApproximateReceiveCount) and the queue's ARN.
func SQSRecord(messageID, body string, receiveCount int, queueARN string) events.SQSMessage {
	sum := md5.Sum([]byte(body))
	return events.SQSMessage{
		MessageId:     messageID,
		ReceiptHandle: "AQEB" + hex.EncodeToString(sum[:]) + "/" + messageID + "/" + strconv.Itoa(receiveCount),
		Body:          body,
		Md5OfBody:     hex.EncodeToString(sum[:]),
		Attributes: map[string]string{
			"ApproximateReceiveCount":          strconv.Itoa(receiveCount),
			"SentTimestamp":                    "1767268800000",
			"SenderId":                         "AROAEXAMPLE:orders-api",
			"ApproximateFirstReceiveTimestamp": "1767268800123",
		},
		MessageAttributes: map[string]events.SQSMessageAttribute{},
		EventSourceARN:    queueARN,
		EventSource:       "aws:sqs",
		AWSRegion:         "us-east-1",
	}
}
