package idemlambda_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
)

// orderHandler is an SQS handler that reads the order id from the message
// body (the published message, once unwrapped), counts runs per order and
// keeps the messages it got.
type orderHandler struct {
	runs counter
	mu   sync.Mutex
	got  []events.SQSMessage
}

func (h *orderHandler) handle(ctx context.Context, m events.SQSMessage) ([]byte, error) {
	var o struct {
		OrderID string `json:"order_id"`
	}
	if err := json.Unmarshal([]byte(m.Body), &o); err != nil || o.OrderID == "" {
		return nil, core.MarkPermanent(errors.New("not an order"))
	}
	h.runs.inc(o.OrderID)
	h.mu.Lock()
	h.got = append(h.got, m)
	h.mu.Unlock()
	return []byte(`"shipped ` + o.OrderID + `"`), nil
}

func (h *orderHandler) last() events.SQSMessage {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[len(h.got)-1]
}

// redelivered is m received once more, as SQS redelivers it after its
// visibility timeout.
func redelivered(m events.SQSMessage) events.SQSMessage {
	m.Attributes = map[string]string{"ApproximateReceiveCount": "2", "SentTimestamp": m.Attributes["SentTimestamp"]}
	m.ReceiptHandle += "-2"
	return m
}

// step is one delivery to a single-message handler: the verdict the runner
// must give and the runs of the handler per order afterwards.
type step struct {
	name string
	msg  events.SQSMessage
	want []idem.Verdict // the verdicts observed, the wrapper's own included
	runs map[string]int
}

func runSteps(t *testing.T, e *env, v *verdictLog, h *orderHandler, handle func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), steps []step) {
	t.Helper()
	for i, s := range steps {
		if _, err := handle(e.ctx(t, time.Minute), events.SQSEvent{Records: []events.SQSMessage{s.msg}}); err != nil {
			t.Fatalf("step %d (%s): err = %v", i, s.name, err)
		}
		if got := v.take(); !slices.Equal(got, s.want) {
			t.Errorf("step %d (%s): verdicts = %v want %v", i, s.name, got, s.want)
		}
		for order, n := range s.runs {
			if got := h.runs.get(order); got != n {
				t.Errorf("step %d (%s): runs of %s = %d want %d", i, s.name, order, got, n)
			}
		}
		e.clock.Advance(30 * time.Second)
	}
}

var (
	executed = []idem.Verdict{idem.Executed}
	replayed = []idem.Verdict{idem.Replayed}
	reused   = []idem.Verdict{idem.KeyReused}
)

// An SNS notification delivered to a queue without raw message delivery is
// deduplicated by the published message's own id: a redelivery and a
// second publish of the event (new MessageId, Timestamp, Signature) replay.
func TestSQSWithSNSEnvelope(t *testing.T) {
	t.Parallel()
	e, v := observedEnv(t)
	h := &orderHandler{}
	handle, err := idemlambda.SQS(e.runner, "ship-order", idemlambda.KeyFromBodyField("order_id"), h.handle,
		idemlambda.WithEnvelope(idemlambda.SNSEnvelope()))
	if err != nil {
		t.Fatal(err)
	}
	first := snsPublish{messageID: "1c2b6f0e-6c4f-5a3e-9d1c-0f6e1b2a3c4d", timestamp: "2030-01-02T03:04:05.678Z", signature: "kX1zQ3f7+9aB==",
		message: `{"order_id":"o-1001","amount_cents":1250,"items":[{"sku":"mug","qty":1}]}`, attrs: map[string]string{"tenant": "acme"}}
	again := first
	again.messageID, again.timestamp, again.signature = "7d9e0a41-2b3c-5d6e-8f90-a1b2c3d4e5f6", "2030-01-02T03:09:12.001Z", "Pq8rS2t+4uV=="
	other := first
	other.messageID, other.message = "0a1b2c3d-4e5f-5061-8293-a4b5c6d7e8f9", `{"order_id":"o-1002","amount_cents":990,"items":[]}`
	m1 := sqsMsg("b9e3c1a2-0001", first.sqsBody())
	runSteps(t, e, v, h, handle, []step{
		{"first delivery", m1, executed, map[string]int{"o-1001": 1}},
		{"redelivery of the same SQS message", redelivered(m1), replayed, map[string]int{"o-1001": 1}},
		{"the event published again", sqsMsg("b9e3c1a2-0002", again.sqsBody()), replayed, map[string]int{"o-1001": 1}},
		{"another event", sqsMsg("b9e3c1a2-0003", other.sqsBody()), executed, map[string]int{"o-1001": 1, "o-1002": 1}},
	})
	got := h.got[0]
	if got.Body != first.message || got.MessageId != "b9e3c1a2-0001" {
		t.Errorf("handler got body %q, message id %q; want the published message and the SQS message id", got.Body, got.MessageId)
	}
	if a := got.MessageAttributes["tenant"]; a.StringValue == nil || *a.StringValue != "acme" || a.DataType != "String" {
		t.Errorf("handler got attribute tenant %+v; want the published String attribute acme", a)
	}
}

// A composite key: the same order id under another tenant is another event.
func TestSQSCompositeKey(t *testing.T) {
	t.Parallel()
	e, v := observedEnv(t)
	h := &orderHandler{}
	handle, err := idemlambda.SQS(e.runner, "ship-order",
		idemlambda.KeyFromAll(idemlambda.KeyFromAttribute("tenant"), idemlambda.KeyFromBodyField("order_id")), h.handle,
		idemlambda.WithEnvelope(idemlambda.SNSEnvelope()))
	if err != nil {
		t.Fatal(err)
	}
	acme := snsPublish{messageID: "5f1e-0001", timestamp: "2030-01-02T03:04:05.000Z", signature: "s1",
		message: `{"order_id":"o-7","amount_cents":100}`, attrs: map[string]string{"tenant": "acme"}}
	globex := acme
	globex.messageID, globex.attrs = "5f1e-0002", map[string]string{"tenant": "globex"}
	noTenant := acme
	noTenant.messageID, noTenant.attrs = "5f1e-0003", nil
	runSteps(t, e, v, h, handle, []step{
		{"acme's order o-7", sqsMsg("m-1", acme.sqsBody()), executed, map[string]int{"o-7": 1}},
		{"globex's order o-7", sqsMsg("m-2", globex.sqsBody()), executed, map[string]int{"o-7": 2}},
		{"acme's order o-7 again", sqsMsg("m-3", acme.sqsBody()), replayed, map[string]int{"o-7": 2}},
		{"no tenant attribute: no key", sqsMsg("m-4", noTenant.sqsBody()), []idem.Verdict{idem.MissingKey}, map[string]int{"o-7": 2}},
	})
}

// An EventBridge event delivered to a queue by a rule: keyed by a field of
// its detail; a second put of the event (new id and time) replays; the same
// detail under another detail-type is another payload.
func TestSQSWithEventBridgeEnvelope(t *testing.T) {
	t.Parallel()
	e, v := observedEnv(t)
	h := &orderHandler{}
	handle, err := idemlambda.SQS(e.runner, "ship-order", idemlambda.KeyFromBodyField("order_id"), h.handle,
		idemlambda.WithEnvelope(idemlambda.EventBridgeEnvelope()))
	if err != nil {
		t.Fatal(err)
	}
	detail := `{"order_id":"o-42","amount_cents":4200,"customer":{"id":"c-9"}}`
	placed := ebEvent("3e5f7a90-1b2c-4d5e-8f9a-0b1c2d3e4f50", "2030-01-02T03:04:05Z", "OrderPlaced", detail)
	putAgain := ebEvent("8a7b6c5d-4e3f-4a1b-9c8d-7e6f5a4b3c2d", "2030-01-02T03:05:00Z", "OrderPlaced", detail)
	cancelled := ebEvent("c0ffee00-1234-4abc-8def-0123456789ab", "2030-01-02T03:06:00Z", "OrderCancelled", detail)
	runSteps(t, e, v, h, handle, []step{
		{"first delivery", sqsMsg("m-1", placed), executed, map[string]int{"o-42": 1}},
		{"the event put again", sqsMsg("m-2", putAgain), replayed, map[string]int{"o-42": 1}},
		{"another detail-type, same detail and key", sqsMsg("m-3", cancelled), reused, map[string]int{"o-42": 1}},
	})
	got := h.got[0]
	if got.Body != detail {
		t.Errorf("handler got body %s; want the detail %s", got.Body, detail)
	}
	for name, want := range map[string]string{"detail-type": "OrderPlaced", "source": "com.example.orders"} {
		if a := got.MessageAttributes[name]; a.StringValue == nil || *a.StringValue != want {
			t.Errorf("attribute %s = %+v; want %q", name, a, want)
		}
	}

	// Keyed by the detail-type too, each kind of event is its own operation.
	e2, v2 := observedEnv(t)
	h2 := &orderHandler{}
	byType, err := idemlambda.SQS(e2.runner, "ship-order",
		idemlambda.KeyFromAll(idemlambda.KeyFromAttribute("detail-type"), idemlambda.KeyFromBodyField("order_id")), h2.handle,
		idemlambda.WithEnvelope(idemlambda.EventBridgeEnvelope()))
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, e2, v2, h2, byType, []step{
		{"OrderPlaced", sqsMsg("m-1", placed), executed, map[string]int{"o-42": 1}},
		{"OrderCancelled", sqsMsg("m-3", cancelled), executed, map[string]int{"o-42": 2}},
		{"OrderPlaced put again", sqsMsg("m-2", putAgain), replayed, map[string]int{"o-42": 2}},
	})
}

// An EventBridge rule that targets an SNS topic, whose queue subscription
// has no raw message delivery: two envelopes, outermost first.
func TestSQSWithTwoEnvelopes(t *testing.T) {
	t.Parallel()
	e, v := observedEnv(t)
	h := &orderHandler{}
	handle, err := idemlambda.SQS(e.runner, "ship-order", idemlambda.KeyFromBodyField("order_id"), h.handle,
		idemlambda.WithEnvelope(idemlambda.SNSEnvelope(), idemlambda.EventBridgeEnvelope()),
		idemlambda.WithFingerprintSelection(core.IgnoreFields("trace.id")))
	if err != nil {
		t.Fatal(err)
	}
	pub := func(snsID, ebID, traceID string) string {
		return snsPublish{messageID: snsID, timestamp: "2030-01-02T03:04:05.000Z", signature: "sig-" + snsID,
			message: ebEvent(ebID, "2030-01-02T03:04:04Z", "OrderPlaced", `{"order_id":"o-5","trace":{"id":"`+traceID+`"}}`)}.sqsBody()
	}
	runSteps(t, e, v, h, handle, []step{
		{"first", sqsMsg("m-1", pub("sns-1", "eb-1", "t-1")), executed, map[string]int{"o-5": 1}},
		{"put again with another trace id", sqsMsg("m-2", pub("sns-2", "eb-2", "t-2")), replayed, map[string]int{"o-5": 1}},
	})
	if got := h.last().Body; got != `{"order_id":"o-5","trace":{"id":"t-1"}}` {
		t.Errorf("handler got %s; want the detail", got)
	}
}

// A body that is not in the envelope (raw message delivery turned on, a
// message sent to the queue directly) has no key: the handler does not run,
// and the log says why.
func TestSQSNotEnveloped(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	e, v := observedEnv(t, idem.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	h := &orderHandler{}
	handle, err := idemlambda.SQS(e.runner, "ship-order", idemlambda.KeyFromBodyField("order_id"), h.handle,
		idemlambda.WithEnvelope(idemlambda.SNSEnvelope()))
	if err != nil {
		t.Fatal(err)
	}
	for i, body := range []string{
		`{"order_id":"o-1"}`, // raw message delivery
		`{"Type":"SubscriptionConfirmation","MessageId":"x","TopicArn":"` + topicARN + `","Message":"confirm"}`,
		`{"Type":"Notification","MessageId":"x","TopicArn":"` + topicARN + `","Message":{"order_id":"o-1"}}`,
		"plain text",
	} {
		logs.Reset()
		if _, err := handle(e.ctx(t, time.Minute), events.SQSEvent{Records: []events.SQSMessage{sqsMsg("m-1", body)}}); err != nil {
			t.Fatal(err)
		}
		if got := v.take(); !slices.Equal(got, []idem.Verdict{idem.MissingKey}) || h.runs.get("o-1") != 0 {
			t.Errorf("body %d: verdicts %v, runs %d; want [missing_key] and no run", i, got, h.runs.get("o-1"))
		}
		if !strings.Contains(logs.String(), `"verdict":"missing_key"`) || !strings.Contains(logs.String(), "is not an SNS notification") {
			t.Errorf("body %d: log %s; want missing_key saying the body is not an SNS notification", i, logs.String())
		}
	}
	if _, err := idemlambda.SNSEnvelope().Unwrap(sqsMsg("m-1", "plain")); !errors.Is(err, idemlambda.ErrNotEnveloped) || !errors.Is(err, idemlambda.ErrMissingKey) {
		t.Errorf("Unwrap(plain) err = %v; want ErrNotEnveloped and ErrMissingKey", err)
	}
}

// A re-published event whose only change is a timestamp in its body is
// refused as a reused key by default; with that field ignored it replays.
func TestSQSFingerprintSelection(t *testing.T) {
	t.Parallel()
	first := `{"order_id":"o-3","amount_cents":700,"published_at":"2030-01-02T03:04:05Z"}`
	again := `{"published_at":"2030-01-02T03:19:41Z","amount_cents":700,"order_id":"o-3"}`
	changed := `{"order_id":"o-3","amount_cents":800,"published_at":"2030-01-02T03:20:00Z"}`
	tests := []struct {
		name  string
		opts  []idemlambda.BatchOption
		run   []idem.Option
		again []idem.Verdict
	}{
		{"whole body (default)", nil, nil, reused},
		{"wrapper ignores published_at", []idemlambda.BatchOption{idemlambda.WithFingerprintSelection(core.IgnoreFields("published_at"))}, nil, replayed},
		{"wrapper selects order_id and amount_cents", []idemlambda.BatchOption{idemlambda.WithFingerprintSelection(core.SelectFields("order_id", "amount_cents"))}, nil, replayed},
		{"runner ignores published_at", nil, []idem.Option{idem.WithFingerprintSelection(core.IgnoreFields("published_at"))}, replayed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, v := observedEnv(t, tc.run...)
			h := &orderHandler{}
			handle, err := idemlambda.SQS(e.runner, "ship-order", idemlambda.KeyFromBodyField("order_id"), h.handle, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			runSteps(t, e, v, h, handle, []step{
				{"first", sqsMsg("m-1", first), executed, map[string]int{"o-3": 1}},
				{"published again, new timestamp", sqsMsg("m-2", again), tc.again, map[string]int{"o-3": 1}},
				{"another amount under the same key", sqsMsg("m-3", changed), reused, map[string]int{"o-3": 1}},
			})
		})
	}
}

func TestWithEnvelopeErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := (&orderHandler{}).handle
	if _, err := idemlambda.SQS(e.runner, "a", idemlambda.KeyFromMessageID(), h, idemlambda.WithEnvelope()); err == nil {
		t.Error("WithEnvelope(): no error")
	}
	if _, err := idemlambda.SQS(e.runner, "a", idemlambda.KeyFromMessageID(), h, idemlambda.WithEnvelope(idemlambda.Envelope{})); err == nil {
		t.Error("WithEnvelope(Envelope{}): no error")
	}
	kin := func(context.Context, events.KinesisEventRecord) ([]byte, error) { return nil, nil }
	if _, err := idemlambda.Kinesis(e.runner, "a", idemlambda.KinesisKeyFromPartitionKey(), kin, idemlambda.WithEnvelope(idemlambda.EventBridgeEnvelope())); err == nil {
		t.Error("Kinesis with WithEnvelope: no error")
	}
	ddb := func(context.Context, events.DynamoDBEventRecord) ([]byte, error) { return nil, nil }
	if _, err := idemlambda.DynamoDBStream(e.runner, "a", idemlambda.DynamoDBKeyFromEventID(), ddb, idemlambda.WithEnvelope(idemlambda.SNSEnvelope())); err == nil {
		t.Error("DynamoDBStream with WithEnvelope: no error")
	}
	if _, err := idemlambda.SQS(e.runner, "a", idemlambda.KeyFromMessageID(), h, idemlambda.WithFingerprintSelection(core.SelectFields("a..b"))); !errors.Is(err, core.ErrInvalidSelection) {
		t.Errorf("a bad selection: err = %v, want ErrInvalidSelection", err)
	}
}
