package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/idemgo/idem/internal/dlq"
	"github.com/idemgo/idem/internal/esm"
)

// sqsFixture is a queue and its dead-letter queue on the SQS-API server at
// $AWS_ENDPOINT_URL_SQS (internal/cmd/testenv -sqs moto sets it).
func sqsFixture(t *testing.T) (*sqs.Client, esm.Queues) {
	t.Helper()
	return sqsFixtureWith(t, esm.QueueConfig{VisibilityTimeout: 30 * time.Second, MaxReceiveCount: 2})
}

// sqsFixtureWith is sqsFixture with the queues' configuration.
func sqsFixtureWith(t *testing.T, qc esm.QueueConfig) (*sqs.Client, esm.Queues) {
	t.Helper()
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1: SQS integration test skipped")
	}
	if os.Getenv("AWS_ENDPOINT_URL_SQS") == "" {
		t.Fatal("no SQS endpoint: run `go run ./internal/cmd/testenv -server dynalite -sqs moto -- go test ./cmd/idem/...`, " +
			"or set IDEM_SKIP_INTEGRATION=1 to skip the integration tests")
	}
	cfg, err := config.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c := sqs.NewFromConfig(cfg)
	q, err := esm.CreateQueues(t.Context(), c, tableName(), qc)
	if err != nil {
		t.Fatal(err)
	}
	return c, q
}

func queueHolds(t *testing.T, c *sqs.Client, url string) (visible, inFlight int) {
	t.Helper()
	visible, inFlight, err := dlq.Depth(t.Context(), c, url)
	if err != nil {
		t.Fatal(err)
	}
	return visible, inFlight
}

// A message in the dead-letter queue: peek shows it and leaves it there, in the form
// inspect reads; redrive (to the queue whose redrive policy names the dead-letter queue)
// moves it back.
func TestDLQ(t *testing.T) {
	t.Parallel()
	c, q := sqsFixture(t)
	body := `{"event_id":"evt_dlq_1","fail":"poison"}`
	if _, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(q.DLQURL), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
	r := mustCmd(t, exitOK, t0, nil, "dlq", "peek", "--queue-url", q.DLQURL)
	msgs, err := readSQSMessages(writeFile(t, "dlq.json", r.stdout)) // as inspect --sqs-event reads it
	if err != nil || len(msgs) != 1 || msgs[0].Body != body {
		t.Fatalf("peek printed %d messages (%v):\n%s", len(msgs), err, r.stdout)
	}
	if !strings.Contains(r.stderr, "1 message of "+q.DLQURL+", left in the queue") {
		t.Errorf("peek stderr: %q", r.stderr)
	}
	if visible, inFlight := queueHolds(t, c, q.DLQURL); visible != 1 || inFlight != 0 {
		t.Errorf("after peek: %d visible, %d in flight; want the message left visible", visible, inFlight)
	}

	r = mustCmd(t, exitOK, t0, nil, "dlq", "redrive", "--queue-url", q.DLQURL, "--no-release")
	if want := fmt.Sprintf("moved 1 message from %s to %s (released 0 records first); left 0 in %s\n", q.DLQURL, q.URL, q.DLQURL); !strings.HasSuffix(r.stdout, want) {
		t.Errorf("redrive printed %q, want %q", r.stdout, want)
	}
	if visible, inFlight := queueHolds(t, c, q.DLQURL); visible+inFlight != 0 {
		t.Errorf("after redrive the dead-letter queue holds %d messages", visible+inFlight)
	}
	if visible, _ := queueHolds(t, c, q.URL); visible != 1 {
		t.Errorf("after redrive the queue holds %d visible messages, want 1", visible)
	}
	v := decodeJSON[redriveView](t, mustCmd(t, exitOK, t0, nil, "dlq", "redrive", "--queue-url", q.DLQURL, "--to", q.URL, "--no-release", "--json").stdout)
	if v.Moved != 0 || v.Received != 0 || v.From != q.DLQURL || v.To != q.URL {
		t.Errorf("second redrive = %+v, want nothing moved", v)
	}
	r = mustCmd(t, exitOK, t0, nil, "dlq", "peek", "--queue-url", q.DLQURL)
	if !strings.Contains(r.stderr, "no visible message in "+q.DLQURL) {
		t.Errorf("peek of an empty queue: stderr %q", r.stderr)
	}
	// The queue itself is nobody's dead-letter queue: redrive needs --to.
	r = mustCmd(t, exitUsage, t0, nil, "dlq", "redrive", "--queue-url", q.URL, "--no-release")
	if !strings.Contains(r.stderr, "pass --to with the queue to move the messages to") {
		t.Errorf("redrive of a queue with no source: stderr %q", r.stderr)
	}
}

func TestDLQUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"dlq"}, "idem dlq needs a command: peek or redrive"},
		{"unknown subcommand", []string{"dlq", "purge"}, `unknown dlq command "purge"`},
		{"no queue", []string{"dlq", "peek"}, "no queue: pass --queue-url"},
		{"bad max", []string{"dlq", "peek", "--queue-url", "http://127.0.0.1:1/q", "--max", "11"}, "--max 11: want 1 to 10"},
		{"positional", []string{"dlq", "redrive", "--queue-url", "http://127.0.0.1:1/q", "extra"}, `unexpected argument "extra"`},
		{"redrive without a table", []string{"dlq", "redrive", "--queue-url", "http://127.0.0.1:1/q", "--table=", "--key-source", "body:id", "--action", "a"}, "pass --table (or set IDEM_TABLE)"},
		{"redrive without keys", []string{"dlq", "redrive", "--queue-url", "http://127.0.0.1:1/q", "--table", "t1x"}, "or --no-release to move the messages only"},
		{"redrive of an HTTP configuration", []string{"dlq", "redrive", "--queue-url", "http://127.0.0.1:1/q", "--table", "t1x", "--key-source", "header:X-Id", "--action", "a"}, "must be an SQS wrapper's"},
		{"no-release with keys", []string{"dlq", "redrive", "--queue-url", "http://127.0.0.1:1/q", "--no-release", "--action", "a"}, "takes no key configuration"},
		{"bad rate", []string{"dlq", "redrive", "--queue-url", "http://127.0.0.1:1/q", "--no-release", "--rate", "-1"}, "--rate, --max and --max-attempts want 0 or more"},
	}
	for _, tc := range tests {
		r := cmd(t, t0, nil, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant exit %d and %q", tc.name, r.code, r.stderr, exitUsage, tc.want)
		}
	}
}

// closedPort returns a port on 127.0.0.1 that nothing listens on (it did a moment ago).
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// A refused connection is an endpoint to check, named with its address, not an outage to
// wait out; for DynamoDB and for SQS.
func TestUnreachableEndpoint(t *testing.T) {
	addr := closedPort(t)
	isolateAWS(t)
	for k, v := range map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_MAX_ATTEMPTS": "1"} {
		t.Setenv(k, v)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"dynamodb", []string{"stats", "--table", "orders-idem", "--endpoint-url", "http://" + addr},
			"idem: cannot reach DynamoDB at " + addr + " (connect: connection refused): check the endpoint (--endpoint-url, AWS_ENDPOINT_URL_DYNAMODB or AWS_ENDPOINT_URL) and --region"},
		{"sqs", []string{"dlq", "peek", "--queue-url", "http://" + addr + "/000000000000/q-dlq", "--endpoint-url", "http://" + addr},
			"idem: cannot reach SQS at " + addr + " (connect: connection refused): check the endpoint (--endpoint-url, AWS_ENDPOINT_URL_SQS or AWS_ENDPOINT_URL) and --region"},
	}
	for _, tc := range tests {
		r := cmd(t, t0, nil, tc.args...)
		if r.code != exitConfig || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant exit %d and %q", tc.name, r.code, r.stderr, exitConfig, tc.want)
		}
	}
}
