package idemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/memstore"
)

// The signatures follow the senders' published algorithms: GitHub's own test
// vector (docs.github.com, "Validating webhook deliveries"); Stripe's and
// Shopify's computed with Python's hmac module, an implementation of its own.
func TestSignatures(t *testing.T) {
	tests := []struct {
		name, got, want string
	}{
		{"GitHub's published vector", idemtest.SignGitHub("It's a Secret to Everybody", []byte("Hello, World!")),
			"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"},
		{"Stripe: t and v1 over t.payload", idemtest.SignStripe("whsec_test", []byte(`{"id":"evt_1"}`), time.Unix(1893553445, 0)),
			"t=1893553445,v1=192a0389d2de05269bfb6693f6556ca37bb5ad7ab424dba8a45d6879073c984d"},
		{"Shopify: base64 over the body", idemtest.SignShopify("shpss_test", []byte(`{"id":820982911946154500}`)),
			"vRSdXjXJV7B05JijVC88t1r8qnGWjEthBj2mCZ02BfM="},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, tc.got, tc.want)
		}
	}
	if d := idemtest.GitHubDelivery("g", "push", []byte("x"), ""); d.Header.Get("X-Hub-Signature-256") != "" {
		t.Error("an unsigned GitHub delivery carries a signature")
	}
}

// Every event survives the JSON round trip the Lambda runtime makes (the
// wrappers see what a real invocation would decode), and building it twice
// gives the same event but for the ids that are new per request.
func TestEventsDecodeAsTheRuntimeDoes(t *testing.T) {
	img := map[string]events.DynamoDBAttributeValue{"order_id": events.NewStringAttribute("o-1"), "n": events.NewNumberAttribute("7")}
	for name, ev := range map[string]any{
		"SQS":         idemtest.SQSEvent(idemtest.SQSMessage("m-1", `{"a":1}`), idemtest.SQSFIFOMessage("m-2", "b", "g-1", "d-1")),
		"SNS":         idemtest.SNSEvent(idemtest.SNSRecord("sns-1", `{"a":1}`)),
		"EventBridge": idemtest.EventBridgeEvent("eb-1", "com.example", "OrderPlaced", `{"a":1}`),
		"Kinesis":     idemtest.KinesisEvent(idemtest.KinesisRecord(idemtest.SequenceNumber(1), "pk", []byte(`{"a":1}`))),
		"DynamoDB":    idemtest.DynamoDBEvent(idemtest.DynamoDBInsert(idemtest.SequenceNumber(1), img, img), idemtest.DynamoDBRemove(idemtest.SequenceNumber(2), img, img)),
		"HTTP API":    idemtest.HTTPAPIRequest("POST", "/orders", `{"a":1}`, map[string]string{"Idempotency-Key": "k-1"}),
	} {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		back := reflect.New(reflect.TypeOf(ev))
		if err := json.Unmarshal(b, back.Interface()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := back.Elem().Interface(); !reflect.DeepEqual(normalize(t, got), normalize(t, ev)) {
			t.Errorf("%s: decoded %+v\nwant %+v", name, got, ev)
		}
	}
	if a, b := idemtest.SQSMessage("m", "x"), idemtest.SQSMessage("m", "x"); !reflect.DeepEqual(a, b) {
		t.Error("the same SQS message built twice differs")
	}
	if a, b := idemtest.HTTPAPIRequest("GET", "/", "", nil), idemtest.HTTPAPIRequest("GET", "/", "", nil); a.RequestContext.RequestID == b.RequestContext.RequestID {
		t.Error("two requests share a request id")
	}
}

// normalize compares events by their JSON (times in UTC, empty maps and nil alike).
func normalize(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRedelivered(t *testing.T) {
	msg := idemtest.SQSMessage("m-1", "b")
	again := idemtest.Redelivered(msg, 3)
	if again.Attributes["ApproximateReceiveCount"] != "3" || again.MessageId != "m-1" || again.ReceiptHandle == msg.ReceiptHandle {
		t.Errorf("redelivery %+v", again)
	}
	if msg.Attributes["ApproximateReceiveCount"] != "1" {
		t.Error("Redelivered changed the message it was given")
	}
}

func TestClock(t *testing.T) {
	c := idemtest.NewClock(time.Time{})
	if !c.Now().Equal(idemtest.DefaultStart) {
		t.Fatalf("Now = %v, want DefaultStart", c.Now())
	}
	ctx, cancel := c.Invocation(context.Background(), 30*time.Second)
	defer cancel()
	if dl, ok := ctx.Deadline(); !ok || !dl.Equal(idemtest.DefaultStart.Add(30*time.Second)) {
		t.Errorf("deadline %v %v, want the clock's now + 30 s", dl, ok)
	}
	if lc, ok := lambdacontext.FromContext(ctx); !ok || lc.AwsRequestID == "" {
		t.Error("no lambdacontext with a request id")
	}
	if err := c.Sleep(ctx, 2*time.Second); err != nil || !c.Now().Equal(idemtest.DefaultStart.Add(2*time.Second)) {
		t.Errorf("Sleep: %v, now %v", err, c.Now())
	}
	c.Advance(-time.Hour)
	if !c.Now().Equal(idemtest.DefaultStart.Add(2 * time.Second)) {
		t.Error("a negative Advance moved the clock")
	}
	done, stop := context.WithCancel(context.Background())
	stop()
	if err := c.Sleep(done, time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on a done context = %v", err)
	}
}

// The envelopes are unwrapped by the wrappers' envelopes, and the stream
// records are taken in shard order: one run per event, whatever the
// delivery.
func TestEnvelopesAndStreams(t *testing.T) {
	clock := idemtest.NewClock(time.Time{})
	runner, err := idem.New(memstore.New(), idem.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := clock.Invocation(context.Background(), 30*time.Second)
	defer cancel()
	var seen []string
	record := func(_ context.Context, msg events.SQSMessage) ([]byte, error) {
		seen = append(seen, msg.Body)
		return nil, nil
	}
	for _, tc := range []struct {
		env  idemlambda.Envelope
		msgs []events.SQSMessage
	}{
		{idemlambda.SNSEnvelope(), []events.SQSMessage{
			idemtest.SQSMessage("m-1", idemtest.SNSEnvelope("sns-1", `{"id":"a"}`)),
			idemtest.SQSMessage("m-2", idemtest.SNSEnvelope("sns-2", `{"id":"a"}`)), // published twice
		}},
		{idemlambda.EventBridgeEnvelope(), []events.SQSMessage{
			idemtest.SQSMessage("m-3", idemtest.EventBridgeEnvelope("eb-1", "com.example", "OrderPlaced", `{"id":"b"}`)),
			idemtest.SQSMessage("m-4", idemtest.EventBridgeEnvelope("eb-2", "com.example", "OrderPlaced", `{"id":"b"}`)),
		}},
	} {
		handler, err := idemlambda.SQS(runner, "note", idemlambda.KeyFromBodyField("id"), record, idemlambda.WithEnvelope(tc.env))
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := handler(ctx, idemtest.SQSEvent(tc.msgs...)); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Errorf("SQS: %v %v", resp, err)
		}
	}
	if len(seen) != 2 {
		t.Errorf("the handler ran for %q, want once per event: a, b", seen)
	}

	runs := 0
	kin, err := idemlambda.Kinesis(runner, "note", idemlambda.KinesisKeyFromSequenceNumber(), func(context.Context, events.KinesisEventRecord) ([]byte, error) {
		runs++
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := idemtest.KinesisRecord(idemtest.SequenceNumber(1), "pk", []byte(`{}`)), idemtest.KinesisRecord(idemtest.SequenceNumber(2), "pk", []byte(`{}`))
	for range 2 { // the batch, then its retry
		if resp, err := kin(ctx, idemtest.KinesisEvent(r1, r2)); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("Kinesis: %v %v", resp, err)
		}
	}
	if runs != 2 {
		t.Errorf("Kinesis: %d runs for 2 records delivered twice, want 2", runs)
	}
}
