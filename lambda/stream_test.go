package idemlambda_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
	idemlambda "github.com/idemgo/idem/lambda"
)

const (
	kinesisARN = "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"
	tableARN   = "arn:aws:dynamodb:eu-west-1:123456789012:table/orders"
	streamARN  = tableARN + "/stream/2030-01-01T00:00:00.000"
)

// seqN is the sequence number of the n-th record of a test stream: digits
// that grow with n, as Kinesis's and DynamoDB's do.
func seqN(n int) string {
	return fmt.Sprintf("49590338271490256608559692538361571095921575989136%06d", n)
}

// cp lists the sequence numbers of records ns: the checkpoints a stream
// wrapper reports.
func cp(ns ...int) []string {
	out := []string{}
	for _, n := range ns {
		out = append(out, seqN(n))
	}
	return out
}

// kinRec returns the n-th record of a Kinesis shard as Lambda delivers it,
// with data as its (already base64-decoded) data.
func kinRec(shard, n int, data string) events.KinesisEventRecord {
	return events.KinesisEventRecord{
		AwsRegion:         "eu-west-1",
		EventID:           fmt.Sprintf("shardId-%012d:%s", shard, seqN(n)),
		EventName:         "aws:kinesis:record",
		EventSource:       "aws:kinesis",
		EventSourceArn:    kinesisARN,
		EventVersion:      "1.0",
		InvokeIdentityArn: "arn:aws:iam::123456789012:role/orders-stream",
		Kinesis: events.KinesisRecord{
			ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: t0},
			Data:                        []byte(data),
			PartitionKey:                fmt.Sprintf("pk-%d", n),
			SequenceNumber:              seqN(n),
			KinesisSchemaVersion:        "1.0",
		},
	}
}

// k is the n-th record of shard 0 for event id with behaviour do; k1 the
// same on shard 1.
func k(n int, id, do string) events.KinesisEventRecord  { return kinRec(0, n, body(id, do)) }
func k1(n int, id, do string) events.KinesisEventRecord { return kinRec(1, n, body(id, do)) }

// str and num are DynamoDB attribute values.
func str(s string) events.DynamoDBAttributeValue { return events.NewStringAttribute(s) }
func num(s string) events.DynamoDBAttributeValue { return events.NewNumberAttribute(s) }

// ddbRec returns the n-th record of a DynamoDB stream as Lambda delivers it:
// a change named name (INSERT, MODIFY, REMOVE) of the item whose key "id" is
// id, with do as its "do" attribute, and the images the change has.
func ddbRec(n int, name, id, do string) events.DynamoDBEventRecord {
	img := map[string]events.DynamoDBAttributeValue{"id": str(id), "do": str(do), "amount_cents": num("2500")}
	old := map[string]events.DynamoDBAttributeValue{"id": str(id), "do": str("ok"), "amount_cents": num("1000")}
	ch := events.DynamoDBStreamRecord{
		ApproximateCreationDateTime: events.SecondsEpochTime{Time: t0},
		Keys:                        map[string]events.DynamoDBAttributeValue{"id": str(id)},
		SequenceNumber:              seqN(n),
		SizeBytes:                   64,
		StreamViewType:              "NEW_AND_OLD_IMAGES",
	}
	switch name {
	case "INSERT":
		ch.NewImage = img
	case "MODIFY":
		ch.NewImage, ch.OldImage = img, old
	case "REMOVE":
		ch.OldImage = old
	}
	return events.DynamoDBEventRecord{
		AWSRegion: "eu-west-1", Change: ch, EventID: fmt.Sprintf("%032x", 0xc4ca4238+n), EventName: name,
		EventSource: "aws:dynamodb", EventVersion: "1.1", EventSourceArn: streamARN,
	}
}

// d is the n-th INSERT of item id with behaviour do.
func d(n int, id, do string) events.DynamoDBEventRecord { return ddbRec(n, "INSERT", id, do) }

// streamHandler runs the behaviour a record names and counts executions
// per event id, in order.
type streamHandler struct {
	clock *fakeclock.Clock
	runs  counter
	mu    sync.Mutex
	order []string
}

func (h *streamHandler) behave(id, do string) ([]byte, error) {
	n := h.runs.inc(id)
	h.mu.Lock()
	h.order = append(h.order, id)
	h.mu.Unlock()
	switch do {
	case "transient":
		return nil, core.MarkTransient(errors.New("downstream unavailable"))
	case "transient_once":
		if n == 1 {
			return nil, core.MarkTransient(errors.New("downstream unavailable"))
		}
	case "permanent":
		return nil, core.MarkPermanent(errors.New("order does not exist"))
	case "error":
		return nil, errors.New("warehouse said no") // nobody classified it
	case "error_twice":
		if n <= 2 {
			return nil, errors.New("warehouse said no") // nobody classified it
		}
	case "panic_once":
		if n == 1 {
			panic("handler bug")
		}
	case "advance_9s":
		h.clock.Advance(9 * time.Second)
	}
	return []byte(`"done ` + id + `"`), nil
}

func (h *streamHandler) kinesis(ctx context.Context, r events.KinesisEventRecord) ([]byte, error) {
	var b struct {
		EventID string `json:"event_id"`
		Do      string `json:"do"`
	}
	_ = json.Unmarshal(r.Kinesis.Data, &b)
	return h.behave(b.EventID, b.Do)
}

func (h *streamHandler) dynamodb(ctx context.Context, r events.DynamoDBEventRecord) ([]byte, error) {
	id, do := "", ""
	if v, ok := r.Change.Keys["id"]; ok && v.DataType() == events.DataTypeString {
		id = v.String()
	}
	if v, ok := r.Change.NewImage["do"]; ok && v.DataType() == events.DataTypeString {
		do = v.String()
	}
	return h.behave(id, do)
}

// streamCase is one scenario of a stream wrapper: batches of records of
// type R delivered in turn, each with the checkpoints it must report.
type streamCase[R any] struct {
	name    string
	runOpts []idem.Option
	opts    []idemlambda.BatchOption
	prepare func(t *testing.T, e *env)
	batches []streamBatch[R]
	runs    map[string]int // executions per event id after all batches
	order   []string       // executions in order, when checked
	timeout time.Duration  // the invocation's time left (default a minute)
}

type streamBatch[R any] struct {
	recs  []R
	want  []string      // checkpoints reported
	after time.Duration // the clock's advance after the batch (default 10 s)
}

// runStreamCase runs tc through the wrapper that build makes.
func runStreamCase[R any](t *testing.T, tc streamCase[R], build func(e *env, h *streamHandler, opts []idemlambda.BatchOption) (func(context.Context, []R) ([]string, error), error)) {
	t.Helper()
	e := newEnv(t, tc.runOpts...)
	h := &streamHandler{clock: e.clock}
	handle, err := build(e, h, append([]idemlambda.BatchOption{idemlambda.WithClock(e.clock.Now)}, tc.opts...))
	if err != nil {
		t.Fatal(err)
	}
	if tc.prepare != nil {
		tc.prepare(t, e)
	}
	timeout := cmp.Or(tc.timeout, time.Minute)
	for i, b := range tc.batches {
		got, err := handle(e.ctx(t, timeout), b.recs)
		if err != nil {
			t.Fatalf("batch %d: err = %v", i, err)
		}
		if !slices.Equal(got, b.want) {
			t.Errorf("batch %d: checkpoints = %v want %v", i, got, b.want)
		}
		e.clock.Advance(cmp.Or(b.after, 10*time.Second))
	}
	for id, want := range tc.runs {
		if got := h.runs.get(id); got != want {
			t.Errorf("executions of %q = %d want %d", id, got, want)
		}
	}
	if tc.order != nil && !slices.Equal(h.order, tc.order) {
		t.Errorf("execution order = %v want %v", h.order, tc.order)
	}
}

func kinesisBuild(source idemlambda.KinesisKeySource) func(e *env, h *streamHandler, opts []idemlambda.BatchOption) (func(context.Context, []events.KinesisEventRecord) ([]string, error), error) {
	return func(e *env, h *streamHandler, opts []idemlambda.BatchOption) (func(context.Context, []events.KinesisEventRecord) ([]string, error), error) {
		handle, err := idemlambda.Kinesis(e.runner, "audit", source, h.kinesis, opts...)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, recs []events.KinesisEventRecord) ([]string, error) {
			resp, err := handle(ctx, events.KinesisEvent{Records: recs})
			if resp.BatchItemFailures == nil {
				return nil, errors.New("batchItemFailures is null, want a list")
			}
			ids := []string{}
			for _, f := range resp.BatchItemFailures {
				ids = append(ids, f.ItemIdentifier)
			}
			return ids, err
		}, nil
	}
}

func dynamoDBBuild(source idemlambda.DynamoDBKeySource) func(e *env, h *streamHandler, opts []idemlambda.BatchOption) (func(context.Context, []events.DynamoDBEventRecord) ([]string, error), error) {
	return func(e *env, h *streamHandler, opts []idemlambda.BatchOption) (func(context.Context, []events.DynamoDBEventRecord) ([]string, error), error) {
		handle, err := idemlambda.DynamoDBStream(e.runner, "audit", source, h.dynamodb, opts...)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, recs []events.DynamoDBEventRecord) ([]string, error) {
			resp, err := handle(ctx, events.DynamoDBEvent{Records: recs})
			if resp.BatchItemFailures == nil {
				return nil, errors.New("batchItemFailures is null, want a list")
			}
			ids := []string{}
			for _, f := range resp.BatchItemFailures {
				ids = append(ids, f.ItemIdentifier)
			}
			return ids, err
		}, nil
	}
}

type kb = streamBatch[events.KinesisEventRecord]

// holdEvent holds the key of event id (data field source, action audit) in
// progress elsewhere, as a sandbox still running it would.
func holdEvent(id, do string, d time.Duration) func(t *testing.T, e *env) {
	return func(t *testing.T, e *env) {
		key, err := idemlambda.EventKey(id, "audit")
		if err != nil {
			t.Fatal(err)
		}
		e.hold(t, key, []byte(body(id, do)), e.clock.Now().Add(d))
	}
}

func TestKinesis(t *testing.T) {
	t.Parallel()
	ack := []idemlambda.BatchOption{acknowledgeAll}
	retryOnce := []idem.Option{idem.WithRetry(1, 0, 0)}
	noSeq := func(r events.KinesisEventRecord) events.KinesisEventRecord { r.Kinesis.SequenceNumber = ""; return r }
	tests := []streamCase[events.KinesisEventRecord]{
		{
			name:    "records of a shard run in order",
			batches: []kb{{recs: []events.KinesisEventRecord{k(1, "e1", "ok"), k(2, "e2", "ok"), k(3, "e3", "ok"), k(4, "e4", "ok"), k(5, "e5", "ok")}, want: cp()}},
			order:   []string{"e1", "e2", "e3", "e4", "e5"},
		},
		{
			name: "poison record in the middle stops the shard at it",
			batches: []kb{
				{recs: []events.KinesisEventRecord{k(1, "e1", "ok"), k(2, "e2", "permanent"), k(3, "e3", "ok"), k(4, "e4", "ok")}, want: cp(2)},
				{recs: []events.KinesisEventRecord{k(2, "e2", "permanent"), k(3, "e3", "ok"), k(4, "e4", "ok")}, want: cp(2)}, // retried from it: replayed
			},
			runs: map[string]int{"e1": 1, "e2": 1, "e3": 0, "e4": 0},
		},
		{
			name:    "permanent failure acknowledged when named: the shard goes on",
			opts:    ack,
			batches: []kb{{recs: []events.KinesisEventRecord{k(1, "e1", "permanent"), k(2, "e2", "ok")}, want: cp()}},
			runs:    map[string]int{"e1": 1, "e2": 1},
		},
		{
			name:    "transient failure is the checkpoint and the retry from it runs nothing before it",
			runOpts: retryOnce,
			batches: []kb{
				{recs: []events.KinesisEventRecord{k(1, "e1", "ok"), k(2, "e2", "transient_once"), k(3, "e3", "ok")}, want: cp(2)},
				{recs: []events.KinesisEventRecord{k(2, "e2", "transient_once"), k(3, "e3", "ok")}, want: cp()},
			},
			order: []string{"e1", "e2", "e2", "e3"},
		},
		{
			name:    "duplicate within a batch replays",
			batches: []kb{{recs: []events.KinesisEventRecord{k(1, "e1", "ok"), k(2, "e1", "ok"), k(3, "e2", "ok")}, want: cp()}},
			runs:    map[string]int{"e1": 1, "e2": 1},
		},
		{
			name: "duplicate across batches replays",
			batches: []kb{
				{recs: []events.KinesisEventRecord{k(1, "e1", "ok")}, want: cp()},
				{recs: []events.KinesisEventRecord{k(7, "e1", "ok"), k(8, "e2", "ok")}, want: cp()},
			},
			runs: map[string]int{"e1": 1, "e2": 1},
		},
		{
			name:    "whole-batch retry replays the completed records",
			runOpts: retryOnce,
			batches: []kb{
				{recs: []events.KinesisEventRecord{k(1, "e1", "ok"), k(2, "e2", "transient_once"), k(3, "e3", "ok")}, want: cp(2)},
				{recs: []events.KinesisEventRecord{k(1, "e1", "ok"), k(2, "e2", "transient_once"), k(3, "e3", "ok")}, want: cp()},
			},
			runs: map[string]int{"e1": 1, "e2": 2, "e3": 1},
		},
		{
			name:    "bisected halves of a batch replay what succeeded",
			runOpts: retryOnce,
			batches: []kb{
				{recs: []events.KinesisEventRecord{k(1, "e1", "ok"), k(2, "e2", "ok"), k(3, "e3", "ok"), k(4, "e4", "transient_once")}, want: cp(4)},
				{recs: []events.KinesisEventRecord{k(1, "e1", "ok"), k(2, "e2", "ok")}, want: cp()},
				{recs: []events.KinesisEventRecord{k(3, "e3", "ok"), k(4, "e4", "transient_once")}, want: cp()},
			},
			runs: map[string]int{"e1": 1, "e2": 1, "e3": 1, "e4": 2},
		},
		{
			name: "panic makes its record the checkpoint until its lease ends, then it is taken over",
			batches: []kb{
				{recs: []events.KinesisEventRecord{k(1, "e1", "ok"), k(2, "e2", "panic_once"), k(3, "e3", "ok")}, want: cp(2)},
				{recs: []events.KinesisEventRecord{k(2, "e2", "panic_once"), k(3, "e3", "ok")}, want: cp(2), after: 2 * time.Minute},
				{recs: []events.KinesisEventRecord{k(2, "e2", "panic_once"), k(3, "e3", "ok")}, want: cp()},
			},
			runs: map[string]int{"e1": 1, "e2": 2, "e3": 1},
		},
		{
			name:    "records not reached before the deadline: the first is the checkpoint",
			opts:    []idemlambda.BatchOption{idemlambda.WithSafetyMargin(2 * time.Second)},
			timeout: 10 * time.Second,
			batches: []kb{{recs: []events.KinesisEventRecord{k(1, "e1", "advance_9s"), k(2, "e2", "ok"), k(3, "e3", "ok")}, want: cp(2)}},
			runs:    map[string]int{"e1": 1, "e2": 0, "e3": 0},
		},
		{
			name:    "two shards in one event stop independently",
			runOpts: retryOnce,
			batches: []kb{{
				recs: []events.KinesisEventRecord{
					k(1, "a1", "ok"), k1(2, "b1", "ok"), k(3, "a2", "transient"), k1(4, "b2", "ok"),
					k(5, "a3", "ok"), k1(6, "b3", "transient"), k1(7, "b4", "ok"),
				},
				want: cp(3, 6),
			}},
			runs: map[string]int{"a1": 1, "a2": 1, "a3": 0, "b1": 1, "b2": 1, "b3": 1, "b4": 0},
		},
		{
			name:    "record in progress elsewhere is the checkpoint",
			prepare: holdEvent("e2", "ok", 5*time.Second),
			batches: []kb{
				{recs: []events.KinesisEventRecord{k(1, "e1", "ok"), k(2, "e2", "ok"), k(3, "e3", "ok")}, want: cp(2)},
				{recs: []events.KinesisEventRecord{k(2, "e2", "ok"), k(3, "e3", "ok")}, want: cp()}, // past the lease: taken over
			},
			runs: map[string]int{"e1": 1, "e2": 1, "e3": 1},
		},
		{
			name:    "records without a key are acknowledged when named",
			opts:    ack,
			batches: []kb{{recs: []events.KinesisEventRecord{kinRec(0, 1, `{"do":"ok"}`), kinRec(0, 2, "not json"), k(3, "e3", "ok")}, want: cp()}},
			runs:    map[string]int{"": 0, "e3": 1},
		},
		{
			name:    "record without a key is the checkpoint by default",
			batches: []kb{{recs: []events.KinesisEventRecord{k(1, "e1", "ok"), kinRec(0, 2, `{}`), k(3, "e3", "ok")}, want: cp(2)}},
			runs:    map[string]int{"e1": 1, "e3": 0},
		},
		{
			name: "key reused with other data is the checkpoint by default",
			batches: []kb{
				{recs: []events.KinesisEventRecord{k(1, "e1", "ok")}, want: cp()},
				{recs: []events.KinesisEventRecord{kinRec(0, 2, `{"event_id":"e1","do":"ok","amount":2}`), k(3, "e3", "ok")}, want: cp(2)},
			},
			runs: map[string]int{"e1": 1, "e3": 0},
		},
		{
			name: "key reused with other data is acknowledged when named",
			opts: []idemlambda.BatchOption{idemlambda.WithAcknowledged(idem.KeyReused)},
			batches: []kb{
				{recs: []events.KinesisEventRecord{k(1, "e1", "ok")}, want: cp()},
				{recs: []events.KinesisEventRecord{kinRec(0, 2, `{"event_id":"e1","do":"ok","amount":2}`), k(3, "e3", "ok")}, want: cp()},
			},
			runs: map[string]int{"e1": 1, "e3": 1},
		},
		{
			name:    "checkpoint without a sequence number is an empty identifier: the whole batch is retried",
			runOpts: retryOnce,
			batches: []kb{{recs: []events.KinesisEventRecord{k(1, "e1", "ok"), noSeq(k(2, "e2", "transient")), k(3, "e3", "ok")}, want: []string{""}}},
			runs:    map[string]int{"e1": 1, "e2": 1, "e3": 0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runStreamCase(t, tc, kinesisBuild(idemlambda.KinesisKeyFromDataField("event_id")))
		})
	}
}

func TestKinesisSequenceNumberKey(t *testing.T) {
	t.Parallel()
	runStreamCase(t, streamCase[events.KinesisEventRecord]{
		name: "a redelivered record replays; the same event put twice runs twice",
		batches: []kb{
			{recs: []events.KinesisEventRecord{k(1, "e1", "ok")}, want: cp()},
			{recs: []events.KinesisEventRecord{k(1, "e1", "ok"), k(2, "e1", "ok"), k1(1, "e1", "ok")}, want: cp()},
		},
		runs: map[string]int{"e1": 3}, // seq 1 on shard 0, seq 2, seq 1 on shard 1
	}, kinesisBuild(idemlambda.KinesisKeyFromSequenceNumber()))
}

type db = streamBatch[events.DynamoDBEventRecord]

func TestDynamoDBStream(t *testing.T) {
	t.Parallel()
	ack := []idemlambda.BatchOption{acknowledgeAll}
	retryOnce := []idem.Option{idem.WithRetry(1, 0, 0)}
	keys, byEvent, byImage := idemlambda.DynamoDBKeyFromItemKeys(), idemlambda.DynamoDBKeyFromEventID(), idemlambda.DynamoDBKeyFromNewImage("id")
	tests := []struct {
		streamCase[events.DynamoDBEventRecord]
		source idemlambda.DynamoDBKeySource
	}{
		{source: keys, streamCase: streamCase[events.DynamoDBEventRecord]{
			name:    "records run in order",
			batches: []db{{recs: []events.DynamoDBEventRecord{d(1, "o1", "ok"), d(2, "o2", "ok"), d(3, "o3", "ok"), d(4, "o4", "ok")}, want: cp()}},
			order:   []string{"o1", "o2", "o3", "o4"},
		}},
		{source: keys, streamCase: streamCase[events.DynamoDBEventRecord]{
			name: "poison record in the middle stops the shard at it",
			batches: []db{
				{recs: []events.DynamoDBEventRecord{d(1, "o1", "ok"), d(2, "o2", "permanent"), d(3, "o3", "ok")}, want: cp(2)},
				{recs: []events.DynamoDBEventRecord{d(2, "o2", "permanent"), d(3, "o3", "ok")}, want: cp(2)},
			},
			runs: map[string]int{"o1": 1, "o2": 1, "o3": 0},
		}},
		{source: keys, streamCase: streamCase[events.DynamoDBEventRecord]{
			name:    "whole-batch retry and bisected halves replay what succeeded",
			runOpts: retryOnce,
			batches: []db{
				{recs: []events.DynamoDBEventRecord{d(1, "o1", "ok"), d(2, "o2", "ok"), d(3, "o3", "transient_once"), d(4, "o4", "ok")}, want: cp(3)},
				{recs: []events.DynamoDBEventRecord{d(1, "o1", "ok"), d(2, "o2", "ok")}, want: cp()},
				{recs: []events.DynamoDBEventRecord{d(3, "o3", "transient_once"), d(4, "o4", "ok")}, want: cp()},
				{recs: []events.DynamoDBEventRecord{d(1, "o1", "ok"), d(2, "o2", "ok"), d(3, "o3", "transient_once"), d(4, "o4", "ok")}, want: cp()},
			},
			runs: map[string]int{"o1": 1, "o2": 1, "o3": 2, "o4": 1},
		}},
		{source: keys, streamCase: streamCase[events.DynamoDBEventRecord]{
			name: "the same item inserted again within and across batches replays",
			batches: []db{
				{recs: []events.DynamoDBEventRecord{d(1, "o1", "ok"), d(2, "o1", "ok")}, want: cp()},
				{recs: []events.DynamoDBEventRecord{d(3, "o1", "ok")}, want: cp()},
			},
			runs: map[string]int{"o1": 1},
		}},
		{source: keys, streamCase: streamCase[events.DynamoDBEventRecord]{
			name:    "item keys: a later change of the item is a reused key, acknowledged when named",
			opts:    ack,
			batches: []db{{recs: []events.DynamoDBEventRecord{d(1, "o1", "ok"), ddbRec(2, "MODIFY", "o1", "ok"), d(3, "o2", "ok")}, want: cp()}},
			runs:    map[string]int{"o1": 1, "o2": 1},
		}},
		{source: keys, streamCase: streamCase[events.DynamoDBEventRecord]{
			name:    "item keys: a later change of the item is the checkpoint by default",
			batches: []db{{recs: []events.DynamoDBEventRecord{d(1, "o1", "ok"), ddbRec(2, "MODIFY", "o1", "ok"), d(3, "o2", "ok")}, want: cp(2)}},
			runs:    map[string]int{"o1": 1, "o2": 0},
		}},
		{source: byEvent, streamCase: streamCase[events.DynamoDBEventRecord]{
			name: "event id: every change runs once and its redelivery replays",
			batches: []db{
				{recs: []events.DynamoDBEventRecord{d(1, "o1", "ok"), ddbRec(2, "MODIFY", "o1", "ok"), ddbRec(3, "REMOVE", "o1", "")}, want: cp()},
				{recs: []events.DynamoDBEventRecord{ddbRec(2, "MODIFY", "o1", "ok"), ddbRec(3, "REMOVE", "o1", "")}, want: cp()},
			},
			runs: map[string]int{"o1": 3},
		}},
		{source: byImage, streamCase: streamCase[events.DynamoDBEventRecord]{
			name:    "NewImage attribute: a REMOVE has none and is the checkpoint by default",
			batches: []db{{recs: []events.DynamoDBEventRecord{d(1, "o1", "ok"), ddbRec(2, "REMOVE", "o1", ""), d(3, "o3", "ok")}, want: cp(2)}},
			runs:    map[string]int{"o1": 1, "o3": 0},
		}},
		{source: keys, streamCase: streamCase[events.DynamoDBEventRecord]{
			name: "panic makes its record the checkpoint",
			batches: []db{
				{recs: []events.DynamoDBEventRecord{d(1, "o1", "ok"), d(2, "o2", "panic_once"), d(3, "o3", "ok")}, want: cp(2), after: 2 * time.Minute},
				{recs: []events.DynamoDBEventRecord{d(2, "o2", "panic_once"), d(3, "o3", "ok")}, want: cp()},
			},
			runs: map[string]int{"o1": 1, "o2": 2, "o3": 1},
		}},
		{source: keys, streamCase: streamCase[events.DynamoDBEventRecord]{
			name:    "records not reached before the deadline: the first is the checkpoint",
			opts:    []idemlambda.BatchOption{idemlambda.WithSafetyMargin(2 * time.Second)},
			timeout: 10 * time.Second,
			batches: []db{{recs: []events.DynamoDBEventRecord{d(1, "o1", "advance_9s"), d(2, "o2", "ok"), d(3, "o3", "ok")}, want: cp(2)}},
			runs:    map[string]int{"o1": 1, "o2": 0, "o3": 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runStreamCase(t, tc.streamCase, dynamoDBBuild(tc.source))
		})
	}
}

func TestKinesisKeySources(t *testing.T) {
	t.Parallel()
	rec := kinRec(3, 7, `{"event_id":"e-7","detail":{"order":{"id":42}},"flag":true}`)
	tests := []struct {
		name    string
		source  idemlambda.KinesisKeySource
		rec     events.KinesisEventRecord
		want    string
		wantErr bool
	}{
		{"data field", idemlambda.KinesisKeyFromDataField("event_id"), rec, "e-7", false},
		{"dotted path to a number", idemlambda.KinesisKeyFromDataField("detail.order.id"), rec, "42", false},
		{"missing field", idemlambda.KinesisKeyFromDataField("detail.customer"), rec, "", true},
		{"boolean field", idemlambda.KinesisKeyFromDataField("flag"), rec, "", true},
		{"data not JSON", idemlambda.KinesisKeyFromDataField("event_id"), kinRec(0, 1, "plain"), "", true},
		{"empty path", idemlambda.KinesisKeyFromDataField(""), rec, "", true},
		{"partition key", idemlambda.KinesisKeyFromPartitionKey(), rec, "pk-7", false},
		{"empty partition key", idemlambda.KinesisKeyFromPartitionKey(), events.KinesisEventRecord{}, "", true},
		{"sequence number with its shard", idemlambda.KinesisKeyFromSequenceNumber(), rec, kinesisARN + "/shardId-000000000003/" + seqN(7), false},
		{"no sequence number", idemlambda.KinesisKeyFromSequenceNumber(), events.KinesisEventRecord{}, "", true},
		{"zero source", idemlambda.KinesisKeySource{}, rec, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.source.EventID(tc.rec)
			if tc.wantErr {
				if !errors.Is(err, idemlambda.ErrMissingKey) {
					t.Fatalf("EventID = %q, %v; want an error wrapping ErrMissingKey", got, err)
				}
				if _, err := idemlambda.KinesisKey(tc.source, "audit", tc.rec); err == nil {
					t.Fatal("KinesisKey succeeded for a record without a key")
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("EventID = %q, %v; want %q", got, err, tc.want)
			}
			key, err := idemlambda.KinesisKey(tc.source, "audit", tc.rec)
			if want, _ := idemlambda.EventKey(tc.want, "audit"); err != nil || key != want {
				t.Fatalf("KinesisKey = %q, %v; want EventKey(%q, audit) = %q", key, err, tc.want, want)
			}
		})
	}
}

func TestDynamoDBKeySources(t *testing.T) {
	t.Parallel()
	rec := d(1, "o1", "ok")
	rec.Change.NewImage["detail"] = events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"event_id": str("evt-9"), "n": num("12.50"), "empty": str("")})
	rec.Change.NewImage["flag"] = events.NewBooleanAttribute(true)
	broken := d(2, "o2", "ok")
	broken.Change.NewImage["id"] = events.DynamoDBAttributeValue{} // built in Go, not decoded: its accessors panic
	broken.Change.Keys["id"] = events.DynamoDBAttributeValue{}
	tests := []struct {
		name    string
		source  idemlambda.DynamoDBKeySource
		rec     events.DynamoDBEventRecord
		want    string // "" with wantErr false: any non-empty identity
		wantErr bool
	}{
		{"item keys", idemlambda.DynamoDBKeyFromItemKeys(), rec, "", false},
		{"no keys", idemlambda.DynamoDBKeyFromItemKeys(), events.DynamoDBEventRecord{}, "", true},
		{"malformed key value", idemlambda.DynamoDBKeyFromItemKeys(), broken, "", true},
		{"event id", idemlambda.DynamoDBKeyFromEventID(), rec, rec.EventID, false},
		{"no event id", idemlambda.DynamoDBKeyFromEventID(), events.DynamoDBEventRecord{}, "", true},
		{"NewImage string", idemlambda.DynamoDBKeyFromNewImage("id"), rec, "o1", false},
		{"NewImage nested string", idemlambda.DynamoDBKeyFromNewImage("detail.event_id"), rec, "evt-9", false},
		{"NewImage nested number", idemlambda.DynamoDBKeyFromNewImage("detail.n"), rec, "12.50", false},
		{"NewImage empty string", idemlambda.DynamoDBKeyFromNewImage("detail.empty"), rec, "", true},
		{"NewImage boolean", idemlambda.DynamoDBKeyFromNewImage("flag"), rec, "", true},
		{"NewImage map", idemlambda.DynamoDBKeyFromNewImage("detail"), rec, "", true},
		{"NewImage path through a string", idemlambda.DynamoDBKeyFromNewImage("id.x"), rec, "", true},
		{"NewImage missing attribute", idemlambda.DynamoDBKeyFromNewImage("customer"), rec, "", true},
		{"NewImage malformed value", idemlambda.DynamoDBKeyFromNewImage("id"), broken, "", true},
		{"no NewImage (a REMOVE)", idemlambda.DynamoDBKeyFromNewImage("id"), ddbRec(3, "REMOVE", "o3", ""), "", true},
		{"empty path", idemlambda.DynamoDBKeyFromNewImage(""), rec, "", true},
		{"zero source", idemlambda.DynamoDBKeySource{}, rec, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.source.EventID(tc.rec)
			if tc.wantErr {
				if !errors.Is(err, idemlambda.ErrMissingKey) {
					t.Fatalf("EventID = %q, %v; want an error wrapping ErrMissingKey", got, err)
				}
				if _, err := idemlambda.DynamoDBStreamKey(tc.source, "audit", tc.rec); err == nil {
					t.Fatal("DynamoDBStreamKey succeeded for a record without a key")
				}
				return
			}
			if err != nil || got == "" || (tc.want != "" && got != tc.want) {
				t.Fatalf("EventID = %q, %v; want %q", got, err, tc.want)
			}
			key, err := idemlambda.DynamoDBStreamKey(tc.source, "audit", tc.rec)
			if want, _ := idemlambda.EventKey(got, "audit"); err != nil || key != want {
				t.Fatalf("DynamoDBStreamKey = %q, %v; want EventKey(%q, audit) = %q", key, err, got, want)
			}
		})
	}
}

// TestDynamoDBItemKeysIdentity: the item-keys identity depends on the key
// values with their types and on the table, not on the stream's label, the
// change or the images.
func TestDynamoDBItemKeysIdentity(t *testing.T) {
	t.Parallel()
	id := func(edit func(*events.DynamoDBEventRecord)) string {
		r := d(1, "o1", "ok")
		r.Change.Keys["sk"] = num("7")
		edit(&r)
		got, err := idemlambda.DynamoDBKeyFromItemKeys().EventID(r)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(got, "o1") {
			t.Fatalf("identity %q holds a key value verbatim", got)
		}
		return got
	}
	base := id(func(*events.DynamoDBEventRecord) {})
	tests := []struct {
		name string
		edit func(*events.DynamoDBEventRecord)
		same bool
	}{
		{"another change of the item", func(r *events.DynamoDBEventRecord) {
			*r = ddbRec(9, "MODIFY", "o1", "x")
			r.Change.Keys["sk"] = num("7")
		}, true},
		{"another stream of the same table", func(r *events.DynamoDBEventRecord) { r.EventSourceArn = tableARN + "/stream/2031-06-01T00:00:00.000" }, true},
		{"keys rebuilt in another order", func(r *events.DynamoDBEventRecord) {
			r.Change.Keys = map[string]events.DynamoDBAttributeValue{"sk": num("7"), "id": str("o1")}
		}, true},
		{"another key value", func(r *events.DynamoDBEventRecord) { r.Change.Keys["sk"] = num("8") }, false},
		{"the same value as another type", func(r *events.DynamoDBEventRecord) { r.Change.Keys["sk"] = str("7") }, false},
		{"another table", func(r *events.DynamoDBEventRecord) {
			r.EventSourceArn = "arn:aws:dynamodb:eu-west-1:123456789012:table/returns/stream/2030-01-01T00:00:00.000"
		}, false},
		{"names and values swapped across attributes", func(r *events.DynamoDBEventRecord) {
			r.Change.Keys = map[string]events.DynamoDBAttributeValue{"id": num("7"), "sk": str("o1")}
		}, false},
	}
	for _, tc := range tests {
		if got := id(tc.edit); (got == base) != tc.same {
			t.Errorf("%s: identity %q, base %q, want same = %v", tc.name, got, base, tc.same)
		}
	}
}

func TestStreamLogs(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	e := newEnv(t, idem.WithRetry(1, 0, 0), idem.WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
	h := &streamHandler{clock: e.clock}
	handle, err := idemlambda.Kinesis(e.runner, "audit", idemlambda.KinesisKeyFromDataField("event_id"), h.kinesis)
	if err != nil {
		t.Fatal(err)
	}
	recs := []events.KinesisEventRecord{k(1, "secret-1", "ok"), k(2, "secret-2", "transient"), k(3, "secret-3", "ok")}
	if _, err := handle(e.ctx(t, time.Minute), events.KinesisEvent{Records: recs}); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		seq, verdict string
		reported     bool
	}{{seqN(1), "executed", false}, {seqN(2), "failed_transiently", true}, {seqN(3), "blocked", false}}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d log records, want %d: %s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		var r map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &r); err != nil {
			t.Fatalf("log line %q: %v", lines[i], err)
		}
		if r["wrapper"] != "kinesis" || r["sequence_number"] != w.seq || r["verdict"] != w.verdict || r["reported"] != w.reported {
			t.Errorf("record %d = %v; want sequence_number %s verdict %s reported %v", i, r, w.seq, w.verdict, w.reported)
		}
	}
	if strings.Contains(buf.String(), "secret-") {
		t.Errorf("logs hold an event id or data verbatim: %s", buf.String())
	}
}

func TestStreamOptionErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	kh := func(context.Context, events.KinesisEventRecord) ([]byte, error) { return nil, nil }
	dh := func(context.Context, events.DynamoDBEventRecord) ([]byte, error) { return nil, nil }
	ks, ds := idemlambda.KinesisKeyFromPartitionKey(), idemlambda.DynamoDBKeyFromEventID()
	tests := []struct {
		name string
		make func() error
	}{
		{"kinesis: nil runner", func() error { _, err := idemlambda.Kinesis(nil, "a", ks, kh); return err }},
		{"kinesis: nil handler", func() error { _, err := idemlambda.Kinesis(e.runner, "a", ks, nil); return err }},
		{"kinesis: empty action", func() error { _, err := idemlambda.Kinesis(e.runner, "", ks, kh); return err }},
		{"kinesis: zero key source", func() error {
			_, err := idemlambda.Kinesis(e.runner, "a", idemlambda.KinesisKeySource{}, kh)
			return err
		}},
		{"kinesis: zero concurrency", func() error {
			_, err := idemlambda.Kinesis(e.runner, "a", ks, kh, idemlambda.WithConcurrency(0))
			return err
		}},
		{"dynamodb: nil runner", func() error { _, err := idemlambda.DynamoDBStream(nil, "a", ds, dh); return err }},
		{"dynamodb: nil handler", func() error { _, err := idemlambda.DynamoDBStream(e.runner, "a", ds, nil); return err }},
		{"dynamodb: action with a control character", func() error { _, err := idemlambda.DynamoDBStream(e.runner, "a\n", ds, dh); return err }},
		{"dynamodb: zero key source", func() error {
			_, err := idemlambda.DynamoDBStream(e.runner, "a", idemlambda.DynamoDBKeySource{}, dh)
			return err
		}},
		{"dynamodb: negative safety margin", func() error {
			_, err := idemlambda.DynamoDBStream(e.runner, "a", ds, dh, idemlambda.WithSafetyMargin(-time.Second))
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.make(); err == nil {
				t.Fatal("constructor succeeded, want an error")
			}
		})
	}
}
