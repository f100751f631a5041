package ddbstore_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/httpidem"
	"github.com/idemgo/idem/internal/fakeclock"
	idemlambda "github.com/idemgo/idem/lambda"
)

// deliver is one delivery of the same event through a wrapper: whether the
// wrapper reported it (batch: in batchItemFailures; HTTP: answered 5xx),
// and what it answered.
type deliver func(t *testing.T, r *idem.Runner, f *fixture) (reported bool, answer string)

// stagedCharge is the handler's work: the order's business item, staged
// to commit with its success.
func stagedCharge(ctx context.Context, f *fixture) ([]byte, error) {
	return []byte(`{"charged":100}`), ddbstore.Stage(ctx, f.bizPut("order-1"))
}

func sqsDelivery(t *testing.T, r *idem.Runner, f *fixture) (bool, string) {
	h, err := idemlambda.SQS(r, "charge", idemlambda.KeyFromMessageID(), func(ctx context.Context, _ events.SQSMessage) ([]byte, error) {
		return stagedCharge(ctx, f)
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "msg-1", Body: `{"order":1}`,
		EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:orders"}}})
	return len(resp.BatchItemFailures) == 1 && resp.BatchItemFailures[0].ItemIdentifier == "msg-1", fmtJSON(t, resp)
}

func kinesisDelivery(t *testing.T, r *idem.Runner, f *fixture) (bool, string) {
	h, err := idemlambda.Kinesis(r, "charge", idemlambda.KinesisKeyFromSequenceNumber(), func(ctx context.Context, _ events.KinesisEventRecord) ([]byte, error) {
		return stagedCharge(ctx, f)
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := h(context.Background(), events.KinesisEvent{Records: []events.KinesisEventRecord{{EventID: "shardId-000000000000:101",
		EventSourceArn: "arn:aws:kinesis:eu-west-1:123456789012:stream/orders",
		Kinesis:        events.KinesisRecord{SequenceNumber: "101", PartitionKey: "order-1", Data: []byte(`{"order":1}`)}}}})
	return len(resp.BatchItemFailures) == 1 && resp.BatchItemFailures[0].ItemIdentifier == "101", fmtJSON(t, resp)
}

func streamDelivery(t *testing.T, r *idem.Runner, f *fixture) (bool, string) {
	h, err := idemlambda.DynamoDBStream(r, "charge", idemlambda.DynamoDBKeyFromEventID(), func(ctx context.Context, _ events.DynamoDBEventRecord) ([]byte, error) {
		return stagedCharge(ctx, f)
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := h(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{EventID: "c81e728d9d4c2f636f067f89cc14862c",
		EventName: "INSERT", EventSourceArn: "arn:aws:dynamodb:eu-west-1:123456789012:table/orders/stream/2026-12-01T00:00:00.000",
		Change: events.DynamoDBStreamRecord{SequenceNumber: "111", Keys: map[string]events.DynamoDBAttributeValue{"id": events.NewStringAttribute("order-1")}}}}})
	return len(resp.BatchItemFailures) == 1 && resp.BatchItemFailures[0].ItemIdentifier == "111", fmtJSON(t, resp)
}

func httpAPIDelivery(t *testing.T, r *idem.Runner, f *fixture) (bool, string) {
	h, err := idemlambda.HTTPAPI(r, func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		body, err := stagedCharge(ctx, f)
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: string(body)}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := h(context.Background(), events.APIGatewayV2HTTPRequest{RawPath: "/orders", Body: `{"order":1}`,
		Headers:        map[string]string{"idempotency-key": "order-1-charge"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPost, Path: "/orders"}}})
	return resp.StatusCode >= 500, fmtJSON(t, resp)
}

func middlewareDelivery(t *testing.T, r *idem.Runner, f *fixture) (bool, string) {
	mw, err := httpidem.Middleware(r)
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := stagedCharge(req.Context(), f)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Location", "/orders/1")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	}))
	req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"order":1}`))
	req.Header.Set("Idempotency-Key", "order-1-charge")
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, req)
	answer := rr.Code
	if loc := rr.Header().Get("Location"); answer >= 500 && loc != "" {
		t.Errorf("the 503 carries the handler's header Location: %s", loc)
	}
	return answer >= 500, http.StatusText(answer) + " " + rr.Header().Get("Retry-After") + " " + rr.Body.String()
}

func fmtJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCommitRefusedThroughTheWrappers: on moto, a staged success whose
// commit DynamoDB refuses (TransactionConflict on the staged item after the
// completion's retries) is reported by the batch wrappers (SQS, Kinesis,
// DynamoDB Streams)
// and answered 503 over HTTP (API Gateway's HTTP API, the net/http
// middleware), and the next delivery (SQS's redelivery, the stream's retry
// of the checkpoint, the client's retry) runs the handler again, commits
// and succeeds, within the first delivery's lease.
func TestCommitRefusedThroughTheWrappers(t *testing.T) {
	transactions(t)
	for _, tc := range []struct {
		name    string
		deliver deliver
	}{
		{"SQS", sqsDelivery},
		{"Kinesis", kinesisDelivery},
		{"DynamoDB Streams", streamDelivery},
		{"HTTP API", httpAPIDelivery},
		{"net/http middleware", middlewareDelivery},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			on := true
			f.rec.inner = conflictTransport{inner: f.rec.inner, on: func() bool { return on }}
			clock := fakeclock.New(time.Now().Truncate(time.Second))
			reported, answer := tc.deliver(t, newRunner(t, f.store, clock), f)
			if !reported || f.bizExists(t, "order-1") {
				t.Fatalf("first delivery, commit refused: reported %v (%s), business item stored %v; want reported, none", reported, answer, f.bizExists(t, "order-1"))
			}
			on = false
			clock.Advance(time.Second)
			reported, answer = tc.deliver(t, newRunner(t, f.store, clock), f)
			if reported || !f.bizExists(t, "order-1") {
				t.Fatalf("next delivery: reported %v (%s), business item stored %v; want it run again, committed", reported, answer, f.bizExists(t, "order-1"))
			}
			t.Logf("next delivery answered %s", answer)
		})
	}
}
