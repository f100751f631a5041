package esm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/idemgo/idem/internal/devserver"
	"github.com/idemgo/idem/internal/dlq"
	"github.com/idemgo/idem/internal/esm"
)

// The SQS-API server of the integration tests: $AWS_ENDPOINT_URL_SQS when set (testenv -sqs
// moto sets it), otherwise a moto server started on first use and stopped after the tests.
var (
	motoOnce sync.Once
	motoSrv  *devserver.Server
	endpoint string
	motoErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if motoSrv != nil {
		motoSrv.Stop()
	}
	os.Exit(code)
}

// sqsClient returns a client of the test server, or skips the test when
// IDEM_SKIP_INTEGRATION=1.
func sqsClient(t *testing.T) *sqs.Client {
	t.Helper()
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1")
	}
	motoOnce.Do(func() {
		if endpoint = os.Getenv("AWS_ENDPOINT_URL_SQS"); endpoint != "" {
			return
		}
		root, err := devserver.RepoRoot()
		if err != nil {
			motoErr = err
			return
		}
		if motoSrv, motoErr = devserver.StartMoto(context.Background(), root); motoErr == nil {
			endpoint = motoSrv.Endpoint
		}
	})
	if motoErr != nil {
		if errors.Is(motoErr, devserver.ErrNotInstalled) {
			t.Fatalf("%v: run `make deps` (or set AWS_ENDPOINT_URL_SQS, or IDEM_SKIP_INTEGRATION=1 to skip)", motoErr)
		}
		t.Fatal(motoErr)
	}
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(endpoint),
	})
}

var queueSeq struct {
	sync.Mutex
	n int
}

// queues creates a fresh queue and dead-letter queue for the test.
func queues(t *testing.T, c *sqs.Client, cfg esm.QueueConfig) esm.Queues {
	t.Helper()
	queueSeq.Lock()
	queueSeq.n++
	n := queueSeq.n
	queueSeq.Unlock()
	name := fmt.Sprintf("esm-%d-%d-%s", os.Getpid(), n, strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 60 {
		name = name[:60]
	}
	q, err := esm.CreateQueues(t.Context(), c, name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func send(t *testing.T, c *sqs.Client, url, body string) string {
	t.Helper()
	out, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.MessageId)
}

// counts returns the queue's visible and in-flight message counts.
func counts(t *testing.T, c *sqs.Client, url string) (visible, inFlight int) {
	t.Helper()
	visible, inFlight, err := dlq.Depth(t.Context(), c, url)
	if err != nil {
		t.Fatal(err)
	}
	return visible, inFlight
}

// pollUntil polls until done reports true for a batch, at most n polls, and returns the
// non-empty batches seen. Each poll waits up to the poller's wait time for messages:
// the loop waits for events, bounded, not for time to pass.
func pollUntil(t *testing.T, p *esm.Poller, n int, done func(esm.Batch) bool) []esm.Batch {
	t.Helper()
	var seen []esm.Batch
	for range n {
		b, err := p.PollOnce(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Messages) > 0 {
			seen = append(seen, b)
		}
		if done(b) {
			return seen
		}
	}
	t.Fatalf("condition not reached after %d polls; batches: %+v", n, seen)
	return nil
}

// testEnd is closed shortly before the test's deadline (go test -timeout), so that a wait
// for an event that never comes fails with a message rather than a panic; it asserts
// nothing about time.
func testEnd(t *testing.T) <-chan time.Time {
	d, ok := t.Deadline()
	if !ok {
		return nil
	}
	return time.After(time.Until(d) - 10*time.Second)
}

// since returns the time since start, rounded for messages.
func since(start time.Time) time.Duration { return time.Since(start).Round(10 * time.Millisecond) }
