package dlq_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/idemgo/idem/internal/dlq"
	"github.com/idemgo/idem/internal/esm"
)

// sqsClient returns a client of the SQS-API server at $AWS_ENDPOINT_URL_SQS, which
// internal/cmd/testenv sets (-sqs moto), or skips the test when IDEM_SKIP_INTEGRATION=1.
func sqsClient(t *testing.T) *sqs.Client {
	t.Helper()
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1")
	}
	endpoint := os.Getenv("AWS_ENDPOINT_URL_SQS")
	if endpoint == "" {
		t.Fatal("no SQS endpoint: run `go run ./internal/cmd/testenv -sqs moto -- go test ./internal/dlq`, " +
			"or set IDEM_SKIP_INTEGRATION=1 to skip the integration tests")
	}
	return sqs.New(sqs.Options{
		Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), BaseEndpoint: aws.String(endpoint),
	})
}

var queueSeq atomic.Int64

// queues creates a fresh queue and dead-letter queue.
func queues(t *testing.T, c *sqs.Client, fifo bool) esm.Queues {
	t.Helper()
	name := fmt.Sprintf("dlq-%d-%d", os.Getpid(), queueSeq.Add(1))
	q, err := esm.CreateQueues(t.Context(), c, name, esm.QueueConfig{VisibilityTimeout: 30 * time.Second, MaxReceiveCount: 2, FIFO: fifo})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// held returns the messages the queue at url holds, visible and in flight.
func held(t *testing.T, c *sqs.Client, url string) (visible, inFlight int) {
	t.Helper()
	visible, inFlight, err := dlq.Depth(t.Context(), c, url)
	if err != nil {
		t.Fatal(err)
	}
	return visible, inFlight
}

var attrs = map[string]types.MessageAttributeValue{"EventId": {DataType: aws.String("String"), StringValue: aws.String("evt_9")}}

// Peek leaves the messages visible; ReceiveAnswer writes them as the AWS CLI prints them,
// which decodes as the idem command reads --sqs-event.
func TestPeekAndReceiveAnswer(t *testing.T) {
	t.Parallel()
	c := sqsClient(t)
	q := queues(t, c, false)
	if _, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{
		QueueUrl: aws.String(q.DLQURL), MessageBody: aws.String(`{"event_id":"evt_9"}`), MessageAttributes: attrs,
	}); err != nil {
		t.Fatal(err)
	}
	msgs, err := dlq.Peek(t.Context(), c, q.DLQURL, dlq.MaxPeek)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("Peek = %d messages, %v; want 1", len(msgs), err)
	}
	if visible, inFlight := held(t, c, q.DLQURL); visible != 1 || inFlight != 0 {
		t.Errorf("after Peek: %d visible, %d in flight; want the message visible", visible, inFlight)
	}
	data, err := dlq.ReceiveAnswer(msgs)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Messages []events.SQSMessage // as cmd/idem decodes it
	}
	if err := json.Unmarshal(data, &doc); err != nil || len(doc.Messages) != 1 {
		t.Fatalf("ReceiveAnswer = %s (%v)", data, err)
	}
	m := doc.Messages[0]
	if m.MessageId != aws.ToString(msgs[0].MessageId) || m.Body != `{"event_id":"evt_9"}` || m.Attributes["ApproximateReceiveCount"] != "1" ||
		aws.ToString(m.MessageAttributes["EventId"].StringValue) != "evt_9" {
		t.Errorf("decoded %+v from\n%s", m, data)
	}
	for _, field := range []string{`"MessageId"`, `"ReceiptHandle"`, `"MD5OfBody"`, `"Body"`, `"Attributes"`, `"MD5OfMessageAttributes"`, `"StringValue"`, `"DataType"`} {
		if !strings.Contains(string(data), field) {
			t.Errorf("ReceiveAnswer lacks the CLI's field %s:\n%s", field, data)
		}
	}
}

func TestPeekRefusesBadCounts(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, -1, dlq.MaxPeek + 1} {
		if _, err := dlq.Peek(t.Context(), nil, "http://127.0.0.1:1/q", n); err == nil {
			t.Errorf("Peek of %d messages: no error", n)
		}
	}
}

// Redrive moves every message, with its attributes (and a FIFO queue's group id), to the
// source queue as a new message, and leaves the dead-letter queue empty.
func TestRedrive(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			t.Parallel()
			c := sqsClient(t)
			q := queues(t, c, fifo)
			sent := map[string]bool{}
			for i := range 12 { // more than one receive's worth
				body := fmt.Sprintf(`{"event_id":"evt_%d"}`, i)
				in := &sqs.SendMessageInput{QueueUrl: aws.String(q.DLQURL), MessageBody: aws.String(body), MessageAttributes: attrs}
				if fifo {
					in.MessageGroupId = aws.String("group-" + strconv.Itoa(i%3))
				}
				if _, err := c.SendMessage(t.Context(), in); err != nil {
					t.Fatal(err)
				}
				sent[body] = true
			}
			n, err := dlq.Redrive(t.Context(), c, q.DLQURL, q.URL)
			if err != nil || n != len(sent) {
				t.Fatalf("Redrive = %d, %v; want %d moved", n, err, len(sent))
			}
			if visible, inFlight := held(t, c, q.DLQURL); visible+inFlight != 0 {
				t.Errorf("the dead-letter queue still holds %d messages", visible+inFlight)
			}
			got := receiveAll(t, c, q.URL)
			for _, m := range got {
				if !sent[aws.ToString(m.Body)] || aws.ToString(m.MessageAttributes["EventId"].StringValue) != "evt_9" ||
					m.Attributes["ApproximateReceiveCount"] != "1" {
					t.Errorf("redriven message %s: body %s, attributes %v, receive count %s", aws.ToString(m.MessageId),
						aws.ToString(m.Body), m.MessageAttributes, m.Attributes["ApproximateReceiveCount"])
				}
				if _, ok := m.Attributes["MessageGroupId"]; ok != fifo {
					t.Errorf("redriven message %s: MessageGroupId present %v, want %v", aws.ToString(m.MessageId), ok, fifo)
				}
			}
			if len(got) != len(sent) {
				t.Errorf("the source queue holds %d messages, want %d", len(got), len(sent))
			}
		})
	}
}

// receiveAll receives, and deletes, every message of the queue at url.
func receiveAll(t *testing.T, c *sqs.Client, url string) []types.Message {
	t.Helper()
	var all []types.Message
	for {
		out, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return all
		}
		all = append(all, out.Messages...)
		for _, m := range out.Messages { // a FIFO queue returns no more of a group while one is in flight
			if _, err := c.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestSourceQueue(t *testing.T) {
	t.Parallel()
	c := sqsClient(t)
	q := queues(t, c, false)
	got, err := dlq.SourceQueue(t.Context(), c, q.DLQURL)
	if err != nil || got != q.URL {
		t.Errorf("SourceQueue(dead-letter queue) = %q, %v; want %q", got, err, q.URL)
	}
	if got, err := dlq.SourceQueue(t.Context(), c, q.URL); !errors.Is(err, dlq.ErrNoSingleSource) {
		t.Errorf("SourceQueue(a queue nothing sends to) = %q, %v; want ErrNoSingleSource", got, err)
	}
}
