package idemlambda_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/memstore"
)

// The wrappers' own cost per record over the in-memory store: a first
// execution of each message (new key), its body a JSON event of about 400
// bytes or text. What differs between two versions of the wrappers shows
// here, not hidden by a store's latency.

func benchBody(i int) string {
	return fmt.Sprintf(`{"event_id":"evt-%08d","type":"OrderPlaced","order":{"id":"o-%d","customer":"c-77","currency":"EUR",`+
		`"lines":[{"sku":"mug","qty":2,"cents":900},{"sku":"pen","qty":10,"cents":150}],"total_cents":3300},`+
		`"published_at":"2030-01-02T03:04:05Z","trace":{"id":"1-67a0c2b1-1234567890abcdef01234567","sampled":true}}`, i, i)
}

func benchSQS(b *testing.B, key idemlambda.KeySource, body func(int) string, opts ...idemlambda.BatchOption) {
	r, err := idem.New(memstore.New(), idem.WithRetention(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	handle, err := idemlambda.SQS(r, "bench", key, func(context.Context, events.SQSMessage) ([]byte, error) { return []byte(`"ok"`), nil }, opts...)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	evs := make([]events.SQSEvent, 0, 1024)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%1024 == 0 {
			b.StopTimer()
			evs = evs[:0]
			for j := range 1024 {
				m := events.SQSMessage{MessageId: fmt.Sprint("m-", i+j), Body: body(i + j), EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:orders",
					Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
				evs = append(evs, events.SQSEvent{Records: []events.SQSMessage{m}})
			}
			b.StartTimer()
		}
		resp, err := handle(ctx, evs[i%1024])
		if err != nil || len(resp.BatchItemFailures) != 0 {
			b.Fatalf("%+v, %v", resp, err)
		}
		i++
	}
}

// BenchmarkSQSMessage measures one message per batch, each a first
// execution: a JSON body keyed by a body field, and a text body keyed by
// the message id.
func BenchmarkSQSMessage(b *testing.B) {
	b.Run("json", func(b *testing.B) { benchSQS(b, idemlambda.KeyFromBodyField("event_id"), benchBody) })
	b.Run("json-16KiB", func(b *testing.B) {
		// The order with 200 lines: the canonicalization's share grows.
		lines := strings.Repeat(`{"sku":"mug-with-a-longer-name","qty":2,"cents":900,"tags":["kitchen","gift"]},`, 200)
		benchSQS(b, idemlambda.KeyFromMessageID(), func(i int) string {
			return fmt.Sprintf(`{"event_id":"evt-%08d","order":{"lines":[%s{"sku":"pen","qty":1,"cents":150}]}}`, i, lines)
		})
	})
	b.Run("text", func(b *testing.B) {
		benchSQS(b, idemlambda.KeyFromMessageID(), func(i int) string { return fmt.Sprintf("order %d placed by c-77: 2 mugs, 10 pens", i) })
	})
}

// BenchmarkHTTPAPIRequest measures first executions of HTTP API requests
// with a JSON body.
func BenchmarkHTTPAPIRequest(b *testing.B) {
	r, err := idem.New(memstore.New(), idem.WithRetention(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	handle, err := idemlambda.HTTPAPI(r, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"ok":true}`}, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		b.StopTimer()
		req := v2Req("POST", "/orders", fmt.Sprintf("key-%08d", i), benchBody(i))
		b.StartTimer()
		resp, err := handle(ctx, req)
		if err != nil || resp.StatusCode != 201 {
			b.Fatalf("%d %s, %v", resp.StatusCode, resp.Body, err)
		}
		i++
	}
}
