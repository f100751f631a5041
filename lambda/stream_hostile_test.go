package idemlambda_test

// Hostile inputs for the stream wrappers: every case asserts that the
// wrapper does not panic, never returns an error, and reports the
// checkpoint the documentation promises: a transient failure always, a
// documented permanent case (no usable key or payload) unless
// WithAcknowledged names it.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
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

// hostileStream is one hostile batch of records R. want is the checkpoints
// reported with every permanent verdict acknowledged (WithAcknowledged) and
// by default, runs the handler's executions in each mode.
type hostileStream[R any] struct {
	name string
	recs []R
	want [2][]string
	runs [2]int
}

// runHostileStream runs c in both modes through the wrapper that build
// makes with a handler that fails transiently on records it calls failing.
func runHostileStream[R any](t *testing.T, c hostileStream[R], build func(e *env, h func(context.Context, R) ([]byte, error), opts ...idemlambda.BatchOption) (func(context.Context, []R) []string, error), failing func(R) bool) {
	for mode, dlq := range []bool{false, true} {
		name := c.name + "/acknowledged when named"
		if dlq {
			name = c.name + "/reported by default"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, idem.WithRetry(2, 0, 0))
			var runs counter
			var opts []idemlambda.BatchOption
			if !dlq {
				opts = append(opts, acknowledgeAll)
			}
			handle, err := build(e, func(ctx context.Context, r R) ([]byte, error) {
				runs.inc("all")
				if failing(r) {
					return nil, core.MarkTransient(errors.New("downstream unavailable"))
				}
				return nil, nil
			}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			got := handle(e.ctx(t, time.Minute), c.recs)
			want := append([]string{}, c.want[mode]...)
			if !slices.Equal(got, want) {
				t.Errorf("reported %.80q, want %.80q", got, want)
			}
			if n := runs.get("all"); n != c.runs[mode] {
				t.Errorf("handler ran %d times, want %d", n, c.runs[mode])
			}
		})
	}
}

func hostileKinesis(source idemlambda.KinesisKeySource) func(e *env, h func(context.Context, events.KinesisEventRecord) ([]byte, error), opts ...idemlambda.BatchOption) (func(context.Context, []events.KinesisEventRecord) []string, error) {
	return func(e *env, h func(context.Context, events.KinesisEventRecord) ([]byte, error), opts ...idemlambda.BatchOption) (func(context.Context, []events.KinesisEventRecord) []string, error) {
		handle, err := idemlambda.Kinesis(e.runner, "hostile", source, h, opts...)
		return func(ctx context.Context, recs []events.KinesisEventRecord) []string {
			resp, err := handle(ctx, events.KinesisEvent{Records: recs})
			if err != nil || resp.BatchItemFailures == nil {
				return []string{fmt.Sprintf("answer %+v, %v", resp, err)}
			}
			ids := []string{}
			for _, f := range resp.BatchItemFailures {
				ids = append(ids, f.ItemIdentifier)
			}
			return ids
		}, err
	}
}

func TestHostileKinesis(t *testing.T) {
	t.Parallel()
	byField, bySeq, byPK := idemlambda.KinesisKeyFromDataField("event_id"), idemlambda.KinesisKeyFromSequenceNumber(), idemlambda.KinesisKeyFromPartitionKey()
	deep := nested(hostileDepth, "[", "", "]")
	edit := func(r events.KinesisEventRecord, f func(*events.KinesisEventRecord)) events.KinesisEventRecord {
		f(&r)
		return r
	}
	noSeq := func(r *events.KinesisEventRecord) { r.Kinesis.SequenceNumber = "" }
	tests := []struct {
		source idemlambda.KinesisKeySource
		hostileStream[events.KinesisEventRecord]
	}{
		{byField, hostileStream[events.KinesisEventRecord]{name: "data not JSON, key from a data field",
			recs: []events.KinesisEventRecord{kinRec(0, 1, "plain text"), k(2, "e2", "ok")}, want: [2][]string{cp(), cp(1)}, runs: [2]int{1, 0}}},
		{bySeq, hostileStream[events.KinesisEventRecord]{name: "binary data, key from the sequence number",
			recs: []events.KinesisEventRecord{kinRec(0, 1, "\xff\x00\xfe"), kinRec(0, 2, "")}, want: [2][]string{cp(), cp()}, runs: [2]int{2, 2}}},
		{byField, hostileStream[events.KinesisEventRecord]{name: "deeply nested data, key from a data field",
			recs: []events.KinesisEventRecord{kinRec(0, 1, deep)}, want: [2][]string{cp(), cp(1)}}},
		// Data nested deeper than core.MaxDepth is an invalid payload:
		// permanent, the handler does not run.
		{bySeq, hostileStream[events.KinesisEventRecord]{name: "deeply nested data, key from the sequence number",
			recs: []events.KinesisEventRecord{kinRec(0, 1, deep)}, want: [2][]string{cp(), cp(1)}}},
		{byField, hostileStream[events.KinesisEventRecord]{name: "1 MiB data",
			recs: []events.KinesisEventRecord{kinRec(0, 1, oneMiB)}, want: [2][]string{cp(), cp()}, runs: [2]int{1, 1}}},
		{byField, hostileStream[events.KinesisEventRecord]{name: "invalid UTF-8 in the key field",
			recs: []events.KinesisEventRecord{kinRec(0, 1, "{\"event_id\":\"e\xff\"}")}, want: [2][]string{cp(), cp()}, runs: [2]int{1, 1}}},
		{byField, hostileStream[events.KinesisEventRecord]{name: "control character in the key field",
			recs: []events.KinesisEventRecord{kinRec(0, 1, `{"event_id":"e\u0000"}`)}, want: [2][]string{cp(), cp(1)}}},
		{byPK, hostileStream[events.KinesisEventRecord]{name: "64 KiB partition key",
			recs: []events.KinesisEventRecord{edit(k(1, "e1", "ok"), func(r *events.KinesisEventRecord) { r.Kinesis.PartitionKey = strings.Repeat("p", 64<<10) })},
			want: [2][]string{cp(), cp(1)}}},
		{bySeq, hostileStream[events.KinesisEventRecord]{name: "no sequence number, key from the sequence number",
			recs: []events.KinesisEventRecord{k(1, "e1", "ok"), edit(k(2, "e2", "ok"), noSeq), k(3, "e3", "ok")}, want: [2][]string{cp(), {""}}, runs: [2]int{2, 1}}},
		{byField, hostileStream[events.KinesisEventRecord]{name: "no sequence number, transient failure",
			recs: []events.KinesisEventRecord{edit(k(1, "e1", "fail"), noSeq), k(2, "e2", "ok")}, want: [2][]string{{""}, {""}}, runs: [2]int{2, 2}}},
		{byField, hostileStream[events.KinesisEventRecord]{name: "no event id and no source ARN: one lane",
			recs: []events.KinesisEventRecord{
				edit(k(1, "e1", "fail"), func(r *events.KinesisEventRecord) { r.EventID, r.EventSourceArn = "", "" }),
				edit(k1(2, "e2", "ok"), func(r *events.KinesisEventRecord) { r.EventID, r.EventSourceArn = "", "" }),
			}, want: [2][]string{cp(1), cp(1)}, runs: [2]int{2, 2}}},
		{byField, hostileStream[events.KinesisEventRecord]{name: "the same record twice in a batch",
			recs: []events.KinesisEventRecord{k(1, "e1", "ok"), k(1, "e1", "ok")}, want: [2][]string{cp(), cp()}, runs: [2]int{1, 1}}},
		{byField, hostileStream[events.KinesisEventRecord]{name: "no records"}},
	}
	for _, tc := range tests {
		runHostileStream(t, tc.hostileStream, hostileKinesis(tc.source), func(r events.KinesisEventRecord) bool {
			return strings.Contains(string(r.Kinesis.Data), `"fail"`)
		})
	}
}

func hostileDynamoDB(source idemlambda.DynamoDBKeySource) func(e *env, h func(context.Context, events.DynamoDBEventRecord) ([]byte, error), opts ...idemlambda.BatchOption) (func(context.Context, []events.DynamoDBEventRecord) []string, error) {
	return func(e *env, h func(context.Context, events.DynamoDBEventRecord) ([]byte, error), opts ...idemlambda.BatchOption) (func(context.Context, []events.DynamoDBEventRecord) []string, error) {
		handle, err := idemlambda.DynamoDBStream(e.runner, "hostile", source, h, opts...)
		return func(ctx context.Context, recs []events.DynamoDBEventRecord) []string {
			resp, err := handle(ctx, events.DynamoDBEvent{Records: recs})
			if err != nil || resp.BatchItemFailures == nil {
				return []string{fmt.Sprintf("answer %+v, %v", resp, err)}
			}
			ids := []string{}
			for _, f := range resp.BatchItemFailures {
				ids = append(ids, f.ItemIdentifier)
			}
			return ids
		}, err
	}
}

// nestedMap is a map attribute nested depth deep.
func nestedMap(depth int) events.DynamoDBAttributeValue {
	v := str("leaf")
	for range depth {
		v = events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"a": v})
	}
	return v
}

func TestHostileDynamoDBStream(t *testing.T) {
	t.Parallel()
	keys, byEvent := idemlambda.DynamoDBKeyFromItemKeys(), idemlambda.DynamoDBKeyFromEventID()
	edit := func(r events.DynamoDBEventRecord, f func(*events.DynamoDBEventRecord)) events.DynamoDBEventRecord {
		f(&r)
		return r
	}
	wide := map[string]events.DynamoDBAttributeValue{"id": str("o1")}
	for i := range 10000 {
		wide[fmt.Sprintf("attr_%05d", i)] = num(fmt.Sprint(i))
	}
	tests := []struct {
		source idemlambda.DynamoDBKeySource
		hostileStream[events.DynamoDBEventRecord]
	}{
		{keys, hostileStream[events.DynamoDBEventRecord]{name: "no keys",
			recs: []events.DynamoDBEventRecord{edit(d(1, "o1", "ok"), func(r *events.DynamoDBEventRecord) { r.Change.Keys = nil }), d(2, "o2", "ok")},
			want: [2][]string{cp(), cp(1)}, runs: [2]int{1, 0}}},
		{keys, hostileStream[events.DynamoDBEventRecord]{name: "DynamoDB's largest keys: 2 KiB partition and 1 KiB sort key",
			recs: []events.DynamoDBEventRecord{edit(d(1, "o1", "ok"), func(r *events.DynamoDBEventRecord) {
				r.Change.Keys = map[string]events.DynamoDBAttributeValue{"id": str(strings.Repeat("p", 2048)), "sk": str(strings.Repeat("s", 1024))}
			})}, want: [2][]string{cp(), cp()}, runs: [2]int{1, 1}}},
		{keys, hostileStream[events.DynamoDBEventRecord]{name: "1 MiB string attribute",
			recs: []events.DynamoDBEventRecord{edit(d(1, "o1", "ok"), func(r *events.DynamoDBEventRecord) { r.Change.NewImage["pad"] = str(strings.Repeat("x", 1<<20)) })},
			want: [2][]string{cp(), cp()}, runs: [2]int{1, 1}}},
		{keys, hostileStream[events.DynamoDBEventRecord]{name: "10,000 attributes",
			recs: []events.DynamoDBEventRecord{edit(d(1, "o1", "ok"), func(r *events.DynamoDBEventRecord) { r.Change.NewImage = wide })},
			want: [2][]string{cp(), cp()}, runs: [2]int{1, 1}}},
		{keys, hostileStream[events.DynamoDBEventRecord]{name: "maps nested as deep as a decoded event can hold them",
			// Typed JSON doubles the nesting past core.MaxDepth: an invalid
			// payload (DynamoDB itself holds 32 levels at most).
			recs: []events.DynamoDBEventRecord{edit(d(1, "o1", "ok"), func(r *events.DynamoDBEventRecord) { r.Change.NewImage["deep"] = nestedMap(5000) })},
			want: [2][]string{cp(), cp(1)}}},
		{keys, hostileStream[events.DynamoDBEventRecord]{name: "zero attribute value in the image",
			recs: []events.DynamoDBEventRecord{edit(d(1, "o1", "ok"), func(r *events.DynamoDBEventRecord) { r.Change.NewImage["bad"] = events.DynamoDBAttributeValue{} }), d(2, "o2", "ok")},
			want: [2][]string{cp(), cp(1)}, runs: [2]int{1, 0}}},
		{keys, hostileStream[events.DynamoDBEventRecord]{name: "zero attribute value in the keys",
			recs: []events.DynamoDBEventRecord{edit(d(1, "o1", "ok"), func(r *events.DynamoDBEventRecord) { r.Change.Keys["id"] = events.DynamoDBAttributeValue{} })},
			want: [2][]string{cp(), cp(1)}}},
		{byEvent, hostileStream[events.DynamoDBEventRecord]{name: "no event id, key from the event id",
			recs: []events.DynamoDBEventRecord{edit(d(1, "o1", "ok"), func(r *events.DynamoDBEventRecord) { r.EventID = "" })},
			want: [2][]string{cp(), cp(1)}}},
		{keys, hostileStream[events.DynamoDBEventRecord]{name: "no sequence number, transient failure",
			recs: []events.DynamoDBEventRecord{d(1, "o1", "ok"), edit(d(2, "o2", "fail"), func(r *events.DynamoDBEventRecord) { r.Change.SequenceNumber = "" })},
			want: [2][]string{{""}, {""}}, runs: [2]int{3, 3}}},
		{keys, hostileStream[events.DynamoDBEventRecord]{name: "REMOVE with only the old image",
			recs: []events.DynamoDBEventRecord{ddbRec(1, "REMOVE", "o1", "")}, want: [2][]string{cp(), cp()}, runs: [2]int{1, 1}}},
		{keys, hostileStream[events.DynamoDBEventRecord]{name: "no records"}},
	}
	for _, tc := range tests {
		runHostileStream(t, tc.hostileStream, hostileDynamoDB(tc.source), func(r events.DynamoDBEventRecord) bool {
			do, ok := r.Change.NewImage["do"]
			return ok && do.DataType() == events.DataTypeString && do.String() == "fail"
		})
	}
}

// TestHostileStreamEventJSON decodes raw events as the Lambda runtime does
// before the wrapper sees them: an event that does not decode fails the
// whole invocation (Lambda retries the batch, nothing is skipped); the
// others reach the wrapper, which accounts for every record.
func TestHostileStreamEventJSON(t *testing.T) {
	t.Parallel()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	kin := func(seq, data string) string {
		return fmt.Sprintf(`{"eventID":"shardId-000000000000:%s","eventSourceARN":%q,"kinesis":{"sequenceNumber":%q,"partitionKey":"p","data":%s}}`, seq, kinesisARN, seq, data)
	}
	tests := []struct {
		name    string
		raw     string
		ddb     bool
		decodes bool
		want    []string
	}{
		{name: "kinesis: base64 data", raw: `{"Records":[` + kin("1", `"`+b64(`{"event_id":"e1"}`)+`"`) + `]}`, decodes: true, want: []string{}},
		{name: "kinesis: data not base64", raw: `{"Records":[` + kin("1", `"%%%"`) + `]}`},
		{name: "kinesis: null data", raw: `{"Records":[` + kin("1", `null`) + `]}`, decodes: true, want: []string{"1"}},
		{name: "kinesis: sequence number as a number", raw: `{"Records":[{"kinesis":{"sequenceNumber":1}}]}`},
		{name: "kinesis: null records", raw: `{"Records":null}`, decodes: true, want: []string{}},
		{name: "dynamodb: typed images", ddb: true, decodes: true, want: []string{},
			raw: `{"Records":[{"eventID":"1","eventName":"INSERT","eventSourceARN":"` + streamARN + `","dynamodb":{"Keys":{"id":{"S":"o1"}},"NewImage":{"id":{"S":"o1"},"b":{"B":"AAE="},"ns":{"NS":["2","1"]},"l":{"L":[{"NULL":true}]}},"SequenceNumber":"100","StreamViewType":"NEW_IMAGE"}}]}`},
		{name: "dynamodb: unknown attribute type", ddb: true, raw: `{"Records":[{"dynamodb":{"Keys":{"id":{"X":"o1"}},"SequenceNumber":"1"}}]}`},
		{name: "dynamodb: two types in one value", ddb: true, raw: `{"Records":[{"dynamodb":{"Keys":{"id":{"S":"o1","N":"1"}},"SequenceNumber":"1"}}]}`},
		{name: "dynamodb: a binary set of numbers (the decoder panics)", ddb: true, raw: `{"Records":[{"dynamodb":{"Keys":{"id":{"BS":[1]}},"SequenceNumber":"1"}}]}`},
		{name: "dynamodb: null keys", ddb: true, decodes: true, want: []string{"1"}, raw: `{"Records":[{"dynamodb":{"Keys":null,"SequenceNumber":"1"}}]}`},
		{name: "dynamodb: deeply nested event", ddb: true, raw: `{"Records":[{"x":` + nested(hostileDepth, "[", "", "]") + `}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var buf syncBuffer
			e := newEnv(t, idem.WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
			var opts []idemlambda.BatchOption
			var ids []string
			var n int
			var lane func(map[string]any) string
			if tc.ddb {
				var ev events.DynamoDBEvent
				if got := decodeEvent(tc.raw, &ev); got != tc.decodes || !got {
					if got != tc.decodes {
						t.Fatalf("decodes = %v, want %v", got, tc.decodes)
					}
					return
				}
				handle, _ := idemlambda.DynamoDBStream(e.runner, "hostile", idemlambda.DynamoDBKeyFromItemKeys(),
					func(context.Context, events.DynamoDBEventRecord) ([]byte, error) { return nil, nil }, opts...)
				resp, _ := handle(e.ctx(t, time.Minute), ev)
				for _, f := range resp.BatchItemFailures {
					ids = append(ids, f.ItemIdentifier)
				}
				n, lane = len(ev.Records), func(rec map[string]any) string { return rec["event_source_arn"].(string) }
			} else {
				var ev events.KinesisEvent
				if got := decodeEvent(tc.raw, &ev); got != tc.decodes || !got {
					if got != tc.decodes {
						t.Fatalf("decodes = %v, want %v", got, tc.decodes)
					}
					return
				}
				handle, _ := idemlambda.Kinesis(e.runner, "hostile", idemlambda.KinesisKeyFromDataField("event_id"),
					func(context.Context, events.KinesisEventRecord) ([]byte, error) { return nil, nil }, opts...)
				resp, _ := handle(e.ctx(t, time.Minute), ev)
				for _, f := range resp.BatchItemFailures {
					ids = append(ids, f.ItemIdentifier)
				}
				n, lane = len(ev.Records), kinesisLane
			}
			if !slices.Equal(append([]string{}, ids...), tc.want) {
				t.Errorf("reported %q, want %q", ids, tc.want)
			}
			checkStreamAnswer(t, n, ids, buf.String(), lane)
		})
	}
}

// TestStreamKeyIsNotUserData: the stored keys of the stream wrappers hold
// neither the record's data nor its item keys.
func TestStreamKeyIsNotUserData(t *testing.T) {
	t.Parallel()
	kk, err := idemlambda.KinesisKey(idemlambda.KinesisKeyFromPartitionKey(), "audit", k(1, "e1", "ok"))
	if err != nil {
		t.Fatal(err)
	}
	dk, err := idemlambda.DynamoDBStreamKey(idemlambda.DynamoDBKeyFromItemKeys(), "audit", d(1, "order-secret", "ok"))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{kk, dk} {
		if err := core.ValidateKey(key); err != nil || strings.Contains(key, "pk-1") || strings.Contains(key, "secret") || !strings.HasPrefix(key, core.DerivedKeyPrefix) {
			t.Errorf("stored key %q: %v; want a derived key without user data", key, err)
		}
	}
}
