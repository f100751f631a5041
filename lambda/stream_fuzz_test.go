package idemlambda_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
)

// decodeEvent decodes raw as the Lambda runtime does before any wrapper
// runs, and reports whether it decoded. aws-lambda-go's DynamoDB attribute
// decoder panics on some malformed sets ({"BS":[1]}); lambda.Start recovers
// that panic into a function error of the whole invocation, which Lambda
// retries like any other: it never reaches the wrapper.
func decodeEvent(raw string, v any) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return json.Unmarshal([]byte(raw), v) == nil
}

// checkStreamAnswer checks a stream wrapper's answer against its log, one
// record per delivered record: every record is accounted for (done,
// acknowledged, reported, or unstarted after its shard's checkpoint); the
// reported identifiers are exactly the sequence numbers of the records
// logged as reported; a shard reports at most one; and a record is left
// unstarted only when its shard reported a checkpoint.
func checkStreamAnswer(t *testing.T, n int, reported []string, log string, lane func(rec map[string]any) string) {
	t.Helper()
	var lines []map[string]any
	for _, rec := range jsonLines(t, log) {
		if rec["verdict"] != nil { // not an in-process retry's record
			lines = append(lines, rec)
		}
	}
	if len(lines) != n {
		t.Fatalf("%d log records for %d records:\n%s", len(lines), n, log)
	}
	var fromLog []string
	stopped := map[string]bool{}
	for _, rec := range lines {
		if rec["reported"] == true {
			if stopped[lane(rec)] {
				t.Fatalf("shard %q reported twice:\n%s", lane(rec), log)
			}
			stopped[lane(rec)] = true
			fromLog = append(fromLog, rec["sequence_number"].(string))
		}
	}
	for _, rec := range lines {
		if rec["verdict"] == "blocked" && rec["reported"] == false && !stopped[lane(rec)] {
			t.Fatalf("record %v left unstarted without a checkpoint for its shard", rec)
		}
	}
	got := slices.Clone(reported)
	slices.Sort(got)
	slices.Sort(fromLog)
	if !slices.Equal(got, fromLog) {
		t.Fatalf("reported %q, but the log reports %q:\n%s", got, fromLog, log)
	}
}

// acknowledgeAll acknowledges every verdict that can be.
var acknowledgeAll = idemlambda.WithAcknowledged(idem.FailedPermanently, idem.ReplayedFailure, idem.RetriesExhausted,
	idem.KeyReused, idem.MissingKey, idem.InvalidKey, idem.InvalidPayload)

func kinesisLane(rec map[string]any) string {
	shard, _, ok := strings.Cut(rec["event_id"].(string), ":")
	if !ok {
		shard = "" // no shard id: the stream alone
	}
	return rec["event_source_arn"].(string) + "/" + shard
}

// FuzzKinesisEvent: any Kinesis event JSON (data in base64, as AWS sends
// it) is handled without a panic or an error, and every record is done,
// acknowledged, reported as its shard's checkpoint, or after it.
func FuzzKinesisEvent(f *testing.F) {
	f.Add(`{"Records":[{"eventID":"shardId-000000000000:1","eventSourceARN":"arn:k","kinesis":{"sequenceNumber":"1","partitionKey":"p","data":"eyJldmVudF9pZCI6ImUxIn0="}}]}`, false)
	f.Add(`{"Records":[{"eventID":"shardId-1:1","kinesis":{"sequenceNumber":"1","data":"eyJldmVudF9pZCI6ImUxIiwiZmFpbCI6MX0="}},{"eventID":"shardId-1:2","kinesis":{"sequenceNumber":"2","data":"eyJldmVudF9pZCI6ImUyIn0="}},{"eventID":"shardId-2:3","kinesis":{"sequenceNumber":"3","data":"//79"}}]}`, true)
	f.Add(`{"Records":[{"kinesis":{"data":""}},{"kinesis":{"sequenceNumber":"","data":null}}]}`, true)
	f.Add(`{"Records":[{"eventID":"0"},{}]}`, true) // no shard id, no data: one lane
	f.Fuzz(func(t *testing.T, raw string, ack bool) {
		var ev events.KinesisEvent
		if !decodeEvent(raw, &ev) || len(ev.Records) > 50 {
			return
		}
		var buf syncBuffer
		e := newEnv(t, idem.WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
		var opts []idemlambda.BatchOption
		if ack {
			opts = append(opts, acknowledgeAll)
		}
		handle, err := idemlambda.Kinesis(e.runner, "fuzz", idemlambda.KinesisKeyFromDataField("event_id"),
			func(ctx context.Context, r events.KinesisEventRecord) ([]byte, error) {
				if bytes.Contains(r.Kinesis.Data, []byte("fail")) {
					return nil, core.MarkTransient(errors.New("downstream unavailable"))
				}
				return nil, nil
			}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := handle(e.ctx(t, time.Minute), ev)
		if err != nil || resp.BatchItemFailures == nil {
			t.Fatalf("answer %+v, %v", resp, err)
		}
		var ids []string
		for _, f := range resp.BatchItemFailures {
			ids = append(ids, f.ItemIdentifier)
		}
		checkStreamAnswer(t, len(ev.Records), ids, buf.String(), kinesisLane)
	})
}

// FuzzDynamoDBEvent: any DynamoDB Streams event JSON is handled without a
// panic or an error, and every record is done, acknowledged, reported as
// its shard's checkpoint, or after it.
func FuzzDynamoDBEvent(f *testing.F) {
	f.Add(`{"Records":[{"eventID":"1","eventName":"INSERT","eventSourceARN":"arn:t/stream/x","dynamodb":{"Keys":{"id":{"S":"o1"}},"NewImage":{"id":{"S":"o1"},"n":{"N":"1"}},"SequenceNumber":"100"}}]}`, false)
	f.Add(`{"Records":[{"eventName":"fail","dynamodb":{"Keys":{"id":{"N":"1"}},"SequenceNumber":"1"}},{"eventName":"INSERT","dynamodb":{"Keys":{"id":{"N":"1"}},"SequenceNumber":"2"}},{"dynamodb":{}}]}`, true)
	f.Add(`{"Records":[{"dynamodb":{"Keys":{"b":{"B":"AAE="},"s":{"SS":["b","a"]},"l":{"L":[{"NULL":true},{"M":{"x":{"BOOL":false}}}]}},"SequenceNumber":"1"}}]}`, true)
	f.Fuzz(func(t *testing.T, raw string, ack bool) {
		var ev events.DynamoDBEvent
		if !decodeEvent(raw, &ev) || len(ev.Records) > 50 {
			return
		}
		var buf syncBuffer
		e := newEnv(t, idem.WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
		var opts []idemlambda.BatchOption
		if ack {
			opts = append(opts, acknowledgeAll)
		}
		handle, err := idemlambda.DynamoDBStream(e.runner, "fuzz", idemlambda.DynamoDBKeyFromItemKeys(),
			func(ctx context.Context, r events.DynamoDBEventRecord) ([]byte, error) {
				if strings.Contains(r.EventName, "fail") {
					return nil, core.MarkTransient(errors.New("downstream unavailable"))
				}
				return nil, nil
			}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := handle(e.ctx(t, time.Minute), ev)
		if err != nil || resp.BatchItemFailures == nil {
			t.Fatalf("answer %+v, %v", resp, err)
		}
		var ids []string
		for _, f := range resp.BatchItemFailures {
			ids = append(ids, f.ItemIdentifier)
		}
		checkStreamAnswer(t, len(ev.Records), ids, buf.String(), func(rec map[string]any) string { return rec["event_source_arn"].(string) })
	})
}
