package idemlambda

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// ErrNotEnveloped is the error (checked with errors.Is) of a message whose
// body is not in the envelope the wrapper was told to take off
// (WithEnvelope). Such an error also wraps ErrMissingKey: the message has
// no usable key, and its handler does not run.
var ErrNotEnveloped = errors.New("idemlambda: message body is not in the expected envelope")

// An Envelope is a wrapping that a service puts around a published message
// before it reaches a queue or a function: SNSEnvelope, EventBridgeEnvelope.
// The wrappers take it off (WithEnvelope), so that the key sources, the
// fingerprint and the handler see the message that was published, and the
// envelope's per-delivery fields (an SNS MessageId, Timestamp and
// Signature; an EventBridge id and time) never make a published-again event
// a reused key. An Envelope is immutable and safe for concurrent use.
type Envelope struct {
	name   string
	unwrap func(body string) (unwrapped, error)
}

// unwrapped is a message body taken out of its envelope: the body, the
// attributes the envelope carried, for an event its type fields, and the
// scope the envelope's service set (ScopeTopic, ScopeAccount).
type unwrapped struct {
	body  string
	attrs map[string]events.SQSMessageAttribute
	typed *eventType
	scope []string
}

// eventType is what names an EventBridge event's kind: fingerprinted
// beside its detail, so that two kinds of event with equal details are
// not the same payload.
type eventType struct{ source, detailType string }

// String names the envelope, for logs.
func (e Envelope) String() string { return e.name }

// Unwrap returns msg as it would arrive without the envelope, as the
// wrappers pass it to the key sources and the handler: see SNSEnvelope and
// EventBridgeEnvelope. A body that is not in the envelope is an error
// wrapping ErrNotEnveloped and ErrMissingKey. With SQSKey and ScopedKey
// (the envelope's scope: "topic=<TopicArn>", "account=<account>") it gives
// the stored key of an enveloped message, for operators' tools.
func (e Envelope) Unwrap(msg events.SQSMessage) (events.SQSMessage, error) {
	m, _, _, err := unwrapMessage([]Envelope{e}, msg)
	return m, err
}

// SNSEnvelope is the notification that SNS delivers to an SQS queue
// subscribed without raw message delivery: a JSON object with Type
// "Notification", MessageId, TopicArn, Message (the published message, a
// string), Timestamp, Signature and, if the publisher set any,
// MessageAttributes. Unwrapped, the message is what raw message delivery
// would have delivered: its body is Message, and its MessageAttributes are
// the published attributes (String, Number and String.Array as
// StringValue, Binary decoded from base64 into BinaryValue, or kept as its
// bytes if it is not base64), added to any the SQS message has. The SNS
// MessageId, Timestamp and Subject are left behind, as raw message delivery
// leaves them. The TopicArn, which SNS sets and a publisher cannot choose,
// scopes the message's key (ScopeTopic): messages of two topics with the
// same event identity are two events.
func SNSEnvelope() Envelope {
	return Envelope{name: "sns", unwrap: unwrapSNS}
}

// EventBridgeEnvelope is the event that an EventBridge rule delivers to an
// SQS queue (or an SNS topic) without an input transformer: a JSON object
// with version, id, detail-type, source, account, time, region, resources
// and detail. Unwrapped, the message's body is the event's detail, as the
// event's source wrote it (the input path $.detail would deliver it), and
// its source and detail-type are String message attributes named "source"
// and "detail-type", for the handler and the key sources (KeyFromAll with
// KeyFromAttribute("detail-type") keys each kind of event apart). The
// fingerprint covers the detail, the source and the detail-type; a
// fingerprint selection (WithFingerprintSelection) applies to the detail.
// The account, which EventBridge sets to the sender's and a sender cannot
// choose, scopes the event's key (ScopeAccount): events of two accounts on
// one bus with the same event identity are two events, and an event
// without an account is not in the envelope. The id, time, region and
// resources are left behind.
func EventBridgeEnvelope() Envelope {
	return Envelope{name: "eventbridge", unwrap: unwrapEventBridge}
}

// snsNotification is the part of an SNS notification that unwrapping reads.
type snsNotification struct {
	Type              string                  `json:"Type"`
	MessageID         string                  `json:"MessageId"`
	TopicArn          string                  `json:"TopicArn"`
	Message           *string                 `json:"Message"`
	MessageAttributes map[string]snsAttribute `json:"MessageAttributes"`
}

// snsAttribute is a message attribute as SNS writes it in a notification.
type snsAttribute struct {
	Type  string `json:"Type"`
	Value string `json:"Value"`
}

func unwrapSNS(body string) (unwrapped, error) {
	var n snsNotification
	if err := json.Unmarshal([]byte(body), &n); err != nil {
		return unwrapped{}, notEnveloped("an SNS notification", err.Error())
	}
	switch {
	case n.Type != "Notification":
		return unwrapped{}, notEnveloped("an SNS notification", fmt.Sprintf("Type is %q, want \"Notification\"", n.Type))
	case n.Message == nil:
		return unwrapped{}, notEnveloped("an SNS notification", "no Message string")
	case n.MessageID == "" || n.TopicArn == "":
		return unwrapped{}, notEnveloped("an SNS notification", "no MessageId or TopicArn")
	}
	return unwrapped{body: *n.Message, attrs: snsAttributes(n.MessageAttributes), scope: scope(ScopeTopic, n.TopicArn)}, nil
}

// snsAttributes converts SNS message attributes to SQS's form, as raw
// message delivery does: a Binary value is decoded from base64 (kept as its
// bytes if it is not base64), any other is a StringValue.
func snsAttributes(in map[string]snsAttribute) map[string]events.SQSMessageAttribute {
	out := make(map[string]events.SQSMessageAttribute, len(in))
	for name, a := range in {
		if a.Type == "Binary" {
			b, err := base64.StdEncoding.DecodeString(a.Value)
			if err != nil {
				b = []byte(a.Value)
			}
			out[name] = events.SQSMessageAttribute{DataType: a.Type, BinaryValue: b}
			continue
		}
		v := a.Value
		out[name] = events.SQSMessageAttribute{DataType: a.Type, StringValue: &v}
	}
	return out
}

// eventBridgeEvent is the part of an EventBridge event that unwrapping
// reads.
type eventBridgeEvent struct {
	ID         string          `json:"id"`
	Account    string          `json:"account"`
	DetailType *string         `json:"detail-type"`
	Source     *string         `json:"source"`
	Detail     json.RawMessage `json:"detail"`
}

func unwrapEventBridge(body string) (unwrapped, error) {
	var ev eventBridgeEvent
	if err := json.Unmarshal([]byte(body), &ev); err != nil {
		return unwrapped{}, notEnveloped("an EventBridge event", err.Error())
	}
	switch {
	case ev.ID == "" || ev.DetailType == nil || ev.Source == nil || ev.Account == "":
		return unwrapped{}, notEnveloped("an EventBridge event", "no id, detail-type, source or account")
	case !bytes.HasPrefix(bytes.TrimLeft(ev.Detail, " \t\r\n"), []byte("{")):
		return unwrapped{}, notEnveloped("an EventBridge event", "detail is not a JSON object")
	}
	dt, src := *ev.DetailType, *ev.Source
	return unwrapped{
		body: string(ev.Detail),
		attrs: map[string]events.SQSMessageAttribute{
			"detail-type": {DataType: "String", StringValue: &dt},
			"source":      {DataType: "String", StringValue: &src},
		},
		typed: &eventType{source: src, detailType: dt},
		scope: scope(ScopeAccount, ev.Account),
	}, nil
}

func notEnveloped(what, why string) error {
	return fmt.Errorf("%w: %w: body is not %s: %s", ErrMissingKey, ErrNotEnveloped, what, why)
}

// unwrapMessage takes envs off msg's body, outermost first, and returns
// the message as the key sources and the handler see it, the type of the
// innermost event, if an EventBridge envelope was taken off, and the
// envelopes' scopes, outermost first.
func unwrapMessage(envs []Envelope, msg events.SQSMessage) (events.SQSMessage, *eventType, []string, error) {
	var typed *eventType
	var scopes []string
	for _, e := range envs {
		u, err := e.unwrap(msg.Body)
		if err != nil {
			return msg, nil, nil, err
		}
		scopes = append(scopes, u.scope...)
		msg.Body = u.body
		if len(u.attrs) > 0 {
			attrs := maps.Clone(msg.MessageAttributes)
			if attrs == nil {
				attrs = make(map[string]events.SQSMessageAttribute, len(u.attrs))
			}
			maps.Copy(attrs, u.attrs)
			msg.MessageAttributes = attrs
		}
		if u.typed != nil {
			typed = u.typed
		}
	}
	return msg, typed, scopes, nil
}

// envelopePayload is the payload fingerprinted for a message body: the body
// itself, or for an EventBridge event its detail beside its source and
// detail-type, {"detail":...,"detail-type":...,"source":...}.
func envelopePayload(body string, typed *eventType) []byte {
	if typed == nil {
		return []byte(body)
	}
	b := make([]byte, 0, len(body)+len(typed.source)+len(typed.detailType)+48)
	b = append(append(b, `{"detail":`...), body...)
	b = core.AppendJSONString(append(b, `,"detail-type":`...), typed.detailType)
	b = core.AppendJSONString(append(b, `,"source":`...), typed.source)
	return append(b, '}')
}

// hasEventType reports whether envs take an EventBridge envelope off: then
// the fingerprint's selection applies under "detail" (envelopePayload).
func hasEventType(envs []Envelope) bool {
	for _, e := range envs {
		if e.name == "eventbridge" {
			return true
		}
	}
	return false
}

// WithEnvelope makes the SQS or SNS wrapper take envs off every message
// body before anything else reads it, outermost first: WithEnvelope(
// SNSEnvelope()) for an SQS queue subscribed to an SNS topic without raw
// message delivery, WithEnvelope(EventBridgeEnvelope()) for a queue an
// EventBridge rule targets, both (in that order) for an EventBridge rule
// that targets an SNS topic; with the SNS wrapper, the SNS record's Message
// is the outermost body. The key sources read the unwrapped message (a
// body field is a field of the published message, an attribute one of its
// published attributes), the fingerprint covers it, and the handler gets
// it (the SQS handler's msg.Body, the SNS handler's record's Message). A
// message whose body is not in the envelope is not run: its key error
// wraps ErrNotEnveloped (verdict missing_key). SQS and SNS wrappers only:
// Kinesis and DynamoDBStream refuse it.
func WithEnvelope(envs ...Envelope) BatchOption {
	return batchOption(func(c *config) error {
		if len(envs) == 0 {
			return errors.New("idemlambda: WithEnvelope needs an envelope")
		}
		for _, e := range envs {
			if e.unwrap == nil {
				return errors.New("idemlambda: zero Envelope: use SNSEnvelope or EventBridgeEnvelope")
			}
		}
		c.envelopes = append([]Envelope(nil), envs...)
		return nil
	})
}

// sqsRecord is a message of an SQS batch as the wrapper processes it: as
// the handler gets it (unwrapped, WithEnvelope), its fingerprinted payload,
// its stored key (scoped) or the error that leaves it without one, and its
// tenant.
type sqsRecord struct {
	msg     events.SQSMessage
	payload []byte
	key     string
	keyErr  error
	tenant  string
}

// prepare takes a message of an SQS batch out of its envelopes and takes
// its payload and its key, scoped by its tenant and its envelopes (see
// ScopedKey).
func (w *sqsWrapper) prepare(ctx context.Context, msg events.SQSMessage) sqsRecord {
	scopes, tenant, err := w.recordScopes(ctx, msg)
	if err != nil {
		return sqsRecord{msg: msg, payload: []byte(msg.Body), keyErr: err, tenant: tenant}
	}
	m, typed, envScopes, err := unwrapMessage(w.cfg.envelopes, msg)
	if err != nil {
		return sqsRecord{msg: msg, payload: []byte(msg.Body), keyErr: err, tenant: tenant}
	}
	key, err := SQSKey(w.source, w.action, m)
	if err == nil {
		key, err = ScopedKey(key, append(scopes, envScopes...)...)
	}
	return sqsRecord{msg: m, payload: envelopePayload(m.Body, typed), key: key, keyErr: err, tenant: tenant}
}

// payloadFingerprint is the fingerprint of the SQS and SNS wrappers'
// payloads (bodyFingerprint), with the selection applied under the detail
// of an EventBridge envelope's payload (envelopePayload).
func (w *sqsWrapper) payloadFingerprint() idem.FingerprintFunc {
	sel := w.cfg.selectionFor(w.runner)
	if hasEventType(w.cfg.envelopes) {
		sel = sel.Under("detail")
	}
	return bodyFingerprint(sel)
}
