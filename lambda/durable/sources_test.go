package durable_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/lambda/durable"
	"github.com/idemgo/idem/webhook"
)

// Kinesis and DynamoDB Streams: a record delivered again (a retried batch,
// another sandbox) reaches the execution its first delivery started.
func TestStreams(t *testing.T) {
	t.Run("kinesis", func(t *testing.T) {
		r := newRig(t)
		rec := func(seq string) events.KinesisEventRecord {
			return events.KinesisEventRecord{EventID: "shardId-000:" + seq, EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/orders",
				Kinesis: events.KinesisRecord{SequenceNumber: seq, PartitionKey: "p", Data: []byte(order("o-1", 10))}}
		}
		for i, seq := range []string{"1", "2"} {
			h, err := durable.Kinesis(newSandbox(t).runner, "fulfil", idemlambda.KinesisKeyFromDataField("order_id"), r.d)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := h(context.Background(), events.KinesisEvent{Records: []events.KinesisEventRecord{rec(seq)}})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("delivery %d: %+v, %v; want no checkpoint", i, resp, err)
			}
		}
		if got := r.srv.Started(); got != 1 {
			t.Errorf("executions started = %d, want 1", got)
		}
	})
	t.Run("dynamodb", func(t *testing.T) {
		r := newRig(t)
		rec := events.DynamoDBEventRecord{EventID: "e-1", EventName: "INSERT", EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/x",
			Change: events.DynamoDBStreamRecord{SequenceNumber: "100", Keys: map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("o-1")},
				NewImage: map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("o-1"), "amount": events.NewNumberAttribute("10")}}}
		for i := range 2 {
			h, err := durable.DynamoDBStream(newSandbox(t).runner, "fulfil", idemlambda.DynamoDBKeyFromItemKeys(), r.d)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := h(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("delivery %d: %+v, %v; want no checkpoint", i, resp, err)
			}
		}
		if got := r.srv.Started(); got != 1 {
			t.Errorf("executions started = %d, want 1", got)
		}
	})
}

// placed is an EventBridge event that a rule sends straight to the
// dispatcher.
type placed struct {
	ID     string `json:"id"`
	Detail struct {
		OrderID string `json:"order_id"`
	} `json:"detail"`
}

// Typed (an EventBridge rule, a direct invocation): the event's key names
// the execution; a second invocation with the event answers the same one.
func TestTyped(t *testing.T) {
	r := newRig(t)
	key := func(ev placed) (string, error) { return idemlambda.EventKey(ev.Detail.OrderID, "fulfil") }
	var ev placed
	ev.ID, ev.Detail.OrderID = "eb-1", "o-3"
	var arns []string
	for i := range 2 {
		h, err := durable.Typed(newSandbox(t).runner, key, r.d)
		if err != nil {
			t.Fatal(err)
		}
		s, err := h(context.Background(), ev)
		if err != nil {
			t.Fatalf("invocation %d: %v", i, err)
		}
		k, _ := key(ev)
		if s.ExecutionName != durable.ExecutionName(k) || s.ExecutionARN == "" {
			t.Errorf("invocation %d: %+v, want the name %s and an ARN", i, s, durable.ExecutionName(k))
		}
		arns = append(arns, s.ExecutionARN)
	}
	if arns[0] != arns[1] || r.srv.Started() != 1 {
		t.Errorf("ARNs %v and %d executions started, want one", arns, r.srv.Started())
	}
}

// What the durable function receives fingerprints as the runner
// fingerprinted the event: Lambda's "same payload" is idem's.
func TestPayloadIsFingerprinted(t *testing.T) {
	for _, body := range []string{
		order("o-1", 10),
		"{\n  \"order_id\": \"o-1\",\n  \"n\": 1.50, \"z\": [true, null]\n}",
		"order o-1 placed",
		"",
		`{"order_id":"o-1","dup":1,"dup":2}`,
		"order o-1 \xff\xfe",
	} {
		t.Run(fmt.Sprintf("%.20q", body), func(t *testing.T) {
			r := newRig(t)
			s := newSandbox(t)
			src := idemlambda.KeyFromFunc("fixed", func(events.SQSMessage) (string, error) { return "o-1", nil })
			h, err := durable.SQS(s.runner, "fulfil", src, r.d)
			if err != nil {
				t.Fatal(err)
			}
			msg := batch("", body).Records[0]
			if resp, _ := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}}); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("reported %v", resp.BatchItemFailures)
			}
			key, err := idemlambda.SQSKey(src, "fulfil", msg)
			if err != nil {
				t.Fatal(err)
			}
			sent, ok := r.srv.Payload(durable.ExecutionName(key))
			if !ok || !json.Valid(sent) {
				t.Fatalf("payload %q (found %v), want JSON", sent, ok)
			}
			rec, err := s.store.Get(context.Background(), key, fixedNow)
			if err != nil {
				t.Fatal(err)
			}
			if fp, err := core.Fingerprint(sent); err != nil || fp != rec.Fingerprint {
				t.Errorf("fingerprint of what Lambda received = %s (%v), the runner's %s", fp, err, rec.Fingerprint)
			}
		})
	}
}

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestExecutionName(t *testing.T) {
	k1, _ := idemlambda.EventKey("o-1", "fulfil")
	k2, _ := idemlambda.EventKey("o-1", "refund")
	for _, c := range []struct{ name, key string }{
		{"event key", k1}, {"another action", k2}, {"verbatim key", "evt:o-1:fulfil"}, {"empty", ""},
		{"longest key", string(make([]byte, 128))},
	} {
		n := durable.ExecutionName(c.key)
		if !namePattern.MatchString(n) || len(n) != 48 || n != durable.ExecutionName(c.key) {
			t.Errorf("%s: ExecutionName = %q, want 48 characters of [a-zA-Z0-9_-], the same every time", c.name, n)
		}
	}
	if durable.ExecutionName(k1) == durable.ExecutionName(k2) {
		t.Error("two actions on one event share an execution name")
	}
	seen := map[string]string{}
	for i := range 200_000 {
		k := fmt.Sprintf("evt:%d:fulfil", i)
		n := durable.ExecutionName(k)
		if prev, ok := seen[n]; ok {
			t.Fatalf("keys %q and %q share the name %s", prev, k, n)
		}
		seen[n] = k
	}
}

// FuzzExecutionName: any key gives a name Lambda accepts, the same each
// time; distinct keys give distinct names.
func FuzzExecutionName(f *testing.F) {
	f.Add("evt:o-1:fulfil", "evt:o-2:fulfil")
	f.Add("sha256:00", "sha256:01")
	f.Add("", "\x00")
	f.Fuzz(func(t *testing.T, a, b string) {
		na, nb := durable.ExecutionName(a), durable.ExecutionName(b)
		if !namePattern.MatchString(na) || !namePattern.MatchString(nb) {
			t.Fatalf("names %q, %q: want 1 to 64 characters of [a-zA-Z0-9_-]", na, nb)
		}
		if na != durable.ExecutionName(a) {
			t.Fatalf("ExecutionName(%q) changed", a)
		}
		if (a == b) != (na == nb) {
			t.Fatalf("keys %q, %q: names %s, %s", a, b, na, nb)
		}
	})
}

func TestNew(t *testing.T) {
	r := newRig(t)
	for _, c := range []struct {
		name, arn string
		ok        bool
	}{
		{"alias", fulfilARN, true},
		{"version", "arn:aws:lambda:eu-west-1:123456789012:function:fulfil:7", true},
		{"$LATEST", "arn:aws:lambda:eu-west-1:123456789012:function:fulfil:$LATEST", true},
		{"other partition", "arn:aws-cn:lambda:cn-north-1:123456789012:function:fulfil:live", true},
		{"unqualified", "arn:aws:lambda:eu-west-1:123456789012:function:fulfil", false},
		{"name only", "fulfil:live", false},
		{"empty", "", false},
	} {
		d, err := durable.New(lambdaClient(r), c.arn)
		if (err == nil) != c.ok || (err == nil && d.FunctionARN() != c.arn) {
			t.Errorf("%s: New(%q) = %v, %v; want ok %v", c.name, c.arn, d, err, c.ok)
		}
	}
	if _, err := durable.New(nil, fulfilARN); err == nil {
		t.Error("New(nil client): no error")
	}
	if _, err := durable.SQS(newSandbox(t).runner, "fulfil", idemlambda.KeyFromMessageID(), nil); err == nil {
		t.Error("SQS(nil dispatcher): no error")
	}
	for _, c := range []struct {
		name string
		opt  durable.Option
		ok   bool
	}{
		{"forwarded headers", durable.WithForwardedHeaders("X-GitHub-Event", "x-shopify-topic"), true},
		{"no forwarded header", durable.WithForwardedHeaders(), true},
		{"a header name with a colon", durable.WithForwardedHeaders("X-GitHub-Event:"), false},
		{"an empty header name", durable.WithForwardedHeaders(""), false},
		{"nil", nil, false},
	} {
		if _, err := durable.New(lambdaClient(r), fulfilARN, c.opt); (err == nil) != c.ok {
			t.Errorf("%s: New = %v, want ok %v", c.name, err, c.ok)
		}
	}
	runner := newSandbox(t).runner
	for name, build := range map[string]func() error{
		"HTTPAPI":     func() error { _, err := durable.HTTPAPI(runner, nil); return err },
		"RESTAPI":     func() error { _, err := durable.RESTAPI(runner, nil); return err },
		"FunctionURL": func() error { _, err := durable.FunctionURL(runner, nil); return err },
		"ALB":         func() error { _, err := durable.ALB(runner, nil); return err },
	} {
		if build() == nil {
			t.Errorf("%s(nil dispatcher): no error", name)
		}
	}
	if _, err := durable.HTTPAPI(runner, r.d, idemlambda.WithWebhook(webhook.GitHub("s"))); err == nil {
		t.Error("HTTPAPI with a webhook and no endpoint: no error")
	}
}
