package durable_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/invokeserver"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/lambda/durable"
)

// Every delivery of an event reaches one execution: a warm sandbox replays
// from its memory without an Invoke, a cold one is answered by Lambda with
// the existing execution, while it runs and after it closes, within the
// function's retention; past retention Lambda starts it again (what a table
// is for).
func TestRedeliveriesStartOneExecution(t *testing.T) {
	r := newRig(t)
	ev := batch("", order("o-1", 10), order("o-2", 20), order("o-3", 30))
	a := newSandbox(t)
	equal(t, "first delivery: reported", a.sqs(t, r.d, ev), nil)
	equal(t, "first delivery: verdicts", a.verdicts(), []string{"executed", "executed", "executed"})
	if got := r.srv.Started(); got != 3 {
		t.Fatalf("executions started = %d, want 3", got)
	}

	equal(t, "warm sandbox: reported", a.sqs(t, r.d, ev), nil)
	equal(t, "warm sandbox: verdicts", a.verdicts(), []string{"replayed", "replayed", "replayed"})
	if got := len(r.srv.Invocations()); got != 3 {
		t.Errorf("invocations after the warm redelivery = %d, want 3 (replayed from memory)", got)
	}

	b := newSandbox(t)
	equal(t, "cold sandbox: reported", b.sqs(t, r.d, ev), nil)
	equal(t, "cold sandbox: verdicts", b.verdicts(), []string{"executed", "executed", "executed"})
	equal(t, "cold sandbox: statuses", statuses(r.srv, 3), []int{202, 202, 202})
	inv := r.srv.Invocations()
	for i := range 3 {
		if inv[i].ARN != inv[3+i].ARN {
			t.Errorf("redelivery %d answered %s, want the existing execution %s", i, inv[3+i].ARN, inv[i].ARN)
		}
	}
	for _, name := range names(r.srv) {
		r.srv.CloseExecution(name)
	}
	equal(t, "closed, within retention: reported", newSandbox(t).sqs(t, r.d, ev), nil)
	if got := r.srv.Started(); got != 3 {
		t.Fatalf("executions started after redeliveries = %d, want 3", got)
	}

	r.srv.Advance(invokeserver.DefaultRetention)
	newSandbox(t).sqs(t, r.d, ev)
	if got := r.srv.Started(); got != 6 {
		t.Errorf("executions started past retention = %d, want 6 (Lambda forgot the names)", got)
	}
}

// Duplicates within a batch run after the first of their key and replay
// it, whitespace and key order notwithstanding.
func TestDuplicatesInBatch(t *testing.T) {
	r := newRig(t)
	s := newSandbox(t)
	ev := batch("", order("o-1", 10), order("o-1", 10), order("o-2", 20),
		`{"currency":"EUR","amount":10,"order_id":"o-1"}`)
	equal(t, "reported", s.sqs(t, r.d, ev), nil)
	equal(t, "verdicts", s.verdicts(), []string{"executed", "replayed", "executed", "replayed"})
	if got, want := r.srv.Started(), 2; got != want {
		t.Errorf("executions started = %d, want %d", got, want)
	}
	if got := len(r.srv.Invocations()); got != 2 {
		t.Errorf("invocations = %d, want 2", got)
	}
}

// An event in an SNS or EventBridge envelope is the published event: a
// second publication (another SNS message id and timestamp, another
// EventBridge id and time) reaches the same execution, and the durable
// function receives the event, not the envelope.
func TestEnvelopes(t *testing.T) {
	sns := func(id, ts string) string {
		return `{"Type":"Notification","MessageId":"` + id + `","TopicArn":"arn:aws:sns:us-east-1:123456789012:orders",` +
			`"Message":"{\"order_id\":\"o-7\",\"amount\":70}","Timestamp":"` + ts + `","Signature":"x"}`
	}
	bridge := func(id, at string) string {
		return `{"version":"0","id":"` + id + `","detail-type":"OrderPlaced","source":"shop","account":"123456789012",` +
			`"time":"` + at + `","region":"us-east-1","resources":[],"detail":{"order_id":"o-8","amount":80}}`
	}
	for _, c := range []struct {
		name, first, second, want string
		env                       idemlambda.Envelope
	}{
		{"sns", sns("sns-1", "2030-01-01T00:00:00Z"), sns("sns-2", "2030-01-01T00:05:00Z"), `{"amount":70,"order_id":"o-7"}`, idemlambda.SNSEnvelope()},
		{"eventbridge", bridge("eb-1", "2030-01-01T00:00:00Z"), bridge("eb-2", "2030-01-01T00:05:00Z"),
			`{"detail":{"amount":80,"order_id":"o-8"},"detail-type":"OrderPlaced","source":"shop"}`, idemlambda.EventBridgeEnvelope()},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			env := idemlambda.WithEnvelope(c.env)
			equal(t, "first publication: reported", newSandbox(t).sqs(t, r.d, batch("a", c.first), env), nil)
			equal(t, "second publication: reported", newSandbox(t).sqs(t, r.d, batch("b", c.second), env), nil)
			if got := r.srv.Started(); got != 1 {
				t.Errorf("executions started = %d, want 1", got)
			}
			ns := names(r.srv)
			if len(ns) != 1 {
				t.Fatalf("execution names = %v, want one", ns)
			}
			if got, _ := r.srv.Payload(ns[0]); string(got) != c.want {
				t.Errorf("durable function's payload = %s, want %s", got, c.want)
			}
		})
	}
}

// The SNS wrapper (a topic that invokes the dispatcher) starts one
// execution per published event, and returns an error for Lambda to retry
// an event it could not start.
func TestSNSTopic(t *testing.T) {
	r := newRig(t)
	h, err := durable.SNS(newSandbox(t).runner, "fulfil", idemlambda.KeyFromBodyField("order_id"), r.d)
	if err != nil {
		t.Fatal(err)
	}
	ev := func(id string) events.SNSEvent {
		return events.SNSEvent{Records: []events.SNSEventRecord{{SNS: events.SNSEntity{MessageID: id, Message: order("o-5", 50)}}}}
	}
	if err := h(context.Background(), ev("sns-1")); err != nil {
		t.Fatal(err)
	}
	if err := h(context.Background(), ev("sns-2")); err != nil {
		t.Fatal(err)
	}
	r.srv.Fail(invokeserver.Throttle, invokeserver.Throttle, invokeserver.Throttle)
	var nd *idemlambda.NotDoneError
	if err := h(context.Background(), events.SNSEvent{Records: []events.SNSEventRecord{{SNS: events.SNSEntity{MessageID: "sns-3", Message: order("o-6", 60)}}}}); !errors.As(err, &nd) {
		t.Errorf("throttled event: error %v, want a *NotDoneError", err)
	}
	if got := r.srv.Started(); got != 1 {
		t.Errorf("executions started = %d, want 1", got)
	}
}

// Another payload under an event's key is key_reused: refused by the
// runner's fingerprint where it remembers the key, by Lambda
// (DurableExecutionAlreadyStartedException) elsewhere; reported either way,
// and never a second execution.
func TestPayloadMismatch(t *testing.T) {
	r := newRig(t)
	a := newSandbox(t)
	a.sqs(t, r.d, batch("", order("o-1", 10)))
	a.take()

	b := newSandbox(t)
	equal(t, "cold sandbox: reported", b.sqs(t, r.d, batch("x", order("o-1", 11))), []string{"xm-1"})
	obs := b.take()
	if len(obs) != 1 || obs[0].Verdict != idem.KeyReused {
		t.Fatalf("cold sandbox: observations %+v, want one key_reused", obs)
	}
	var started *types.DurableExecutionAlreadyStartedException
	if !errors.Is(obs[0].Err, durable.ErrAlreadyStarted) || !errors.Is(obs[0].Err, core.ErrKeyReused) || !errors.As(obs[0].Err, &started) {
		t.Errorf("cold sandbox: error %v, want ErrAlreadyStarted, core.ErrKeyReused and the SDK's exception", obs[0].Err)
	}
	equal(t, "statuses", statuses(r.srv, 1), []int{409})

	equal(t, "warm sandbox: reported", a.sqs(t, r.d, batch("y", order("o-1", 11))), []string{"ym-1"})
	equal(t, "warm sandbox: verdicts", a.verdicts(), []string{"key_reused"})
	if got := len(r.srv.Invocations()); got != 2 {
		t.Errorf("invocations = %d, want 2 (the warm sandbox refuses without an Invoke)", got)
	}
	if got := r.srv.Started(); got != 1 {
		t.Errorf("executions started = %d, want 1", got)
	}
}

// Throttling and 5xx, as the SDK decodes them, are transient: retried in
// the call, then reported for SQS to redeliver; the redelivery starts the
// execution once.
func TestThrottlingAndServerErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		fault  invokeserver.Fault
		status int
		is     func(error) bool
	}{
		{"throttling", invokeserver.Throttle, 429, func(err error) bool { var e *types.TooManyRequestsException; return errors.As(err, &e) }},
		{"5xx", invokeserver.ServiceError, 500, func(err error) bool { var e *types.ServiceException; return errors.As(err, &e) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			s := newSandbox(t)
			r.srv.Fail(c.fault, c.fault, c.fault)
			equal(t, "reported", s.sqs(t, r.d, batch("", order("o-1", 10))), []string{"m-1"})
			obs := s.take()
			if len(obs) != 1 || obs[0].Verdict != idem.FailedTransiently || !c.is(obs[0].Err) {
				t.Fatalf("observations %+v, want one failed_transiently with the SDK's exception", obs)
			}
			equal(t, "statuses", statuses(r.srv, 0), []int{c.status, c.status, c.status})
			equal(t, "redelivery: reported", s.sqs(t, r.d, batch("", order("o-1", 10))), nil)
			equal(t, "redelivery: verdicts", s.verdicts(), []string{"executed"})
			if got := r.srv.Started(); got != 1 {
				t.Errorf("executions started = %d, want 1", got)
			}
		})
	}
}

// An event over Lambda's asynchronous payload limit is invalid_payload,
// reported, and not sent; one Lambda refuses as too large gets the same
// verdict; one of exactly the limit is sent.
func TestOversizedEvent(t *testing.T) {
	r := newRig(t)
	s := newSandbox(t)
	pad := func(id string, size int) string {
		head := `{"order_id":"` + id + `","pad":"`
		return head + strings.Repeat("x", size-len(head)-2) + `"}`
	}
	equal(t, "over the limit: reported", s.sqs(t, r.d, batch("", pad("o-big", durable.MaxPayload+1))), []string{"m-1"})
	obs := s.take()
	if len(obs) != 1 || obs[0].Verdict != idem.InvalidPayload || !errors.Is(obs[0].Err, durable.ErrPayloadTooLarge) {
		t.Fatalf("over the limit: observations %+v, want invalid_payload with ErrPayloadTooLarge", obs)
	}
	if got := len(r.srv.Invocations()); got != 0 {
		t.Errorf("over the limit: %d invocations sent, want 0", got)
	}

	equal(t, "at the limit: reported", s.sqs(t, r.d, batch("", pad("o-edge", durable.MaxPayload))), nil)
	equal(t, "at the limit: verdicts", s.verdicts(), []string{"executed"})

	r.srv.SetMaxPayload(100)
	equal(t, "refused by Lambda: reported", s.sqs(t, r.d, batch("", pad("o-mid", 200))), []string{"m-1"})
	obs = s.take()
	var tooLarge *types.RequestTooLargeException
	if len(obs) != 1 || obs[0].Verdict != idem.InvalidPayload || !errors.Is(obs[0].Err, durable.ErrPayloadTooLarge) || !errors.As(obs[0].Err, &tooLarge) {
		t.Fatalf("refused by Lambda: observations %+v, want invalid_payload with ErrPayloadTooLarge", obs)
	}
	equal(t, "statuses", statuses(r.srv, 0), []int{202, 413})
}

// Any other refusal (a missing permission, a missing function) is a
// permanent failure, reported, at ERROR: a misconfiguration to fix.
func TestOtherLambdaErrors(t *testing.T) {
	r := newRig(t)
	s := newSandbox(t)
	r.srv.Fail(invokeserver.Forbidden)
	equal(t, "reported", s.sqs(t, r.d, batch("", order("o-1", 10))), []string{"m-1"})
	equal(t, "verdicts", s.verdicts(), []string{"failed_permanently"})
	equal(t, "statuses", statuses(r.srv, 0), []int{403})
}
