package idemlambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
)

// NotDoneError is the error of an SNS handler for an event with messages
// that did not succeed (see SNS): returned to Lambda, it makes Lambda retry
// the event and then send it to the function's on-failure destination or
// dead-letter queue. Found with errors.As.
type NotDoneError struct {
	// MessageIDs are the SNS message ids of the messages that did not
	// succeed, in the event's order.
	MessageIDs []string
}

func (e *NotDoneError) Error() string {
	return fmt.Sprintf("idemlambda: %d SNS message(s) not done, for Lambda to retry: %s", len(e.MessageIDs), strings.Join(e.MessageIDs, ", "))
}

// snsEventKey is the context key of the SNS event being handled.
type snsEventKey struct{}

// SNS returns a handler for SNS events (a topic that invokes the function
// directly) that runs handler once per message through runner, as the
// operation action on the event identity that key finds in the message
// (see EventKey). It works as SQS does, on each record's message as raw
// message delivery would put it in a queue: the key sources read its Message
// (KeyFromBodyField: a field of the published message) and its
// MessageAttributes (KeyFromAttribute), KeyFromMessageID reads the SNS
// MessageId (the same on Lambda's retries of one publish, another on a
// second publish of the same event), and the fingerprint covers the
// Message, so that the notification's Timestamp, Signature and MessageId
// never make an event published again a reused key. The record's TopicArn,
// which SNS sets, scopes the key (ScopeTopic): messages of two topics with
// the same event identity are two events. With WithEnvelope the
// Message is unwrapped further (EventBridgeEnvelope, for a rule that
// targets the topic), and the handler's record carries the unwrapped
// message in SNS.Message.
//
// SNS invokes the function asynchronously: a handler error makes Lambda
// retry the event (twice by default; see the function's
// MaximumRetryAttempts) and then send it to its on-failure destination or
// dead-letter queue. So the returned function returns a *NotDoneError for
// an event with a message that SQS would report for redelivery (see SQS:
// every verdict but a success, unless WithAcknowledged names it), and nil
// otherwise;
// a retry replays the messages that succeeded (one store read each), and a
// message that did not runs again: Lambda's retries are the limit, as a
// queue's redrive policy is for SQS (no bound of the runner's own unless
// idem.WithMaxAttempts gives one). The batch options apply as to SQS but
// WithMessageGroupTenant, which is an error; SNS sends one message per
// event.
func SNS(runner *idem.Runner, action string, key KeySource, handler func(ctx context.Context, rec events.SNSEventRecord) ([]byte, error), opts ...BatchOption) (func(context.Context, events.SNSEvent) error, error) {
	if handler == nil {
		return nil, errors.New("idemlambda: nil handler")
	}
	w, err := newSQSWrapper(runner, action, key, func(ctx context.Context, msg events.SQSMessage) ([]byte, error) {
		return handler(ctx, snsRecordOf(ctx, msg))
	}, opts)
	if err != nil {
		return nil, err
	}
	if w.cfg.groupTenant {
		return nil, errors.New("idemlambda: SNS: WithMessageGroupTenant applies to the SQS wrapper only (an SNS record has no message group)")
	}
	w.wrapper = "sns"
	w.topicOf = func(ctx context.Context, msg events.SQSMessage) string { return snsRecordOf(ctx, msg).SNS.TopicArn }
	return func(ctx context.Context, ev events.SNSEvent) error {
		batch := events.SQSEvent{Records: make([]events.SQSMessage, len(ev.Records))}
		for i, r := range ev.Records {
			batch.Records[i] = SNSMessage(r)
		}
		resp, _ := w.handle(context.WithValue(ctx, snsEventKey{}, ev), batch) // handle never fails
		if len(resp.BatchItemFailures) == 0 {
			return nil
		}
		nd := &NotDoneError{}
		for _, f := range resp.BatchItemFailures {
			nd.MessageIDs = append(nd.MessageIDs, f.ItemIdentifier)
		}
		return nd
	}, nil
}

// SNSMessage returns rec as the SNS wrapper's key sources read it: an SQS
// message with rec's MessageId, Message as its body and its message
// attributes as SQS message attributes (Binary values decoded from
// base64). With SQSKey it gives the stored key of an SNS message, for
// operators' tools.
func SNSMessage(rec events.SNSEventRecord) events.SQSMessage {
	return events.SQSMessage{
		MessageId:         rec.SNS.MessageID,
		Body:              rec.SNS.Message,
		MessageAttributes: snsRecordAttributes(rec.SNS.MessageAttributes),
		EventSource:       rec.EventSource,
		EventSourceARN:    rec.EventSubscriptionArn,
	}
}

// snsRecordAttributes converts the attributes aws-lambda-go decodes as
// {"Type":..., "Value":...} maps; one of another shape is left out.
func snsRecordAttributes(in map[string]any) map[string]events.SQSMessageAttribute {
	attrs := make(map[string]snsAttribute, len(in))
	for name, v := range in {
		b, err := json.Marshal(v)
		var a snsAttribute
		if err == nil && json.Unmarshal(b, &a) == nil && a.Type != "" {
			attrs[name] = a
		}
	}
	return snsAttributes(attrs)
}

// snsRecordOf is the SNS record, in the event being handled, of msg (its
// SQS form, unwrapped), with its Message as the key sources read it.
func snsRecordOf(ctx context.Context, msg events.SQSMessage) events.SNSEventRecord {
	ev, _ := ctx.Value(snsEventKey{}).(events.SNSEvent)
	for _, r := range ev.Records {
		if r.SNS.MessageID == msg.MessageId {
			r.SNS.Message = msg.Body
			return r
		}
	}
	return events.SNSEventRecord{SNS: events.SNSEntity{MessageID: msg.MessageId, Message: msg.Body}}
}
