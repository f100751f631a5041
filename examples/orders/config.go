package orders

import (
	"fmt"
	"strconv"
	"time"
)

// Environment variables the functions read.
const (
	// EnvIdemTable names the idempotency table (both functions; required).
	EnvIdemTable = "IDEM_TABLE"
	// EnvOrdersTable names the orders table (orders-api; required).
	EnvOrdersTable = "ORDERS_TABLE"
	// EnvLedgerTable names the ledger table (orders-consumer; required).
	EnvLedgerTable = "LEDGER_TABLE"
	// EnvAuditTable names the audit table (orders-stream; required).
	EnvAuditTable = "AUDIT_TABLE"
	// EnvQueueURL is the URL of the orders queue that orders-api sends
	// OrderPlaced messages to (orders-api; optional: when empty, no message
	// is sent and a warning is logged at start).
	EnvQueueURL = "ORDERS_QUEUE_URL"
	// EnvLeaseMargin is the runner's lease margin past the invocation's
	// deadline, a Go duration such as "5s" (both; optional, default
	// idem.DefaultLeaseMargin).
	EnvLeaseMargin = "IDEM_LEASE_MARGIN"
	// EnvSafetyMargin is the consumers' safety margin before the deadline
	// (idemlambda.WithSafetyMargin), a Go duration (orders-consumer and
	// orders-stream; optional, default idemlambda.DefaultSafetyMargin).
	EnvSafetyMargin = "IDEM_SAFETY_MARGIN"
	// EnvTestHooks turns the test hooks on when "1" (all functions;
	// optional; never set in production).
	EnvTestHooks = "ORDERS_TEST_HOOKS"
)

// EnvVar describes one environment variable a function reads.
type EnvVar struct {
	// Name is the variable's name.
	Name string
	// Required reports that the function refuses to start without it.
	Required bool
}

// APIEnv lists the environment variables orders-api reads.
var APIEnv = []EnvVar{{EnvIdemTable, true}, {EnvOrdersTable, true}, {EnvQueueURL, false}, {EnvLeaseMargin, false}, {EnvTestHooks, false}}

// ConsumerEnv lists the environment variables orders-consumer reads.
var ConsumerEnv = []EnvVar{{EnvIdemTable, true}, {EnvLedgerTable, true}, {EnvLeaseMargin, false}, {EnvSafetyMargin, false}, {EnvTestHooks, false}}

// StreamEnv lists the environment variables orders-stream reads.
var StreamEnv = []EnvVar{{EnvIdemTable, true}, {EnvAuditTable, true}, {EnvLeaseMargin, false}, {EnvSafetyMargin, false}, {EnvTestHooks, false}}

// Key attributes of the example's own tables (the idempotency table's come
// from ddbstore).
const (
	// OrdersKeyAttr is the orders table's partition key (S).
	OrdersKeyAttr = "order_id"
	// LedgerKeyAttr is the ledger table's partition key (S).
	LedgerKeyAttr = "entry_id"
	// AuditKeyAttr is the audit table's partition key (S).
	AuditKeyAttr = "audit_id"
)

// KeyPrefix returns the prefix of every key that the function named
// function ("orders-api", "orders-consumer", "orders-stream") writes in the
// idempotency table the functions share (ddbstore.WithKeyPrefix): its name
// and "#", which begins no other function's prefix. The template confines
// each function's item calls to its own prefix (the IAM condition key
// dynamodb:LeadingKeys); the idem command reads one function's records with
// --key-prefix and this prefix.
func KeyPrefix(function string) string { return function + "#" }

// Action names, part of every stored key.
const (
	// LedgerAction is the consumer's action name (see idemlambda.EventKey).
	LedgerAction = "append-ledger"
	// AuditAction is orders-stream's action name, keyed with an order's
	// item keys (see idemlambda.DynamoDBKeyFromItemKeys).
	AuditAction = "audit-order-placed"
)

// Config is a function's configuration, read from the environment.
type Config struct {
	IdemTable    string        // IdemTable is IDEM_TABLE.
	OrdersTable  string        // OrdersTable is ORDERS_TABLE.
	LedgerTable  string        // LedgerTable is LEDGER_TABLE.
	AuditTable   string        // AuditTable is AUDIT_TABLE.
	QueueURL     string        // QueueURL is ORDERS_QUEUE_URL (empty: send nothing).
	LeaseMargin  time.Duration // LeaseMargin is IDEM_LEASE_MARGIN (zero: the runner's default).
	SafetyMargin time.Duration // SafetyMargin is IDEM_SAFETY_MARGIN (negative: the wrapper's default).
	TestHooks    bool          // TestHooks is ORDERS_TEST_HOOKS.
}

// ConfigFromEnv reads the variables of vars through getenv (os.Getenv) and
// checks that the required ones are set.
func ConfigFromEnv(getenv func(string) string, vars []EnvVar) (Config, error) {
	c := Config{SafetyMargin: -1}
	for _, v := range vars {
		val := getenv(v.Name)
		if val == "" {
			if v.Required {
				return Config{}, fmt.Errorf("orders: environment variable %s is required", v.Name)
			}
			continue
		}
		var err error
		switch v.Name {
		case EnvIdemTable:
			c.IdemTable = val
		case EnvOrdersTable:
			c.OrdersTable = val
		case EnvLedgerTable:
			c.LedgerTable = val
		case EnvAuditTable:
			c.AuditTable = val
		case EnvQueueURL:
			c.QueueURL = val
		case EnvLeaseMargin:
			c.LeaseMargin, err = parseDuration(v.Name, val)
		case EnvSafetyMargin:
			c.SafetyMargin, err = parseDuration(v.Name, val)
		case EnvTestHooks:
			c.TestHooks, err = strconv.ParseBool(val)
		}
		if err != nil {
			return Config{}, fmt.Errorf("orders: %s=%q: %w", v.Name, val, err)
		}
	}
	return c, nil
}

func parseDuration(name, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, fmt.Errorf("%s must not be negative", name)
	}
	return d, nil
}
