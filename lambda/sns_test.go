package idemlambda_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
)

// An SNS topic invoking the function directly: Lambda's retries of one
// publish and a second publish of the event replay; another event runs; a
// message that must be retried makes the handler return *NotDoneError, so
// that Lambda retries the event and then uses its on-failure destination.
func TestSNS(t *testing.T) {
	t.Parallel()
	e, v := observedEnv(t)
	var runs counter
	var got []events.SNSEventRecord
	handle, err := idemlambda.SNS(e.runner, "ship-order", idemlambda.KeyFromBodyField("order_id"),
		func(ctx context.Context, rec events.SNSEventRecord) ([]byte, error) {
			var o struct {
				OrderID string `json:"order_id"`
				Fail    bool   `json:"fail"`
			}
			if err := json.Unmarshal([]byte(rec.SNS.Message), &o); err != nil {
				return nil, core.MarkPermanent(err)
			}
			got = append(got, rec)
			if runs.inc(o.OrderID); o.Fail {
				return nil, core.MarkTransient(errors.New("carrier API unavailable"))
			}
			return []byte(`"shipped"`), nil
		}, idemlambda.WithConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	first := snsPublish{messageID: "95df01b4-ee98-5cb9-9903-4c221d41eb5e", timestamp: "2030-01-02T03:04:05.123Z", signature: "tcc6faL2yUC6dgZdmrwh1Y4cGa/ebXEkAi6RibDsvpi+tE/1+82j",
		message: `{"order_id":"o-9","amount_cents":3000}`, attrs: map[string]string{"tenant": "acme"}}
	again := first
	again.messageID, again.timestamp, again.signature = "2a1f4c33-8d5e-5f60-a7b8-c9d0e1f2a3b4", "2030-01-02T04:00:00.000Z", "Zx0yW9vU8tS7"
	other := first
	other.messageID, other.message = "6e5d4c3b-2a19-5807-b6a5-948372615049", `{"order_id":"o-10","amount_cents":10}`
	failing := first
	failing.messageID, failing.message = "f00dfeed-0000-5000-8000-000000000001", `{"order_id":"o-11","fail":true}`
	steps := []struct {
		name    string
		ev      events.SNSEvent
		want    []idem.Verdict
		notDone []string
	}{
		{"first invocation", first.lambdaEvent(t), executed, nil},
		{"Lambda's retry of the same event", first.lambdaEvent(t), replayed, nil},
		{"the event published again", again.lambdaEvent(t), replayed, nil},
		{"another event", other.lambdaEvent(t), executed, nil},
		{"a transient failure", failing.lambdaEvent(t), []idem.Verdict{idem.FailedTransiently}, []string{failing.messageID}},
	}
	for i, s := range steps {
		err := handle(e.ctx(t, time.Minute), s.ev)
		var nd *idemlambda.NotDoneError
		switch {
		case s.notDone == nil && err != nil:
			t.Errorf("step %d (%s): err = %v, want nil", i, s.name, err)
		case s.notDone != nil && (!errors.As(err, &nd) || !slices.Equal(nd.MessageIDs, s.notDone)):
			t.Errorf("step %d (%s): err = %v, want *NotDoneError for %v", i, s.name, err, s.notDone)
		}
		if gotV := v.take(); !slices.Equal(gotV, s.want) {
			t.Errorf("step %d (%s): verdicts = %v want %v", i, s.name, gotV, s.want)
		}
		e.clock.Advance(time.Minute)
	}
	if runs.get("o-9") != 1 || runs.get("o-10") != 1 {
		t.Errorf("runs o-9 %d, o-10 %d; want 1 each", runs.get("o-9"), runs.get("o-10"))
	}
	if r := got[0]; r.SNS.MessageID != first.messageID || r.SNS.Message != first.message || r.SNS.TopicArn != topicARN {
		t.Errorf("handler got %+v; want the SNS record", r.SNS)
	}
}

// SNS key sources read the record as raw message delivery would queue it:
// the SNS MessageId, the published attributes.
func TestSNSMessage(t *testing.T) {
	t.Parallel()
	p := snsPublish{messageID: "95df01b4-0001", timestamp: "2030-01-02T03:04:05.123Z", signature: "s", message: "Hello from SNS!", attrs: map[string]string{"tenant": "acme"}}
	ev := p.lambdaEvent(t)
	ev.Records[0].SNS.MessageAttributes["TestBinary"] = map[string]any{"Type": "Binary", "Value": "aGk="}
	m := idemlambda.SNSMessage(ev.Records[0])
	if m.MessageId != p.messageID || m.Body != "Hello from SNS!" || m.EventSourceARN != subARN {
		t.Errorf("SNSMessage = %+v", m)
	}
	if a := m.MessageAttributes["tenant"]; a.StringValue == nil || *a.StringValue != "acme" {
		t.Errorf("tenant attribute = %+v", a)
	}
	if a := m.MessageAttributes["TestBinary"]; string(a.BinaryValue) != "hi" || a.DataType != "Binary" {
		t.Errorf("binary attribute = %+v", a)
	}
	for _, c := range []struct {
		src  idemlambda.KeySource
		want string
	}{{idemlambda.KeyFromMessageID(), p.messageID}, {idemlambda.KeyFromAttribute("tenant"), "acme"}} {
		if id, err := c.src.EventID(m); err != nil || id != c.want {
			t.Errorf("%v: %q, %v; want %q", c.src, id, err, c.want)
		}
	}
}

// An EventBridge rule targeting a topic that invokes the function: the
// handler's record carries the detail in SNS.Message.
func TestSNSWithEventBridgeEnvelope(t *testing.T) {
	t.Parallel()
	e, v := observedEnv(t)
	var msgs []string
	handle, err := idemlambda.SNS(e.runner, "ship-order", idemlambda.KeyFromBodyField("order_id"),
		func(ctx context.Context, rec events.SNSEventRecord) ([]byte, error) {
			msgs = append(msgs, rec.SNS.Message)
			return nil, nil
		}, idemlambda.WithEnvelope(idemlambda.EventBridgeEnvelope()))
	if err != nil {
		t.Fatal(err)
	}
	p := snsPublish{messageID: "m-1", timestamp: "2030-01-02T03:04:05.123Z", signature: "s",
		message: ebEvent("eb-1", "2030-01-02T03:04:04Z", "OrderPlaced", `{"order_id":"o-1"}`)}
	q := p
	q.messageID, q.message = "m-2", ebEvent("eb-2", "2030-01-02T03:14:04Z", "OrderPlaced", `{"order_id":"o-1"}`)
	for i, ev := range []events.SNSEvent{p.lambdaEvent(t), q.lambdaEvent(t)} {
		if err := handle(e.ctx(t, time.Minute), ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	if got := v.take(); !slices.Equal(got, []idem.Verdict{idem.Executed, idem.Replayed}) {
		t.Errorf("verdicts = %v", got)
	}
	if !slices.Equal(msgs, []string{`{"order_id":"o-1"}`}) {
		t.Errorf("handler got %v; want the detail, once", msgs)
	}
}

// SNS leaves the bound to Lambda's retries of the event: an ordinary error
// runs on every invocation, however many (a function with more retries, or
// an event published again), and is never exhausted by idem's own bound.
func TestSNSHasNoBoundOfItsOwn(t *testing.T) {
	t.Parallel()
	e, v := observedEnv(t)
	runs := 0
	handle, err := idemlambda.SNS(e.runner, "ship-order", idemlambda.KeyFromBodyField("order_id"),
		func(context.Context, events.SNSEventRecord) ([]byte, error) {
			runs++
			return nil, errors.New("carrier said no")
		})
	if err != nil {
		t.Fatal(err)
	}
	pub := snsPublish{messageID: "95df01b4-ee98-5cb9-9903-4c221d41eb5e", timestamp: "2030-01-02T03:04:05.123Z", signature: "c2ln",
		message: `{"order_id":"o-12"}`}
	n := idem.DefaultMaxAttempts + 2
	for i := range n {
		var nd *idemlambda.NotDoneError
		if err := handle(e.ctx(t, time.Minute), pub.lambdaEvent(t)); !errors.As(err, &nd) {
			t.Fatalf("invocation %d = %v, want *NotDoneError", i+1, err)
		}
	}
	if got := v.take(); runs != n || len(got) != n || got[n-1] != idem.FailedUnclassified {
		t.Errorf("%d invocations ran the handler %d times, verdicts %v; want every one, failed_unclassified", n, runs, got)
	}
}
