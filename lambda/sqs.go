package idemlambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/jsonfield"
)

// ErrMissingKey is the error (checked with errors.Is) for an event whose
// idempotency key cannot be taken from it: a missing or empty body field,
// attribute or header, a body that is not JSON where a field is asked for.
// A missing key is never hashed as empty.
var ErrMissingKey = errors.New("idemlambda: event has no usable idempotency key")

// EventKey returns the stored key of an event: the event's identity and the
// action taken on it (the scheme evt:<event-id>:<action>), hashed with
// core.DeriveKey so that the key has a fixed length and holds no user data.
// The same event and action always give the same key; another event or
// another action gives another key. Both parts must be non-empty and free of
// control characters; otherwise the error wraps core.ErrInvalidKey. The SQS
// wrapper keys every message with it; Typed users may call it in their key
// function.
func EventKey(eventID, action string) (string, error) {
	if eventID == "" {
		return "", fmt.Errorf("%w: empty event id", ErrMissingKey)
	}
	if action == "" {
		return "", fmt.Errorf("%w: empty action", core.ErrInvalidKey)
	}
	return core.DeriveKey("evt", eventID, action)
}

// KeySource says where the SQS and SNS wrappers find a message's event
// identity. The zero value is not usable: take one from KeyFromBodyField,
// KeyFromAttribute, KeyFromDeduplicationID, KeyFromMessageID, KeyFromFunc
// or KeyFromAll.
type KeySource = Source[events.SQSMessage]

// KeyFromBodyField takes the identity from a field of the message's JSON
// body. path is a field name or a dotted path into nested objects
// ("detail.order_id"); field names that contain dots cannot be addressed.
// The value must be a non-empty string or a number (its literal text).
// A body that is not a JSON object, a missing field and a value of another
// type are errors wrapping ErrMissingKey.
func KeyFromBodyField(path string) KeySource {
	parts := strings.Split(path, ".")
	return KeySource{name: "body field " + path, get: func(m events.SQSMessage) (string, error) {
		if path == "" {
			return "", fmt.Errorf("%w: empty body field path", ErrMissingKey)
		}
		return jsonField("body", []byte(m.Body), parts)
	}}
}

// jsonField returns the string or number at the dotted path in doc, which
// errors call what (the body, the data); its errors wrap ErrMissingKey.
func jsonField(what string, doc []byte, path []string) (string, error) {
	id, err := jsonfield.Get(what, doc, path)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrMissingKey, err)
	}
	return id, nil
}

// KeyFromAttribute takes the identity from a message attribute of type
// String or Number (its StringValue). A missing or binary attribute is an
// error wrapping ErrMissingKey.
func KeyFromAttribute(name string) KeySource {
	return KeySource{name: "message attribute " + name, get: func(m events.SQSMessage) (string, error) {
		a, ok := m.MessageAttributes[name]
		if !ok {
			return "", fmt.Errorf("%w: no message attribute %q", ErrMissingKey, name)
		}
		if a.StringValue == nil {
			return "", fmt.Errorf("%w: message attribute %q of type %s has no string value", ErrMissingKey, name, a.DataType)
		}
		return *a.StringValue, nil
	}}
}

// KeyFromDeduplicationID takes the identity from the MessageDeduplicationId
// system attribute of a FIFO queue's message: the sender's (or the
// content-based) deduplication id, the same on every redelivery. A message
// without it is an error wrapping ErrMissingKey.
func KeyFromDeduplicationID() KeySource {
	return KeySource{name: "MessageDeduplicationId", get: func(m events.SQSMessage) (string, error) {
		id, ok := m.Attributes["MessageDeduplicationId"]
		if !ok {
			return "", fmt.Errorf("%w: no MessageDeduplicationId attribute (not a FIFO queue?)", ErrMissingKey)
		}
		return id, nil
	}}
}

// KeyFromMessageID takes the identity from the SQS message id. It protects
// against redeliveries of one message only: a business event sent twice
// gets two message ids. Prefer an identity that the sender sets.
func KeyFromMessageID() KeySource {
	return KeySource{name: "message id", get: func(m events.SQSMessage) (string, error) {
		return m.MessageId, nil
	}}
}

// SQSKey returns the stored key of msg for action, as the SQS wrapper
// computes it: EventKey of the identity that source finds. Operators can use
// it to look up a message's record in the store.
func SQSKey(source KeySource, action string, msg events.SQSMessage) (string, error) {
	id, err := source.EventID(msg)
	if err != nil {
		return "", err
	}
	return EventKey(id, action)
}

// SQS returns a handler for SQS batches that runs handler once per message
// through runner, as the operation action on the event identity that key
// finds in the message (see EventKey). The message body is the payload
// fingerprint (a body that is not JSON is taken as a JSON string; with
// WithEnvelope, the body inside the envelope; with WithFingerprintSelection,
// only its selected fields), and handler's result is stored.
//
// It reports in batchItemFailures, for SQS to redeliver (the event source
// mapping must have FunctionResponseTypes: [ReportBatchItemFailures]), every
// message that did not succeed: a new or replayed permanent failure, retries
// exhausted, a key reused with another body, a key the source cannot find
// (idem.MissingKey) or derive, an invalid body, a transient failure, a store
// error, a duplicate still in progress elsewhere, a message not started
// because less than the safety margin (WithSafetyMargin) was left before the
// invocation's deadline, a panic, and in a FIFO queue the messages of a
// message group after the group's first reported message, unstarted, so
// that order is kept. SQS redelivers each after its visibility timeout; a
// replayed failure costs one store call and no handler run; after the
// queue's maxReceiveCount receives, its redrive policy moves the message to
// the dead-letter queue. WithAcknowledged acknowledges the verdicts it names
// instead.
//
// The queue's limit is the limit: the wrapper's calls are marked with
// idem.ContextWithSourceLimit, so that, unless the runner was given
// idem.WithMaxAttempts, a message whose handler keeps failing (an outage,
// transient; an error nobody classified, idem.FailedUnclassified) runs on
// every receive until the redrive policy moves it to the dead-letter queue.
//
// It acknowledges (leaves out of the failures) successes, replays of stored
// successes, and a message whose handler succeeded but whose outcome could
// not be recorded (idem.OutcomeNotRecorded): redelivering it would run the
// handler again once its lease ends.
//
// Every message is logged once through the runner's logger, at its
// verdict's level (idem.Verdict.Level), with its message id, receive count
// and whether it was reported, and observed once (idem.WithObserver),
// whether it reached the runner or not (idem.Runner.Report).
//
// Messages of a standard queue (a fair queue's too, whose messages carry a
// MessageGroupId) run concurrently, at most WithConcurrency at once; in a
// FIFO queue (an eventSourceARN ending in .fifo) each message group runs in
// order, and groups run concurrently within the same bound. Messages of one batch that share a
// key run one after another in batch order, across groups too: the first
// one executes, and a later one replays its outcome (the same body) or is
// refused as a reused key (another body), instead of being refused as in
// progress.
//
// The returned function never returns an error: a batch-wide error would
// make SQS redeliver every message. A panic in handler is recovered and
// reported as that message's failure (idem.Panicked); its key stays in
// progress until its lease ends.
func SQS(runner *idem.Runner, action string, key KeySource, handler func(ctx context.Context, msg events.SQSMessage) ([]byte, error), opts ...BatchOption) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	w, err := newSQSWrapper(runner, action, key, handler, opts)
	if err != nil {
		return nil, err
	}
	return w.handle, nil
}

// newSQSWrapper checks SQS's arguments and makes its wrapper.
func newSQSWrapper(runner *idem.Runner, action string, key KeySource, handler func(ctx context.Context, msg events.SQSMessage) ([]byte, error), opts []BatchOption) (*sqsWrapper, error) {
	if runner == nil {
		return nil, errors.New("idemlambda: nil runner")
	}
	if handler == nil {
		return nil, errors.New("idemlambda: nil handler")
	}
	if key.get == nil {
		return nil, zeroSourceError("KeySource", "KeyFromBodyField", "KeyFromAttribute", "KeyFromDeduplicationID", "KeyFromMessageID")
	}
	if _, err := EventKey("probe", action); err != nil {
		return nil, fmt.Errorf("idemlambda: action %q: %w", action, err)
	}
	cfg, err := configure(opts, BatchOption.applyBatch)
	if err != nil {
		return nil, err
	}
	w := &sqsWrapper{runner: runner, action: action, source: key, handler: handler, cfg: cfg, wrapper: "sqs"}
	w.fingerprint = w.payloadFingerprint()
	return w, nil
}

type sqsWrapper struct {
	runner      *idem.Runner
	action      string
	source      KeySource
	handler     func(context.Context, events.SQSMessage) ([]byte, error)
	cfg         config
	wrapper     string               // the logs' wrapper name: sqs, or sns
	fingerprint idem.FingerprintFunc // see payloadFingerprint
	// topicOf is the SNS wrapper's: the TopicArn of a message's record.
	topicOf func(context.Context, events.SQSMessage) string
}

// IsFIFO reports whether a batch comes from a FIFO queue: a message whose
// event source ARN (the queue's) ends in .fifo, as every FIFO queue's name
// does. A MessageGroupId alone does not make one: a fair queue (a standard
// queue whose messages carry a message group id, the tenant) delivers in
// no order, and its batches run concurrently.
func IsFIFO(ev events.SQSEvent) bool {
	for _, m := range ev.Records {
		if strings.HasSuffix(m.EventSourceARN, ".fifo") {
			return true
		}
	}
	return false
}

func (w *sqsWrapper) handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	// The queue's redrive policy (Lambda's retries, for SNS) limits the
	// deliveries: no bound of the runner's own unless it was given one.
	ctx = idem.ContextWithSourceLimit(idem.ContextWithFingerprint(ctx, w.fingerprint))
	recs := make([]sqsRecord, len(ev.Records))
	items := make([]batchItem, len(ev.Records))
	for i, m := range ev.Records {
		recs[i] = w.prepare(ctx, m)
		items[i] = batchItem{key: recs[i].key, lane: m.Attributes["MessageGroupId"]}
	}
	pol := batchPolicy{concurrency: w.cfg.concurrency, safetyMargin: w.cfg.safetyMargin, ordered: IsFIFO(ev), now: w.cfg.now}
	states := runBatch(ctx, items, pol, func(ctx context.Context, i int) bool {
		return w.one(withTenant(ctx, recs[i].tenant), recs[i])
	}, func(i int, v idem.Verdict, reason error) {
		w.runner.Report(w.annotate(withTenant(ctx, recs[i].tenant), ev.Records[i]), recs[i].key, idem.Outcome{Verdict: v}, reason)
	})
	for i, st := range states {
		if st != itemDone {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
		}
	}
	return resp, nil
}

// one processes a message and reports whether it goes into the batch item
// failures.
func (w *sqsWrapper) one(ctx context.Context, rec sqsRecord) (report bool) {
	ctx = w.annotate(ctx, rec.msg)
	if rec.keyErr != nil {
		v := keyVerdict(rec.keyErr)
		w.runner.Report(ctx, "", idem.Outcome{Verdict: v}, fmt.Errorf("%w (key source: %s)", rec.keyErr, w.source.name))
		return w.cfg.ack.reports(v)
	}
	out := runRecord(ctx, w.runner, rec.key, rec.payload, func(ctx context.Context) ([]byte, error) {
		return w.handler(ctx, rec.msg)
	})
	return w.cfg.ack.reports(out.Verdict)
}

// annotate names msg in the log record of its call, and says whether its
// verdict was reported.
func (w *sqsWrapper) annotate(ctx context.Context, msg events.SQSMessage) context.Context {
	return idem.WithAnnotation(ctx, func(out idem.Outcome, _ error) idem.Annotation {
		attrs := []slog.Attr{
			slog.String("wrapper", w.wrapper),
			slog.String("action", w.action),
			slog.String("message_id", msg.MessageId),
		}
		if rc := msg.Attributes["ApproximateReceiveCount"]; rc != "" {
			attrs = append(attrs, slog.String("receive_count", rc))
		}
		if g := msg.Attributes["MessageGroupId"]; g != "" {
			attrs = append(attrs, slog.String("message_group_id", g))
		}
		return idem.Annotation{Attrs: append(attrs, slog.Bool("reported", w.cfg.ack.reports(out.Verdict)))}
	})
}
