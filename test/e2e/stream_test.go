package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem/examples/orders"
	"github.com/idemgo/idem/internal/devserver"
	idemlambda "github.com/idemgo/idem/lambda"
)

const (
	ordersStreamARN  = "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2026-01-01T00:00:00.000"
	kinesisStreamARN = "arn:aws:kinesis:us-east-1:123456789012:stream/order-events"
)

// streamSeq is the sequence number of the n-th record of a test shard.
func streamSeq(n int) string { return fmt.Sprintf("4959033827149025660855969253836157%06d", n) }

// seqs lists the sequence numbers of records ns.
func seqs(ns ...int) []string {
	out := []string{}
	for _, n := range ns {
		out = append(out, streamSeq(n))
	}
	return out
}

// orderInsert is the n-th record of the orders table's stream as AWS sends
// it: the INSERT of order orderID with the attributes orders-api writes,
// plus extra ones (test hooks), in DynamoDB's typed JSON.
func orderInsert(n int, orderID string, extra map[string]any) map[string]any {
	img := map[string]any{
		orders.OrdersKeyAttr: map[string]any{"S": orderID},
		"customer_id":        map[string]any{"S": "c-1"},
		"amount_cents":       map[string]any{"N": "2500"},
		"items":              map[string]any{"S": `[{"sku":"book","qty":2,"price_cents":1250}]`},
		"placed_at":          map[string]any{"S": "2026-01-01T12:00:00.123Z"},
	}
	maps.Copy(img, extra)
	return map[string]any{
		"eventID":      fmt.Sprintf("%032x", 0xc4ca4238+n),
		"eventName":    "INSERT",
		"eventVersion": "1.1",
		"eventSource":  "aws:dynamodb",
		"awsRegion":    "us-east-1",
		"dynamodb": map[string]any{
			"ApproximateCreationDateTime": 1767268800,
			"Keys":                        map[string]any{orders.OrdersKeyAttr: map[string]any{"S": orderID}},
			"NewImage":                    img,
			"SequenceNumber":              streamSeq(n),
			"SizeBytes":                   180,
			"StreamViewType":              "NEW_IMAGE",
		},
		"eventSourceARN": ordersStreamARN,
	}
}

// orderModify is a MODIFY record of order orderID.
func orderModify(n int, orderID string) map[string]any {
	r := orderInsert(n, orderID, map[string]any{"customer_id": map[string]any{"S": "c-2"}})
	r["eventName"] = "MODIFY"
	return r
}

// kinesisRecord is the n-th record of a Kinesis shard as AWS sends it, with
// data base64-encoded in the JSON.
func kinesisRecord(n int, data string) map[string]any {
	return map[string]any{
		"kinesis": map[string]any{
			"kinesisSchemaVersion":        "1.0",
			"partitionKey":                fmt.Sprintf("order-%d", n),
			"sequenceNumber":              streamSeq(n),
			"data":                        base64.StdEncoding.EncodeToString([]byte(data)),
			"approximateArrivalTimestamp": 1767268800.123,
		},
		"eventSource":       "aws:kinesis",
		"eventVersion":      "1.0",
		"eventID":           "shardId-000000000006:" + streamSeq(n),
		"eventName":         "aws:kinesis:record",
		"invokeIdentityArn": "arn:aws:iam::123456789012:role/kinesis-ledger",
		"awsRegion":         "us-east-1",
		"eventSourceARN":    kinesisStreamARN,
	}
}

// checkpoints invokes r with a batch of records and returns the sequence
// numbers it reports.
func (s *stack) checkpoints(r *devserver.RIE, recs ...map[string]any) []string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 30*time.Second)
	defer cancel()
	status, body, err := r.Invoke(ctx, mustJSON(s.t, map[string]any{"Records": recs}))
	if err != nil || status != 200 {
		s.t.Fatalf("invoke: status %d, %v: %s", status, err, body)
	}
	var resp events.DynamoDBEventResponse // the same shape as events.KinesisEventResponse
	if err := json.Unmarshal(body, &resp); err != nil || resp.BatchItemFailures == nil {
		s.t.Fatalf("stream answer %s: %v", body, err)
	}
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// verdicts counts the verdicts of the wrapper's log records (wrapper is its
// "wrapper" attribute) in a function's log.
func verdicts(log, wrapper string) map[string]int {
	n := map[string]int{}
	for _, rec := range logRecords(log) {
		if rec["wrapper"] == wrapper {
			n[rec["verdict"].(string)]++
		}
	}
	return n
}

// auditByOrder counts audit entries per order id.
func (s *stack) auditByOrder() map[string]int {
	n := map[string]int{}
	for _, it := range s.scan(s.auditTable) {
		n[it["order_id"]]++
	}
	return n
}

// The same record twice in a batch, another INSERT of the same order, and a
// redelivered batch give one audit entry per order; a MODIFY is dropped.
func TestStreamDuplicates(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	fn := s.start("orders-stream")

	if got := s.checkpoints(fn, orderInsert(1, "ord_a", nil), orderInsert(1, "ord_a", nil), orderInsert(2, "ord_b", nil), orderInsert(3, "ord_a", nil)); len(got) != 0 {
		t.Fatalf("batch 1 checkpoints = %v, want none", got)
	}
	if got := s.checkpoints(fn, orderInsert(2, "ord_b", nil), orderModify(4, "ord_a"), orderInsert(5, "ord_c", nil)); len(got) != 0 {
		t.Fatalf("batch 2 checkpoints = %v, want none", got)
	}
	if n, want := s.auditByOrder(), map[string]int{"ord_a": 1, "ord_b": 1, "ord_c": 1}; !maps.Equal(n, want) {
		t.Errorf("audit entries per order = %v, want %v", n, want)
	}
	if v := verdicts(fn.Log(), "dynamodb_stream"); v["executed"] != 3 || v["replayed"] != 3 {
		t.Errorf("verdicts %v, want 3 executed and 3 replayed (the record twice, ord_a inserted again, ord_b redelivered)", v)
	}
}

// An event aws-lambda-go cannot decode fails the invocation before any wrapper runs: a
// binary set whose members are not strings ({"BS":[1]}) panics in its decoder, and the
// runtime exits after reporting the panic (Runtime.ExitError: the emulator answers 502 with
// the panic as the error); the next invocation is a cold start, and runs as usual. Lambda
// retries (and bisects) such a batch until its retry limits give up. Each function also
// publishes its calls' metrics (EMF) on standard output, named by its function name.
func TestStreamUndecodableEvent(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	fn := s.start("orders-stream")
	bad := orderInsert(1, "ord_bs", map[string]any{"blobs": map[string]any{"BS": []any{1}}})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	status, body, err := fn.Invoke(ctx, mustJSON(t, map[string]any{"Records": []any{bad}}))
	if err != nil || status != 502 || !strings.Contains(string(body), `"errorType":"TypeAssertionError"`) || !strings.Contains(string(body), "unmarshalBinarySet") {
		t.Fatalf("invoke with {\"BS\":[1]}: %d %s (%v); want 502 and the decoder's panic", status, body, err)
	}
	// The emulator logs the runtime's exit as it notices it, which may be just after it
	// answered: the next invocation, which waits for the new runtime, comes after both.
	if got := s.checkpoints(fn, orderInsert(2, "ord_ok", nil)); len(got) != 0 {
		t.Fatalf("the next batch: checkpoints %v, want none", got)
	}
	log := fn.Log()
	exit := strings.Index(log, "Runtime.ExitError")
	if exit < 0 || !strings.Contains(log[exit:], "INIT START(type: on-demand, phase: invoke)") {
		t.Errorf("want the runtime's exit (Runtime.ExitError), then a cold start for the next invocation:\n%s", log)
	}
	if n := s.auditByOrder(); !maps.Equal(n, map[string]int{"ord_ok": 1}) {
		t.Errorf("audit = %v, want ord_ok only", n)
	}
	if !strings.Contains(fn.Log(), `"`+orders.MetricDimension+`":"orders-stream"`) || !strings.Contains(fn.Log(), `"CloudWatchMetrics"`) {
		t.Errorf("no EMF document with %s orders-stream in the function's output:\n%s", orders.MetricDimension, fn.Log())
	}
}

// A poison record in the middle of a shard is its checkpoint: the records
// after it are not processed; the retry from it replays the failure; the
// bisected half after it is processed.
func TestStreamPoisonMidShard(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	fn := s.start("orders-stream")
	poison := map[string]any{"test_fail": map[string]any{"S": "poison"}}
	batch := []map[string]any{orderInsert(1, "ord_a", nil), orderInsert(2, "ord_p", poison), orderInsert(3, "ord_c", nil)}

	if got := s.checkpoints(fn, batch...); !slices.Equal(got, seqs(2)) {
		t.Fatalf("batch checkpoints = %v, want the poison record's %v", got, seqs(2))
	}
	if n := s.auditByOrder(); !maps.Equal(n, map[string]int{"ord_a": 1}) {
		t.Fatalf("audit after the batch = %v, want ord_a only: nothing after the checkpoint runs", n)
	}
	if got := s.checkpoints(fn, batch[1:]...); !slices.Equal(got, seqs(2)) {
		t.Fatalf("retry from the checkpoint: %v, want %v", got, seqs(2))
	}
	if got := s.checkpoints(fn, batch[2:]...); len(got) != 0 {
		t.Fatalf("bisected half after the poison record: %v, want none", got)
	}
	if got := s.checkpoints(fn, batch...); !slices.Equal(got, seqs(2)) {
		t.Fatalf("the whole batch again: %v, want %v", got, seqs(2))
	}
	if n := s.auditByOrder(); !maps.Equal(n, map[string]int{"ord_a": 1, "ord_c": 1}) {
		t.Errorf("audit = %v, want one entry for ord_a and ord_c each", n)
	}
	if v := verdicts(fn.Log(), "dynamodb_stream"); v["failed_permanently"] != 1 || v["replayed_failure"] != 2 || v["blocked"] != 3 {
		t.Errorf("verdicts %v, want the poison record failed once and replayed twice, and ord_c blocked behind it three times", v)
	}
}

// A sandbox killed by its timeout in the middle of a shard leaves the
// records before it done and the one it was running in progress until its
// lease ends: a retry before then replays the first and reports the held
// one; a retry after takes it over, and every order has one audit entry.
func TestStreamTimeoutTakeover(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	a := s.start("orders-stream")
	b := s.start("orders-stream") // the sandbox Lambda retries on

	holdFile, release := hold(t)
	start := time.Now()
	slow := map[string]any{"test_hold_file": map[string]any{"S": holdFile}}
	batch := []map[string]any{orderInsert(1, "ord_a", nil), orderInsert(2, "ord_slow", slow), orderInsert(3, "ord_c", nil)}
	var held events.DynamoDBEventRecord
	if err := json.Unmarshal(mustJSON(t, batch[1]), &held); err != nil {
		t.Fatal(err)
	}
	key, err := idemlambda.DynamoDBStreamKey(idemlambda.DynamoDBKeyFromItemKeys(), orders.AuditAction, held)
	if err != nil {
		t.Fatal(err)
	}
	timedOut := make(chan string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, out, err := a.Invoke(ctx, mustJSON(t, map[string]any{"Records": batch}))
		if err != nil {
			timedOut <- err.Error()
			return
		}
		timedOut <- string(out)
	}()
	rec := s.waitInProgress("orders-stream", key)
	checkLease(t, rec, start, functionTimeout*time.Second)

	if got := s.checkpoints(b, batch...); !slices.Equal(got, seqs(2)) {
		t.Fatalf("retry during the lease: checkpoints %v, want the held record's %v", got, seqs(2))
	}
	if out := <-timedOut; !strings.Contains(out, "Task timed out") {
		t.Fatalf("first invocation answered %q, want a timeout", out)
	}
	if n := s.auditByOrder(); !maps.Equal(n, map[string]int{"ord_a": 1}) {
		t.Fatalf("audit = %v, want ord_a only: the first invocation was killed before writing ord_slow", n)
	}

	// The one real wait of this test: the dead sandbox's lease must end.
	release()
	time.Sleep(time.Until(rec.LeaseUntil) + 50*time.Millisecond)
	if got := s.checkpoints(b, batch[1:]...); len(got) != 0 {
		t.Fatalf("retry from the checkpoint after the lease: %v, want none", got)
	}
	if n, want := s.auditByOrder(), map[string]int{"ord_a": 1, "ord_slow": 1, "ord_c": 1}; !maps.Equal(n, want) {
		t.Errorf("audit = %v, want %v", n, want)
	}
	if v := verdicts(b.Log(), "dynamodb_stream"); v["replayed"] != 1 || v["in_progress"] != 1 || v["executed"] != 2 || !strings.Contains(b.Log(), `"lease_taken_over":true`) {
		t.Errorf("the second sandbox's verdicts %v: want ord_a replayed, ord_slow in progress then taken over, ord_c executed", v)
	}
}

// Kinesis records with base64 data: a duplicate event within a batch
// replays, a poison record is the shard's checkpoint, and redeliveries
// (from the checkpoint, a bisected half, the whole batch) replay what was
// done.
func TestKinesisDuplicatesAndPoison(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	fn := s.start("kinesis-ledger")
	batch := []map[string]any{
		kinesisRecord(1, event("evt_a", "")),
		kinesisRecord(2, event("evt_b", "")),
		kinesisRecord(3, event("evt_a", "")), // the producer put the event twice
		kinesisRecord(4, event("evt_p", `,"fail":"poison"`)),
		kinesisRecord(5, event("evt_c", "")),
	}
	if got := s.checkpoints(fn, batch...); !slices.Equal(got, seqs(4)) {
		t.Fatalf("batch checkpoints = %v, want %v", got, seqs(4))
	}
	if n := s.ledgerByEvent(); !maps.Equal(n, map[string]int{"evt_a": 1, "evt_b": 1}) {
		t.Fatalf("ledger after the batch = %v", n)
	}
	for i, d := range []struct {
		recs []map[string]any
		want []string
	}{
		{batch[3:], seqs(4)}, // retried from the checkpoint
		{batch[4:], seqs()},  // the bisected half after it
		{batch, seqs(4)},     // the whole batch again
	} {
		if got := s.checkpoints(fn, d.recs...); !slices.Equal(got, d.want) {
			t.Fatalf("redelivery %d: checkpoints %v, want %v", i, got, d.want)
		}
	}
	if n, want := s.ledgerByEvent(), map[string]int{"evt_a": 1, "evt_b": 1, "evt_c": 1}; !maps.Equal(n, want) {
		t.Errorf("ledger = %v, want %v", n, want)
	}
}

// A Kinesis record that fails with an ordinary error is its shard's
// checkpoint and runs again on each retry from it (not replayed as a
// permanent failure); once it succeeds, the shard moves on to the records
// after it. The test says when the error stops (a file it creates).
func TestKinesisOrdinaryErrorMovesOnOnceTheRecordSucceeds(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	fn := s.start("kinesis-ledger")
	stop, fixed := hold(t)
	batch := []map[string]any{
		kinesisRecord(1, event("evt_a", "")),
		kinesisRecord(2, event("evt_b", fmt.Sprintf(`,"fail":"error","fail_until_file":%q`, stop))),
		kinesisRecord(3, event("evt_c", "")),
	}
	for delivery, recs := range [][]map[string]any{batch, batch[1:]} { // the batch, then Lambda's retry from the checkpoint
		if got := s.checkpoints(fn, recs...); !slices.Equal(got, seqs(2)) {
			t.Fatalf("delivery %d: checkpoints = %v, want %v", delivery+1, got, seqs(2))
		}
	}
	if n := s.ledgerByEvent(); !maps.Equal(n, map[string]int{"evt_a": 1}) {
		t.Fatalf("ledger while evt_b fails = %v, want evt_a only", n)
	}
	fixed() // the warehouse answers again
	if got := s.checkpoints(fn, batch[1:]...); len(got) != 0 {
		t.Fatalf("the retry after the fix: checkpoints %v, want none: the shard moves on", got)
	}
	if n, want := s.ledgerByEvent(), map[string]int{"evt_a": 1, "evt_b": 1, "evt_c": 1}; !maps.Equal(n, want) {
		t.Errorf("ledger = %v, want %v", n, want)
	}
	if v := verdicts(fn.Log(), "kinesis"); v["failed_unclassified"] != 2 || v["executed"] != 3 || v["replayed_failure"] != 0 {
		t.Errorf("verdicts %v: want evt_b failed_unclassified twice (run each time), then executed with evt_c", v)
	}
}
