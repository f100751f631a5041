package esm

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// The response rules of ReportBatchItemFailures, as Lambda documents them.
func TestReported(t *testing.T) {
	t.Parallel()
	ids := []string{"m-1", "m-2", "m-3"}
	tests := []struct {
		name    string
		resp    string
		report  bool
		want    []string
		invalid bool
	}{
		{name: "empty payload", resp: "", report: true},
		{name: "null response", resp: "null", report: true},
		{name: "empty response", resp: "{}", report: true},
		{name: "null list", resp: `{"batchItemFailures":null}`, report: true},
		{name: "empty list", resp: `{"batchItemFailures":[]}`, report: true},
		{name: "two reported", resp: `{"batchItemFailures":[{"itemIdentifier":"m-3"},{"itemIdentifier":"m-1"}]}`, report: true, want: []string{"m-3", "m-1"}},
		{name: "unknown id", resp: `{"batchItemFailures":[{"itemIdentifier":"m-9"}]}`, report: true, invalid: true},
		{name: "empty id", resp: `{"batchItemFailures":[{"itemIdentifier":""}]}`, report: true, invalid: true},
		{name: "null id", resp: `{"batchItemFailures":[{"itemIdentifier":null}]}`, report: true, invalid: true},
		{name: "bad key name", resp: `{"batchItemFailures":[{"itemIdentifer":"m-1"}]}`, report: true, invalid: true},
		{name: "not JSON", resp: `Task done`, report: true, invalid: true},
		{name: "a string", resp: `"m-1"`, report: true, invalid: true},
		{name: "without the response type, failures are ignored", resp: `{"batchItemFailures":[{"itemIdentifier":"m-1"}]}`},
		{name: "without the response type, any payload succeeds", resp: `not JSON`},
	}
	for _, tt := range tests {
		got, err := reported([]byte(tt.resp), ids, tt.report)
		if tt.invalid {
			if !errors.Is(err, ErrInvalidResponse) {
				t.Errorf("%s: err = %v, want ErrInvalidResponse", tt.name, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: reported = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

// The emulator's answers, as measured against aws-lambda-rie.
func TestRemoteAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		body    string
		wantErr error
	}{
		{name: "response", status: 200, body: `{"batchItemFailures":[]}`},
		{name: "returned error", status: 200, body: `{"errorMessage":"boom","errorType":"errorString"}`, wantErr: ErrFunctionError},
		{name: "timeout", status: 200, body: `Task timed out after 2.00 seconds`, wantErr: ErrTimeout},
		{name: "panic", status: 502, body: `{"errorMessage":"aaa","errorType":"string","stackTrace":[]}`, wantErr: ErrFunctionError},
		{name: "exit", status: 502, body: `{"errorType":"Runtime.ExitError","errorMessage":"exit status 3"}`, wantErr: ErrFunctionError},
		{name: "payload that is not JSON is passed on", status: 200, body: `ok`},
	}
	for _, tt := range tests {
		got, err := remoteAnswer(tt.status, []byte(tt.body))
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("%s: err = %v, want %v", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil || string(got) != tt.body {
			t.Errorf("%s: remoteAnswer = %q, %v; want the body", tt.name, got, err)
		}
	}
}

type fakeInvoker struct {
	status   int
	body     string
	deadline time.Time
}

func (f *fakeInvoker) Invoke(ctx context.Context, event []byte) (int, []byte, error) {
	f.deadline, _ = ctx.Deadline()
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	return f.status, []byte(f.body), nil
}

// Remote waits past the invocation's deadline, and past a cancellation: the emulator answers
// its own timeout, and an abandoned invoke would overlap the next one.
func TestRemoteWaitsForTheEmulator(t *testing.T) {
	t.Parallel()
	inv := &fakeInvoker{status: 200, body: "Task timed out after 1.00 seconds"}
	deadline := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	cancel() // cancelled: the invoke still waits, up to the deadline plus the grace
	_, err := Remote(inv)(ctx, []byte(`{}`))
	if !errors.Is(err, ErrTimeout) {
		t.Errorf("err = %v, want ErrTimeout (the emulator's answer)", err)
	}
	if want := deadline.Add(RemoteGrace); !inv.deadline.Equal(want) {
		t.Errorf("invoke deadline = %v, want %v", inv.deadline, want)
	}
}

func TestHandler(t *testing.T) {
	t.Parallel()
	event := []byte(`{"Records":[{"messageId":"m-1","body":"b"}]}`)
	block := make(chan struct{})
	defer close(block)
	tests := []struct {
		name    string
		h       func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
		expired bool
		want    string
		wantErr error
	}{
		{name: "response", want: `{"batchItemFailures":[{"itemIdentifier":"m-1"}]}`,
			h: func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
				return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: ev.Records[0].MessageId}}}, nil
			}},
		{name: "returned error", wantErr: ErrFunctionError,
			h: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				return events.SQSEventResponse{}, errors.New("boom")
			}},
		{name: "panic", wantErr: ErrFunctionError,
			h: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) { panic("boom") }},
		{name: "deadline passed before it returned", expired: true, wantErr: ErrTimeout,
			h: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				<-block
				return events.SQSEventResponse{}, nil
			}},
	}
	for _, tt := range tests {
		ctx := context.Background()
		if tt.expired {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, time.Unix(0, 0))
			defer cancel()
		}
		got, err := Handler(tt.h)(ctx, event)
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("%s: err = %v, want %v", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: Handler = %s, %v; want %s", tt.name, got, err, tt.want)
		}
	}
}

func TestRegionOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, arn, want string
	}{
		{name: "queue", arn: "arn:aws:sqs:eu-west-1:123456789012:orders", want: "eu-west-1"},
		{name: "fifo queue", arn: "arn:aws:sqs:us-east-1:123456789012:orders.fifo", want: "us-east-1"},
		{name: "another service", arn: "arn:aws:sns:us-east-1:123456789012:orders"},
		{name: "no region", arn: "arn:aws:sqs::123456789012:orders"},
		{name: "not an ARN", arn: "orders"},
	}
	for _, tt := range tests {
		got, err := regionOf(tt.arn)
		if tt.want == "" {
			if err == nil {
				t.Errorf("%s: regionOf(%q) = %q, want an error", tt.name, tt.arn, got)
			}
			continue
		}
		if got != tt.want || err != nil {
			t.Errorf("%s: regionOf(%q) = %q, %v; want %q", tt.name, tt.arn, got, err, tt.want)
		}
	}
}

// The event's JSON has Lambda's field names and shapes, and aws-lambda-go decodes it.
func TestEventShape(t *testing.T) {
	t.Parallel()
	msgs := []types.Message{
		{
			MessageId: aws.String("m-1"), ReceiptHandle: aws.String("rh-1"), Body: aws.String(`{"a":1}`),
			MD5OfBody: aws.String("md5-1"), MD5OfMessageAttributes: aws.String("md5a-1"),
			Attributes: map[string]string{"ApproximateReceiveCount": "2", "MessageGroupId": "g"},
			MessageAttributes: map[string]types.MessageAttributeValue{
				"EventId": {DataType: aws.String("String"), StringValue: aws.String("e-1")},
				"Blob":    {DataType: aws.String("Binary"), BinaryValue: []byte{1, 2}},
			},
		},
		{MessageId: aws.String("m-2"), ReceiptHandle: aws.String("rh-2"), Body: aws.String("x"), MD5OfBody: aws.String("md5-2")},
	}
	raw, err := json.Marshal(newEvent(msgs, "arn:aws:sqs:eu-west-1:123456789012:q", "eu-west-1"))
	if err != nil {
		t.Fatal(err)
	}
	var generic struct {
		Records []map[string]any
	}
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	attr := generic.Records[0]["messageAttributes"].(map[string]any)["EventId"].(map[string]any)
	if l, ok := attr["stringListValues"].([]any); !ok || len(l) != 0 {
		t.Errorf("stringListValues = %#v, want [] (as Lambda sends)", attr["stringListValues"])
	}
	if _, ok := generic.Records[1]["md5OfMessageAttributes"]; ok {
		t.Errorf("a message without attributes has md5OfMessageAttributes: %s", raw)
	}
	if m, ok := generic.Records[1]["messageAttributes"].(map[string]any); !ok || len(m) != 0 {
		t.Errorf("messageAttributes of a message without any = %#v, want {}", generic.Records[1]["messageAttributes"])
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	r := ev.Records[0]
	if r.MessageId != "m-1" || r.ReceiptHandle != "rh-1" || r.Body != `{"a":1}` || r.Md5OfBody != "md5-1" ||
		r.Md5OfMessageAttributes != "md5a-1" || r.EventSource != "aws:sqs" ||
		r.EventSourceARN != "arn:aws:sqs:eu-west-1:123456789012:q" || r.AWSRegion != "eu-west-1" ||
		r.Attributes["ApproximateReceiveCount"] != "2" || r.Attributes["MessageGroupId"] != "g" ||
		*r.MessageAttributes["EventId"].StringValue != "e-1" || r.MessageAttributes["EventId"].DataType != "String" ||
		string(r.MessageAttributes["Blob"].BinaryValue) != "\x01\x02" {
		t.Errorf("decoded record = %+v\nfrom %s", r, raw)
	}
}
