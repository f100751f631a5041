package esm_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/idemgo/idem/internal/dlq"
	"github.com/idemgo/idem/internal/esm"
)

// recorder is an in-process function that records the events it gets and reports the
// messages its fail function picks.
type recorder struct {
	mu     sync.Mutex
	events []events.SQSEvent
	raw    [][]byte
	fail   func(events.SQSMessage) bool
}

func (r *recorder) function() esm.Function {
	handler := esm.Handler(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, ev)
		var resp events.SQSEventResponse
		for _, m := range ev.Records {
			if r.fail != nil && r.fail(m) {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
			}
		}
		return resp, nil
	})
	return func(ctx context.Context, event []byte) ([]byte, error) {
		r.mu.Lock()
		r.raw = append(r.raw, event)
		r.mu.Unlock()
		return handler(ctx, event)
	}
}

// receiveCounts returns the ApproximateReceiveCount of every delivery of message id.
func (r *recorder) receiveCounts(id string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.events {
		for _, m := range ev.Records {
			if m.MessageId == id {
				out = append(out, m.Attributes["ApproximateReceiveCount"])
			}
		}
	}
	return out
}

func newPoller(t *testing.T, c *sqs.Client, url string, fn esm.Function, opts ...esm.Option) *esm.Poller {
	t.Helper()
	p, err := esm.New(t.Context(), c, url, fn, append([]esm.Option{esm.WithReportBatchItemFailures(), esm.WithFunctionTimeout(time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A batch is delivered as Lambda's event, and only the reported message stays in the queue.
func TestPollDeletesAllButReported(t *testing.T) {
	t.Parallel()
	c := sqsClient(t)
	q := queues(t, c, esm.QueueConfig{VisibilityTimeout: 30 * time.Second, MaxReceiveCount: 3})
	ids := []string{send(t, c, q.URL, "one"), send(t, c, q.URL, "two"), send(t, c, q.URL, "three")}
	rec := &recorder{fail: func(m events.SQSMessage) bool { return m.Body == "two" }}
	p := newPoller(t, c, q.URL, rec.function())

	b, err := p.PollOnce(t.Context())
	if err != nil || b.InvokeErr != nil {
		t.Fatalf("PollOnce = %+v, %v", b, err)
	}
	if len(b.Messages) != 3 {
		t.Fatalf("received %d messages, want the 3 sent", len(b.Messages))
	}
	deleted := append([]string(nil), b.Deleted...)
	slices.Sort(deleted)
	want := []string{ids[0], ids[2]}
	slices.Sort(want)
	if !slices.Equal(deleted, want) || !slices.Equal(b.Reported, []string{ids[1]}) {
		t.Errorf("deleted %v, reported %v; want deleted %v, reported [%s]", b.Deleted, b.Reported, want, ids[1])
	}
	if visible, inFlight := counts(t, c, q.URL); visible != 0 || inFlight != 1 {
		t.Errorf("queue: %d visible, %d in flight; want the reported message in flight only", visible, inFlight)
	}
	if p.QueueARN() != q.ARN {
		t.Errorf("QueueARN = %q, want %q", p.QueueARN(), q.ARN)
	}
}

// The event carries what SQS answered: ids, receipt handles, checksums, system and message
// attributes, the queue's ARN and region.
func TestEventFromTheQueue(t *testing.T) {
	t.Parallel()
	c := sqsClient(t)
	q := queues(t, c, esm.QueueConfig{VisibilityTimeout: 30 * time.Second, MaxReceiveCount: 3})
	body := `{"event_id":"evt_1"}`
	out, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{
		QueueUrl: aws.String(q.URL), MessageBody: aws.String(body),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"EventId": {DataType: aws.String("String"), StringValue: aws.String("evt_1")},
			"Tries":   {DataType: aws.String("Number"), StringValue: aws.String("3")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	before := time.Now().UnixMilli()
	if _, err := newPoller(t, c, q.URL, rec.function()).PollOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(rec.events) != 1 || len(rec.events[0].Records) != 1 {
		t.Fatalf("events = %+v, want one with one record", rec.events)
	}
	r := rec.events[0].Records[0]
	sum := md5.Sum([]byte(body))
	if r.MessageId != aws.ToString(out.MessageId) || r.ReceiptHandle == "" || r.Body != body ||
		r.Md5OfBody != hex.EncodeToString(sum[:]) || r.Md5OfMessageAttributes != aws.ToString(out.MD5OfMessageAttributes) ||
		r.EventSource != "aws:sqs" || r.EventSourceARN != q.ARN || r.AWSRegion != "us-east-1" {
		t.Errorf("record = %+v", r)
	}
	for _, name := range []string{"ApproximateReceiveCount", "SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"} {
		if r.Attributes[name] == "" {
			t.Errorf("attribute %s missing: %v", name, r.Attributes)
		}
	}
	if r.Attributes["ApproximateReceiveCount"] != "1" {
		t.Errorf("ApproximateReceiveCount = %q, want 1", r.Attributes["ApproximateReceiveCount"])
	}
	if first, _ := strconv.ParseInt(r.Attributes["ApproximateFirstReceiveTimestamp"], 10, 64); first < before-1000 {
		t.Errorf("ApproximateFirstReceiveTimestamp = %d, before the poll (%d)", first, before)
	}
	if a := r.MessageAttributes["EventId"]; aws.ToString(a.StringValue) != "evt_1" || a.DataType != "String" {
		t.Errorf("message attribute EventId = %+v", a)
	}
	if a := r.MessageAttributes["Tries"]; aws.ToString(a.StringValue) != "3" || a.DataType != "Number" {
		t.Errorf("message attribute Tries = %+v", a)
	}
}

// A FIFO queue's messages carry their group, deduplication id and sequence number.
func TestFIFOAttributes(t *testing.T) {
	t.Parallel()
	c := sqsClient(t)
	q := queues(t, c, esm.QueueConfig{VisibilityTimeout: 30 * time.Second, MaxReceiveCount: 3, FIFO: true})
	_, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{
		QueueUrl: aws.String(q.URL), MessageBody: aws.String("hello"), MessageGroupId: aws.String("customer-7"),
		MessageDeduplicationId: aws.String("dedup-1"),
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	b, err := newPoller(t, c, q.URL, rec.function()).PollOnce(t.Context())
	if err != nil || len(b.Messages) != 1 {
		t.Fatalf("PollOnce = %+v, %v", b, err)
	}
	a := rec.events[0].Records[0].Attributes
	if a["MessageGroupId"] != "customer-7" || a["MessageDeduplicationId"] != "dedup-1" || a["SequenceNumber"] == "" {
		t.Errorf("attributes = %v, want MessageGroupId, MessageDeduplicationId and SequenceNumber", a)
	}
	if b.Messages[0].GroupID != "customer-7" {
		t.Errorf("Batch message GroupID = %q", b.Messages[0].GroupID)
	}
}

// A reported message reappears once the visibility timeout has passed, with its receive
// count raised, and is deleted when it succeeds.
func TestReportedMessageReappearsAfterVisibilityTimeout(t *testing.T) {
	t.Parallel()
	c := sqsClient(t)
	q := queues(t, c, esm.QueueConfig{VisibilityTimeout: time.Second, MaxReceiveCount: 5})
	id := send(t, c, q.URL, "flaky")
	rec := &recorder{fail: func(m events.SQSMessage) bool { return m.Attributes["ApproximateReceiveCount"] == "1" }}
	p := newPoller(t, c, q.URL, rec.function())

	// The first receive happens after start; the redelivery must come at least the
	// visibility timeout later.
	start := time.Now()
	var redeliveredAt time.Time
	pollUntil(t, p, 10, func(b esm.Batch) bool {
		if slices.Contains(b.Deleted, id) {
			redeliveredAt = time.Now()
			return true
		}
		return false
	})
	if got := rec.receiveCounts(id); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("receive counts = %v, want [1 2]", got)
	}
	if d := redeliveredAt.Sub(start); d < time.Second {
		t.Errorf("reported and redelivered within %v, want at least the visibility timeout (1s)", d)
	}
	if visible, inFlight := counts(t, c, q.URL); visible+inFlight != 0 {
		t.Errorf("queue still holds %d messages", visible+inFlight)
	}
	t.Logf("reported, redelivered and deleted in %v", since(start))
}

// A message reported on every receive is moved to the dead-letter queue by the queue's
// redrive policy after maxReceiveCount receives; Redrive brings it back.
func TestRedrivePolicyMovesToDLQ(t *testing.T) {
	t.Parallel()
	c := sqsClient(t)
	q := queues(t, c, esm.QueueConfig{VisibilityTimeout: time.Second, MaxReceiveCount: 2})
	id := send(t, c, q.URL, "poison")
	fixed := false
	rec := &recorder{fail: func(events.SQSMessage) bool { return !fixed }}
	p := newPoller(t, c, q.URL, rec.function())

	start := time.Now()
	pollUntil(t, p, 12, func(esm.Batch) bool {
		visible, _ := counts(t, c, q.DLQURL)
		return visible == 1
	})
	t.Logf("in the dead-letter queue after %v", since(start))
	if got := rec.receiveCounts(id); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("receive counts = %v, want [1 2]: delivered maxReceiveCount times, then moved", got)
	}
	if visible, inFlight := counts(t, c, q.URL); visible+inFlight != 0 {
		t.Errorf("source queue still holds %d messages", visible+inFlight)
	}

	fixed = true
	n, err := dlq.Redrive(t.Context(), c, q.DLQURL, q.URL)
	if err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v; want 1 moved", n, err)
	}
	var redriven string
	pollUntil(t, p, 3, func(b esm.Batch) bool {
		if len(b.Deleted) == 1 {
			redriven = b.Deleted[0]
		}
		return redriven != ""
	})
	if got := rec.receiveCounts(redriven); !slices.Equal(got, []string{"1"}) {
		t.Errorf("receive counts of the redriven message = %v, want [1] (a new message)", got)
	}
	if visible, inFlight := counts(t, c, q.DLQURL); visible+inFlight != 0 {
		t.Errorf("dead-letter queue still holds %d messages", visible+inFlight)
	}
}

// A failed invocation deletes nothing: the whole batch reappears after the visibility
// timeout.
func TestFailedInvocationDeletesNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		fn      esm.Function
		timeout time.Duration
		wantErr error
	}{
		{name: "function error", wantErr: esm.ErrFunctionError,
			fn: esm.Handler(func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				return events.SQSEventResponse{}, errors.New("ledger unavailable")
			})},
		{name: "unknown item identifier", wantErr: esm.ErrInvalidResponse,
			fn: func(context.Context, []byte) ([]byte, error) {
				return []byte(`{"batchItemFailures":[{"itemIdentifier":"not-in-the-batch"}]}`), nil
			}},
		{name: "timeout", wantErr: esm.ErrTimeout,
			fn: esm.Handler(func(ctx context.Context, _ events.SQSEvent) (events.SQSEventResponse, error) {
				<-ctx.Done() // runs past its deadline
				<-t.Context().Done()
				return events.SQSEventResponse{}, nil
			})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := sqsClient(t)
			q := queues(t, c, esm.QueueConfig{VisibilityTimeout: time.Second, MaxReceiveCount: 5})
			idA, idB := send(t, c, q.URL, "a"), send(t, c, q.URL, "b")
			p := newPoller(t, c, q.URL, tt.fn)
			got, err := p.PollOnce(t.Context())
			if err != nil || !errors.Is(got.InvokeErr, tt.wantErr) || len(got.Deleted) != 0 || len(got.Messages) != 2 {
				t.Fatalf("PollOnce = %+v, %v; want both received, none deleted, InvokeErr %v", got, err, tt.wantErr)
			}
			rec := &recorder{}
			again := newPoller(t, c, q.URL, rec.function())
			deleted := 0
			pollUntil(t, again, 6, func(b esm.Batch) bool { deleted += len(b.Deleted); return deleted == 2 })
			if ca, cb := rec.receiveCounts(idA), rec.receiveCounts(idB); !slices.Equal(ca, []string{"2"}) || !slices.Equal(cb, []string{"2"}) {
				t.Errorf("redelivery receive counts = %v, %v; want [2] each", ca, cb)
			}
		})
	}
}

// New refuses a queue whose visibility timeout is shorter than the function's timeout, as
// CreateEventSourceMapping does.
func TestNewRefusesShortVisibilityTimeout(t *testing.T) {
	t.Parallel()
	c := sqsClient(t)
	q := queues(t, c, esm.QueueConfig{VisibilityTimeout: time.Second, MaxReceiveCount: 2})
	_, err := esm.New(t.Context(), c, q.URL, (&recorder{}).function(), esm.WithFunctionTimeout(2*time.Second))
	if !errors.Is(err, esm.ErrVisibilityTimeout) {
		t.Errorf("New = %v, want ErrVisibilityTimeout", err)
	}
	if _, err := esm.New(t.Context(), c, q.URL, (&recorder{}).function(), esm.WithFunctionTimeout(time.Second)); err != nil {
		t.Errorf("New with equal timeouts = %v, want a poller", err)
	}
}

func TestOptionsRefuseBadValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opt  esm.Option
	}{
		{name: "batch size 0", opt: esm.WithBatchSize(0)},
		{name: "batch size 11", opt: esm.WithBatchSize(11)},
		{name: "negative wait", opt: esm.WithWaitTime(-time.Second)},
		{name: "wait above 20s", opt: esm.WithWaitTime(21 * time.Second)},
		{name: "wait in milliseconds", opt: esm.WithWaitTime(1500 * time.Millisecond)},
		{name: "zero timeout", opt: esm.WithFunctionTimeout(0)},
		{name: "nil observer", opt: esm.WithObserver(nil)},
	}
	for _, tt := range tests {
		// The options are checked before the queue is read: no client call is made.
		if _, err := esm.New(t.Context(), &sqs.Client{}, "http://127.0.0.1:1/q", (&recorder{}).function(), tt.opt); err == nil {
			t.Errorf("%s: New accepted it", tt.name)
		}
	}
}

// Run polls until its context is done, reports each batch to the observer, and returns nil.
func TestRun(t *testing.T) {
	t.Parallel()
	c := sqsClient(t)
	q := queues(t, c, esm.QueueConfig{VisibilityTimeout: 30 * time.Second, MaxReceiveCount: 2})
	id := send(t, c, q.URL, "hello")
	deleted := make(chan string, 1)
	p, err := esm.New(t.Context(), c, q.URL, (&recorder{}).function(), esm.WithObserver(func(b esm.Batch) {
		if b.Err != nil {
			t.Errorf("observer got %v", b.Err)
		}
		for _, d := range b.Deleted {
			deleted <- d
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()
	select {
	case got := <-deleted:
		if got != id {
			t.Errorf("deleted %s, want %s", got, id)
		}
	case <-testEnd(t):
		t.Fatal("Run did not consume the message by the test's deadline")
	}
	cancel()
	if err := <-ran; err != nil {
		t.Errorf("Run = %v, want nil once its context is done", err)
	}
}
