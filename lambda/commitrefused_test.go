package idemlambda_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/refusecommit"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/memstore"
)

// refusedRunner is a runner over a store that refuses the first commit of
// staged writes, certainly writing nothing (idem.CommitRefused).
func refusedRunner(t *testing.T) *idem.Runner {
	store := refusecommit.New()
	store.Refuse.Store(1)
	store.Permanent = true // no completion retry: one commit refused
	r, err := idem.New(store)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestHTTPCommitRefused: an HTTP wrapper answers a request whose commit
// was refused 503 commit-refused with Retry-After: 1, not the handler's
// 201, and the client's retry with the same key runs the handler again and
// gets its answer: API Gateway's HTTP API and ALB (the REST API and
// function URLs share the HTTP API's machinery).
func TestHTTPCommitRefused(t *testing.T) {
	stage := func(ctx context.Context, ledger *int) error {
		return memstore.Stage(ctx, memstore.Write{Apply: func() { *ledger++ }})
	}
	t.Run("HTTP API", func(t *testing.T) {
		runs, ledger := 0, 0
		h, err := idemlambda.HTTPAPI(refusedRunner(t), func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs++
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Headers: map[string]string{"Location": "/orders/1"}, Body: `{"id":1}`}, stage(ctx, &ledger)
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []int{http.StatusServiceUnavailable, http.StatusCreated} {
			resp, _ := h(context.Background(), v2Req("POST", "/orders", "k-refused", `{"n":1}`))
			got := fmt.Sprintf("%d %s", resp.StatusCode, resp.Headers["Location"])
			if resp.StatusCode != want || i == 0 && (problemOf(t, resp).Type != idemlambda.ProblemTypeBase+idemlambda.ProblemCommitRefused ||
				resp.Headers["Retry-After"] != "1" || resp.Headers["Location"] != "") {
				t.Fatalf("request %d = %s %s %v; want %d", i+1, got, resp.Body, resp.Headers, want)
			}
			if runs != i+1 || ledger != i {
				t.Fatalf("after request %d: runs %d, ledger %d", i+1, runs, ledger)
			}
		}
	})
	t.Run("ALB", func(t *testing.T) {
		runs := 0
		h, err := idemlambda.ALB(refusedRunner(t), func(ctx context.Context, _ events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
			runs++
			var ledger int
			return events.ALBTargetGroupResponse{StatusCode: http.StatusCreated, Body: `{"id":1}`}, stage(ctx, &ledger)
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []int{http.StatusServiceUnavailable, http.StatusCreated} {
			resp, _ := h(context.Background(), albReq(false, "POST", "/orders", "k-refused", `{"n":1}`))
			if resp.StatusCode != want || runs != i+1 {
				t.Fatalf("request %d = %d %s, runs %d; want %d", i+1, resp.StatusCode, resp.Body, runs, want)
			}
		}
	})
}

// TestBatchCommitRefused: SQS and Kinesis report a record whose commit was
// refused (a redelivery can make it succeed, so it cannot be acknowledged,
// even by WithAcknowledged), and the redelivery runs the handler again and
// is acknowledged.
func TestBatchCommitRefused(t *testing.T) {
	noop := func(context.Context, events.SQSMessage) ([]byte, error) { return nil, nil }
	if _, err := idemlambda.SQS(refusedRunner(t), "charge", idemlambda.KeyFromMessageID(), noop, idemlambda.WithAcknowledged(idem.CommitRefused)); err == nil ||
		!strings.Contains(err.Error(), "commit_refused cannot be acknowledged") {
		t.Errorf("WithAcknowledged(idem.CommitRefused) = %v; want refused", err)
	}
	var runs, ledger int
	handle := func(ctx context.Context) ([]byte, error) {
		runs++
		return []byte(`{"ok":true}`), memstore.Stage(ctx, memstore.Write{Apply: func() { ledger++ }})
	}
	// twice delivers the same record twice, with reported telling whether
	// the wrapper reported it: the first is refused, the redelivery commits.
	twice := func(t *testing.T, reported func() bool) {
		runs, ledger = 0, 0
		for i, want := range []bool{true, false} {
			if got := reported(); got != want || runs != i+1 || ledger != i {
				t.Fatalf("delivery %d: reported %v, runs %d, ledger %d; want reported %v, %d runs", i+1, got, runs, ledger, want, i+1)
			}
		}
	}
	t.Run("SQS", func(t *testing.T) {
		h, err := idemlambda.SQS(refusedRunner(t), "charge", idemlambda.KeyFromMessageID(), func(ctx context.Context, _ events.SQSMessage) ([]byte, error) {
			return handle(ctx)
		})
		if err != nil {
			t.Fatal(err)
		}
		twice(t, func() bool {
			resp, _ := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: `{"n":1}`}}})
			return len(resp.BatchItemFailures) == 1
		})
	})
	t.Run("Kinesis", func(t *testing.T) {
		h, err := idemlambda.Kinesis(refusedRunner(t), "charge", idemlambda.KinesisKeyFromSequenceNumber(), func(ctx context.Context, _ events.KinesisEventRecord) ([]byte, error) {
			return handle(ctx)
		})
		if err != nil {
			t.Fatal(err)
		}
		ev := events.KinesisEvent{Records: []events.KinesisEventRecord{{EventID: "shardId-000000000000:7", EventSourceArn: "arn:aws:kinesis:eu-west-1:123456789012:stream/s",
			Kinesis: events.KinesisRecord{SequenceNumber: "7", PartitionKey: "p", Data: []byte(`{"n":1}`)}}}}
		twice(t, func() bool {
			resp, _ := h(context.Background(), ev)
			return len(resp.BatchItemFailures) == 1
		})
	})
}
