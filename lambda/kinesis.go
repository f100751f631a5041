package idemlambda

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
)

// KinesisKeySource says where the Kinesis wrapper finds a record's event
// identity. The zero value is not usable: take one from
// KinesisKeyFromDataField, KinesisKeyFromPartitionKey,
// KinesisKeyFromSequenceNumber, KeyFromFunc or KeyFromAll.
type KinesisKeySource = Source[events.KinesisEventRecord]

// KinesisKeyFromDataField takes the identity from a field of the record's
// data, a JSON object (aws-lambda-go has already decoded the base64 of the
// event into Kinesis.Data). path is a field name or a dotted path into
// nested objects, as for KeyFromBodyField; the value must be a non-empty
// string or a number. Data that is not a JSON object, a missing field and a
// value of another type are errors wrapping ErrMissingKey.
func KinesisKeyFromDataField(path string) KinesisKeySource {
	parts := strings.Split(path, ".")
	return KinesisKeySource{name: "data field " + path, get: func(r events.KinesisEventRecord) (string, error) {
		if path == "" {
			return "", fmt.Errorf("%w: empty data field path", ErrMissingKey)
		}
		return jsonField("data", r.Kinesis.Data, parts)
	}}
}

// KinesisKeyFromPartitionKey takes the identity from the record's partition
// key. Use it only when the producer gives every business event a partition
// key of its own (an event id): records that share a partition key (a
// customer id, say) would be one operation, and all but the first would be
// replayed or refused as a reused key.
func KinesisKeyFromPartitionKey() KinesisKeySource {
	return KinesisKeySource{name: "partition key", get: func(r events.KinesisEventRecord) (string, error) {
		return r.Kinesis.PartitionKey, nil
	}}
}

// KinesisKeyFromSequenceNumber takes the identity from the record's place
// in the stream: its shard (see Kinesis) and its sequence number. It
// protects against redeliveries of one record only (Lambda's retries, a
// bisected batch): a business event put twice gets two sequence numbers.
// Prefer an identity that the producer sets. A record without a sequence
// number is an error wrapping ErrMissingKey.
func KinesisKeyFromSequenceNumber() KinesisKeySource {
	return KinesisKeySource{name: "sequence number", get: func(r events.KinesisEventRecord) (string, error) {
		if r.Kinesis.SequenceNumber == "" {
			return "", fmt.Errorf("%w: record has no sequence number", ErrMissingKey)
		}
		return kinesisShard(r) + "/" + r.Kinesis.SequenceNumber, nil
	}}
}

// KinesisKey returns the stored key of rec for action, as the Kinesis
// wrapper computes it: EventKey of the identity that source finds. Operators
// can use it to look up a record's outcome in the store.
func KinesisKey(source KinesisKeySource, action string, rec events.KinesisEventRecord) (string, error) {
	id, err := source.EventID(rec)
	if err != nil {
		return "", err
	}
	return EventKey(id, action)
}

// kinesisShard names the record's shard: its event source ARN and the shard
// id that starts its event id ("shardId-000000000000:<sequence number>").
// Without a shard id, it is the ARN alone, which keeps records in order all
// the more.
func kinesisShard(r events.KinesisEventRecord) string {
	shard, _, ok := strings.Cut(r.EventID, ":")
	if !ok {
		shard = ""
	}
	return r.EventSourceArn + "/" + shard
}

// kinesisPayload is the fingerprinted payload of a record's data: the data
// itself if it is UTF-8 (fingerprinted as JSON if it is JSON, else as a
// JSON string: see bodyFingerprint); else {"base64": the data in standard
// base64}, so that two different binary records never fingerprint alike.
func kinesisPayload(data []byte) []byte {
	if utf8.Valid(data) {
		return data
	}
	b, _ := json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString(data)}) // strings always marshal
	return b
}

// Kinesis returns a handler for Kinesis Data Streams batches that runs
// handler once per record through runner, as the operation action on the
// event identity that key finds in the record (see EventKey). The record's
// data is the payload fingerprint (JSON data compared canonically, so key
// order and whitespace do not matter, and only the fields
// WithFingerprintSelection selects; UTF-8 text as a JSON string; other
// bytes byte for byte), and handler's result is stored.
//
// Records of a shard run one after another, in the order of the event; a
// shard is the event source ARN and the shard id of the record's eventID
// (Lambda sends the records of one shard per invocation, so a batch is one
// shard). At the shard's first record that must be retried, the shard stops,
// and that record's sequence number is reported in batchItemFailures as the
// checkpoint (the event source mapping must have FunctionResponseTypes:
// [ReportBatchItemFailures]): Lambda redelivers from it, so no record after
// it is lost and none before it runs again; a record redelivered anyway (a
// whole-batch retry, a bisected batch) replays its stored outcome. A record
// is the checkpoint when it did not succeed, for the reasons an SQS message
// is reported (see SQS): a transient or unclassified failure (the record
// runs again on the retry, and the shard moves on once it succeeds; the
// runner's bound, idem.DefaultMaxAttempts without idem.WithMaxAttempts,
// limits its executions, since a mapping retries until the record expires
// by default: see docs/streams.md), a key in progress elsewhere,
// no time left before the deadline, a panic, and a permanent failure (new or
// replayed, retries exhausted, a key reused, a key or payload that cannot be
// used), which it leaves to the mapping's MaximumRetryAttempts and
// on-failure destination; WithAcknowledged names the verdicts to
// acknowledge instead, and the shard goes on past them. A checkpoint
// record without a sequence number is reported with an empty identifier,
// which Lambda takes as a failure of the whole batch.
//
// The returned function never returns an error (that would retry the whole
// batch). A panic in handler is recovered and makes its record the
// checkpoint; its key stays in progress until its lease ends.
func Kinesis(runner *idem.Runner, action string, key KinesisKeySource, handler func(ctx context.Context, rec events.KinesisEventRecord) ([]byte, error), opts ...BatchOption) (func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error), error) {
	if key.get == nil {
		return nil, zeroSourceError("KinesisKeySource", "KinesisKeyFromDataField", "KinesisKeyFromPartitionKey", "KinesisKeyFromSequenceNumber")
	}
	w, err := newStreamWrapper(runner, action, handler, opts, streamSource[events.KinesisEventRecord]{
		wrapper: "kinesis",
		key:     func(r events.KinesisEventRecord) (string, error) { return KinesisKey(key, action, r) },
		payload: func(r events.KinesisEventRecord) ([]byte, error) { return kinesisPayload(r.Kinesis.Data), nil },
		lane:    kinesisShard,
		seq:     func(r events.KinesisEventRecord) string { return r.Kinesis.SequenceNumber },
		attrs: func(r events.KinesisEventRecord) []slog.Attr {
			return []slog.Attr{slog.String("event_id", r.EventID), slog.String("event_source_arn", r.EventSourceArn)}
		},
	})
	if err != nil {
		return nil, err
	}
	fp, err := w.payloadFingerprint()
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
		resp := events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{}}
		for _, seq := range w.checkpoints(idem.ContextWithFingerprint(ctx, fp), ev.Records) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.KinesisBatchItemFailure{ItemIdentifier: seq})
		}
		return resp, nil
	}, nil
}
