// Command kinesis-ledger is a Lambda function for the end-to-end tests: a
// Kinesis Data Streams consumer, made idempotent by idemlambda.Kinesis keyed
// by the event_id field of each record's data, that appends one ledger entry
// (a new random entry id per real execution) per OrderPlaced event. It reads
// the environment of orders-consumer (orders.ConsumerEnv) and obeys the
// data field "fail": "poison" fails permanently, "transient" transiently,
// "error" with an ordinary error (no mark, no classifier) while the file at
// the data field "fail_until_file" does not exist (always, without one),
// when ORDERS_TEST_HOOKS=1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/examples/orders"
	idemlambda "github.com/idemgo/idem/lambda"
)

func main() {
	handler, err := newHandler(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "kinesis-ledger:", err)
		os.Exit(1)
	}
	lambda.Start(handler)
}

func newHandler(ctx context.Context) (func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error), error) {
	cfg, err := orders.ConfigFromEnv(os.Getenv, orders.ConsumerEnv)
	if err != nil {
		return nil, err
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, err
	}
	db := dynamodb.NewFromConfig(awsCfg)
	store, err := ddbstore.New(db, cfg.IdemTable)
	if err != nil {
		return nil, err
	}
	logger := orders.NewLogger("kinesis-ledger")
	runner, err := idem.New(store, idem.WithLogger(logger), idem.WithLease(cfg.LeaseMargin, idem.DefaultLease))
	if err != nil {
		return nil, err
	}
	ledger := orders.DynamoTables{Client: db, LedgerTable: cfg.LedgerTable}
	return idemlambda.Kinesis(runner, orders.LedgerAction, idemlambda.KinesisKeyFromDataField("event_id"),
		func(ctx context.Context, rec events.KinesisEventRecord) ([]byte, error) {
			return appendEntry(ctx, ledger, rec, cfg.TestHooks)
		})
}

func appendEntry(ctx context.Context, ledger orders.Ledger, rec events.KinesisEventRecord, hooks bool) ([]byte, error) {
	var ev orders.OrderPlaced
	if err := json.Unmarshal(rec.Kinesis.Data, &ev); err != nil {
		return nil, core.MarkPermanent(fmt.Errorf("kinesis-ledger: data is not an OrderPlaced event: %w", err))
	}
	if hooks {
		if err := testHooks(ev.Fail, rec.Kinesis.Data); err != nil {
			return nil, err
		}
	}
	e := orders.Entry{EntryID: orders.NewID("ent_"), EventID: ev.EventID, OrderID: ev.OrderID, AmountCents: ev.AmountCents, RecordedAt: time.Now().UTC()}
	if err := ledger.Append(ctx, e); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]string{"entry_id": e.EntryID})
}

// testHooks is the failure the test hooks ask for, if any.
func testHooks(fail string, data []byte) error {
	switch fail {
	case "poison":
		return core.MarkPermanent(errors.New("kinesis-ledger: poison record (test hook)"))
	case "transient":
		return core.MarkTransient(errors.New("kinesis-ledger: ledger unavailable (test hook)"))
	case "error":
		var h struct {
			UntilFile string `json:"fail_until_file"`
		}
		_ = json.Unmarshal(data, &h) // the record decoded once already
		if _, err := os.Stat(h.UntilFile); h.UntilFile == "" || err != nil {
			return errors.New("kinesis-ledger: the warehouse said no (test hook)")
		}
	}
	return nil
}
