package idemlambda

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// DynamoDBKeySource says where the DynamoDB Streams wrapper finds a record's
// event identity. The zero value is not usable: take one from
// DynamoDBKeyFromItemKeys, DynamoDBKeyFromEventID, DynamoDBKeyFromNewImage,
// KeyFromFunc or KeyFromAll.
type DynamoDBKeySource = Source[events.DynamoDBEventRecord]

// DynamoDBKeyFromItemKeys takes the identity from the changed item's primary
// key (the record's Keys) and its table: one operation per item, for actions
// taken once in an item's life, such as on its creation. The keys are
// canonicalised (attribute names sorted, values with their DynamoDB types,
// so {"id":{"S":"1"}} and {"id":{"N":"1"}} differ) and hashed with the
// table's ARN (the event source ARN up to "/stream/", so that the identity
// outlives a re-enabled stream). Another change of the same item (a MODIFY
// after the INSERT) has another payload and is refused as a reused key:
// filter the event source mapping to the events the action is for (an
// INSERT filter), or key per change with DynamoDBKeyFromEventID. A record
// without keys is an error wrapping ErrMissingKey.
func DynamoDBKeyFromItemKeys() DynamoDBKeySource {
	return DynamoDBKeySource{name: "item keys", get: func(r events.DynamoDBEventRecord) (string, error) {
		if len(r.Change.Keys) == 0 {
			return "", fmt.Errorf("%w: record has no Keys", ErrMissingKey)
		}
		keys, err := typedJSON(r.Change.Keys)
		if err != nil {
			return "", fmt.Errorf("%w: Keys: %w", ErrMissingKey, err)
		}
		table, _, _ := strings.Cut(r.EventSourceArn, "/stream/")
		sum := sha256.Sum256(append([]byte(table+"\n"), keys...))
		return "item:" + hex.EncodeToString(sum[:]), nil
	}}
}

// DynamoDBKeyFromEventID takes the identity from the record's eventID, which
// DynamoDB Streams gives every change: one operation per change. It protects
// against redeliveries of one record (Lambda's retries, a bisected batch),
// not against a business event written twice.
func DynamoDBKeyFromEventID() DynamoDBKeySource {
	return DynamoDBKeySource{name: "event id", get: func(r events.DynamoDBEventRecord) (string, error) {
		return r.EventID, nil
	}}
}

// DynamoDBKeyFromNewImage takes the identity from an attribute of the
// record's NewImage (the item after the change; the stream's view type must
// include it): a name, or a dotted path into nested maps
// ("detail.event_id"). The value must be a non-empty string (S) or a number
// (N, its literal text). A record without NewImage (a REMOVE, a KEYS_ONLY
// stream), a missing attribute and a value of another type are errors
// wrapping ErrMissingKey.
func DynamoDBKeyFromNewImage(path string) DynamoDBKeySource {
	parts := strings.Split(path, ".")
	return DynamoDBKeySource{name: "NewImage attribute " + path, get: func(r events.DynamoDBEventRecord) (string, error) {
		if path == "" {
			return "", fmt.Errorf("%w: empty NewImage attribute path", ErrMissingKey)
		}
		return imageField(r.Change.NewImage, parts)
	}}
}

// imageField returns the string or number at the dotted path in img.
func imageField(img map[string]events.DynamoDBAttributeValue, path []string) (id string, err error) {
	defer func() {
		if p := recover(); p != nil { // a malformed value, see errBadAttribute
			err = fmt.Errorf("%w: NewImage: %w: %v", ErrMissingKey, errBadAttribute, p)
		}
	}()
	if img == nil {
		return "", fmt.Errorf("%w: record has no NewImage", ErrMissingKey)
	}
	var v events.DynamoDBAttributeValue
	for i, p := range path {
		var ok bool
		if v, ok = img[p]; !ok {
			return "", fmt.Errorf("%w: NewImage has no attribute %q", ErrMissingKey, strings.Join(path[:i+1], "."))
		}
		if i < len(path)-1 {
			if v.DataType() != events.DataTypeMap {
				return "", fmt.Errorf("%w: NewImage attribute %q is not a map", ErrMissingKey, strings.Join(path[:i+1], "."))
			}
			img = v.Map()
		}
	}
	switch v.DataType() {
	case events.DataTypeString:
		id = v.String()
	case events.DataTypeNumber:
		id = v.Number()
	default:
		return "", fmt.Errorf("%w: NewImage attribute %q is not a string or a number", ErrMissingKey, strings.Join(path, "."))
	}
	if id == "" {
		return "", fmt.Errorf("%w: NewImage attribute %q is empty", ErrMissingKey, strings.Join(path, "."))
	}
	return id, nil
}

// DynamoDBStreamKey returns the stored key of rec for action, as the
// DynamoDB Streams wrapper computes it: EventKey of the identity that source
// finds. Operators can use it to look up a record's outcome in the store.
func DynamoDBStreamKey(source DynamoDBKeySource, action string, rec events.DynamoDBEventRecord) (string, error) {
	id, err := source.EventID(rec)
	if err != nil {
		return "", err
	}
	return EventKey(id, action)
}

// errBadAttribute is what an attribute value that aws-lambda-go's accessors
// refuse turns into (the zero DynamoDBAttributeValue, built in Go rather
// than decoded from an event, is one).
var errBadAttribute = errors.New("idemlambda: malformed DynamoDB attribute value")

// recoverAttr, deferred, turns a panic of an attribute accessor into an
// error wrapping errBadAttribute.
func recoverAttr(err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("%w: %v", errBadAttribute, p)
	}
}

// dynamoDBPayload is the fingerprinted payload of a record: its eventName
// and its Keys, NewImage and OldImage (those it has), each attribute in
// DynamoDB's typed JSON form, as canonical JSON.
func dynamoDBPayload(r events.DynamoDBEventRecord) ([]byte, error) {
	var b bytes.Buffer
	name, _ := json.Marshal(r.EventName) // a string always marshals
	b.WriteString(`{"eventName":` + string(name))
	for _, img := range []struct {
		name  string
		attrs map[string]events.DynamoDBAttributeValue
	}{{"Keys", r.Change.Keys}, {"NewImage", r.Change.NewImage}, {"OldImage", r.Change.OldImage}} {
		if img.attrs == nil {
			continue
		}
		v, err := typedJSON(img.attrs)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", core.ErrInvalidPayload, img.name, err)
		}
		b.WriteString(`,"` + img.name + `":`)
		b.Write(v)
	}
	b.WriteString("}")
	return b.Bytes(), nil
}

// typedJSON is m as JSON in DynamoDB's typed form ({"id":{"S":"1"}}), with
// attribute names sorted and the members of sets sorted (a set has no
// order). A malformed value is an error wrapping errBadAttribute.
func typedJSON(m map[string]events.DynamoDBAttributeValue) (b []byte, err error) {
	defer recoverAttr(&err)
	v, err := typedMap(m)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func typedMap(m map[string]events.DynamoDBAttributeValue) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, av := range m {
		v, err := typedValue(av)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// typedValue is av as {"<type>": value}; it panics on a value whose
// accessor does (recovered by typedJSON).
func typedValue(av events.DynamoDBAttributeValue) (any, error) {
	switch av.DataType() {
	case events.DataTypeString:
		return map[string]any{"S": av.String()}, nil
	case events.DataTypeNumber:
		return map[string]any{"N": av.Number()}, nil
	case events.DataTypeBinary:
		return map[string]any{"B": av.Binary()}, nil // base64 in JSON
	case events.DataTypeBoolean:
		return map[string]any{"BOOL": av.Boolean()}, nil
	case events.DataTypeNull:
		return map[string]any{"NULL": true}, nil
	case events.DataTypeStringSet:
		return map[string]any{"SS": slices.Sorted(slices.Values(av.StringSet()))}, nil
	case events.DataTypeNumberSet:
		return map[string]any{"NS": slices.Sorted(slices.Values(av.NumberSet()))}, nil
	case events.DataTypeBinarySet:
		return map[string]any{"BS": slices.SortedFunc(slices.Values(av.BinarySet()), bytes.Compare)}, nil
	case events.DataTypeList:
		l := make([]any, 0, len(av.List()))
		for _, e := range av.List() {
			v, err := typedValue(e)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return map[string]any{"L": l}, nil
	case events.DataTypeMap:
		m, err := typedMap(av.Map())
		return map[string]any{"M": m}, err
	}
	return nil, fmt.Errorf("%w: data type %d", errBadAttribute, av.DataType())
}

// DynamoDBStream returns a handler for DynamoDB Streams batches that runs
// handler once per record through runner, as the operation action on the
// event identity that key finds in the record (see EventKey). The payload
// fingerprint is the record's eventName, Keys, NewImage and OldImage in
// DynamoDB's typed JSON, canonical (attribute names and set members
// sorted), or the fields of that document WithFingerprintSelection selects;
// handler's result is stored.
//
// Records of a shard run in the order of the event and stop at the first
// one that must be retried, whose dynamodb.SequenceNumber is reported as the
// checkpoint, exactly as Kinesis describes (the event source mapping must
// have FunctionResponseTypes: [ReportBatchItemFailures]). A DynamoDB
// Streams record names no shard, and Lambda sends the records of one shard
// per invocation: the shard is the event source ARN, so a batch is one
// ordered lane. What must be retried, what is acknowledged, and the logs are
// as for Kinesis.
func DynamoDBStream(runner *idem.Runner, action string, key DynamoDBKeySource, handler func(ctx context.Context, rec events.DynamoDBEventRecord) ([]byte, error), opts ...BatchOption) (func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error), error) {
	if key.get == nil {
		return nil, zeroSourceError("DynamoDBKeySource", "DynamoDBKeyFromItemKeys", "DynamoDBKeyFromEventID", "DynamoDBKeyFromNewImage")
	}
	w, err := newStreamWrapper(runner, action, handler, opts, streamSource[events.DynamoDBEventRecord]{
		wrapper: "dynamodb_stream",
		key:     func(r events.DynamoDBEventRecord) (string, error) { return DynamoDBStreamKey(key, action, r) },
		payload: dynamoDBPayload,
		lane:    func(r events.DynamoDBEventRecord) string { return r.EventSourceArn },
		seq:     func(r events.DynamoDBEventRecord) string { return r.Change.SequenceNumber },
		attrs: func(r events.DynamoDBEventRecord) []slog.Attr {
			return []slog.Attr{slog.String("event_id", r.EventID), slog.String("event_name", r.EventName), slog.String("event_source_arn", r.EventSourceArn)}
		},
	})
	if err != nil {
		return nil, err
	}
	fp, err := w.payloadFingerprint()
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		resp := events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}
		for _, seq := range w.checkpoints(idem.ContextWithFingerprint(ctx, fp), ev.Records) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: seq})
		}
		return resp, nil
	}, nil
}
