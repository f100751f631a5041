package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem/httpidem"
	idemlambda "github.com/idemgo/idem/lambda"
)

// wrapperBatch is the size of the SQS and Kinesis batches measured.
const wrapperBatch = 10

// wrapperRows measures the SQS, Kinesis and HTTP wrappers: a first delivery
// and a redelivery of the same messages, records or requests.
func wrapperRows(e *capEnv) ([]capRow, error) {
	var rows []capRow
	for _, w := range []struct {
		name, per string
		make      func(*capEnv) (func(first bool) error, int, error)
	}{
		{"sqs_batch10", "message", sqsDeliveries},
		{"kinesis_batch10", "record", kinesisDeliveries},
		{"http_api", "request", httpAPIDeliveries},
		{"httpidem", "request", httpidemDeliveries},
	} {
		deliver, units, err := w.make(e)
		if err != nil {
			return nil, err
		}
		for _, first := range []bool{true, false} {
			name := w.name + "_first"
			if !first {
				name = w.name + "_redelivered"
			}
			row, err := e.measure(name, w.per, units, func() error { return deliver(first) })
			if err != nil {
				return nil, err
			}
			row.Note = "the wrapper's first delivery; then the same again (replays)"
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// batches returns the events of b batches of wrapperBatch, one per capEnv event.
func (e *capEnv) batches(name string) [][]event {
	out := make([][]event, max(1, e.events/wrapperBatch))
	for b := range out {
		for j := range wrapperBatch {
			out[b] = append(out[b], makeEvent(name, "cap", b*wrapperBatch+j, 100+j))
		}
	}
	return out
}

func sqsDeliveries(e *capEnv) (func(bool) error, int, error) {
	r, err := e.runner()
	if err != nil {
		return nil, 0, err
	}
	results := map[string][]byte{}
	h, err := idemlambda.SQS(r, "bench", idemlambda.KeyFromBodyField("id"), func(_ context.Context, msg events.SQSMessage) ([]byte, error) {
		return results[msg.MessageId], nil
	})
	if err != nil {
		return nil, 0, err
	}
	bs := e.batches("sqs")
	for _, b := range bs {
		for _, ev := range b {
			results["msg-"+ev.key] = ev.result
		}
	}
	return func(bool) error {
		for _, b := range bs {
			resp, err := h(e.ctx, sqsEvent(b))
			if err != nil || len(resp.BatchItemFailures) > 0 {
				return fmt.Errorf("sqs: %v, failures %v", err, resp.BatchItemFailures)
			}
		}
		return nil
	}, len(bs) * wrapperBatch, nil
}

func kinesisDeliveries(e *capEnv) (func(bool) error, int, error) {
	r, err := e.runner()
	if err != nil {
		return nil, 0, err
	}
	h, err := idemlambda.Kinesis(r, "bench", idemlambda.KinesisKeyFromDataField("id"), func(context.Context, events.KinesisEventRecord) ([]byte, error) {
		return []byte(`{"ok":true}`), nil
	})
	if err != nil {
		return nil, 0, err
	}
	bs := e.batches("kinesis")
	return func(bool) error {
		for _, b := range bs {
			var ev events.KinesisEvent
			for i, m := range b {
				seq := fmt.Sprintf("4959%016d", i)
				ev.Records = append(ev.Records, events.KinesisEventRecord{EventID: "shardId-000000000000:" + seq,
					EventSourceArn: "arn:aws:kinesis:us-east-1:000000000000:stream/bench-orders", EventSource: "aws:kinesis",
					Kinesis: events.KinesisRecord{SequenceNumber: seq, PartitionKey: m.key, Data: m.payload}})
			}
			resp, err := h(e.ctx, ev)
			if err != nil || len(resp.BatchItemFailures) > 0 {
				return fmt.Errorf("kinesis: %v, failures %v", err, resp.BatchItemFailures)
			}
		}
		return nil
	}, len(bs) * wrapperBatch, nil
}

func httpAPIDeliveries(e *capEnv) (func(bool) error, int, error) {
	r, err := e.runner()
	if err != nil {
		return nil, 0, err
	}
	h, err := idemlambda.HTTPAPI(r, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"content-type": "application/json"}, Body: `{"ok":true}`}, nil
	})
	if err != nil {
		return nil, 0, err
	}
	evs := makeEvents("http_api", "cap", e.events, 0)
	return func(first bool) error {
		for _, ev := range evs {
			req := events.APIGatewayV2HTTPRequest{RawPath: "/orders", Headers: map[string]string{"idempotency-key": ev.key, "content-type": "application/json"},
				Body: string(ev.payload)}
			req.RequestContext.HTTP.Method, req.RequestContext.HTTP.Path = http.MethodPost, "/orders"
			resp, err := h(e.ctx, req)
			if err != nil || resp.StatusCode != 201 || (resp.Headers["Idempotent-Replayed"] == "true") == first {
				return fmt.Errorf("http api: %v, status %d, headers %v", err, resp.StatusCode, resp.Headers)
			}
		}
		return nil
	}, len(evs), nil
}

func httpidemDeliveries(e *capEnv) (func(bool) error, int, error) {
	r, err := e.runner()
	if err != nil {
		return nil, 0, err
	}
	mw, err := httpidem.Middleware(r)
	if err != nil {
		return nil, 0, err
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	evs := makeEvents("httpidem", "cap", e.events, 0)
	return func(first bool) error {
		for _, ev := range evs {
			req := httptest.NewRequestWithContext(e.ctx, http.MethodPost, "/orders", bytes.NewReader(ev.payload))
			req.Header.Set("Idempotency-Key", ev.key)
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusCreated || (rec.Header().Get("Idempotent-Replayed") == "true") == first {
				return fmt.Errorf("httpidem: status %d, headers %v, body %s", rec.Code, rec.Header(), rec.Body)
			}
		}
		return nil
	}, len(evs), nil
}
