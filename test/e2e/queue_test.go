package e2e

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/examples/orders"
	"github.com/idemgo/idem/internal/devserver"
	"github.com/idemgo/idem/internal/dlq"
	"github.com/idemgo/idem/internal/esm"
	idemlambda "github.com/idemgo/idem/lambda"
)

const (
	// queueTimeout is, in the queue tests, the consumer's AWS_LAMBDA_FUNCTION_TIMEOUT and
	// the queue's visibility timeout (Lambda wants the latter at least the former), seconds.
	queueTimeout = 2
	// maxReceiveCount is the queue's redrive policy: receives before the dead-letter queue.
	maxReceiveCount = 2
)

// queued is a stack whose consumer is fed by the event source mapping (internal/esm) from a
// queue and its dead-letter queue on a real SQS API: moto's, at $AWS_ENDPOINT_URL_SQS.
type queued struct {
	*stack
	client  *sqs.Client
	q       esm.Queues
	timeout int // the consumer's timeout and the queue's visibility timeout, seconds
}

func newQueued(t *testing.T) *queued { return newQueuedWith(t, queueTimeout, maxReceiveCount) }

// newQueuedWith is newQueued with another consumer timeout and visibility timeout, and another
// redrive policy.
func newQueuedWith(t *testing.T, timeout, receives int) *queued {
	s := newStack(t)
	if os.Getenv("AWS_ENDPOINT_URL_SQS") == "" {
		t.Fatal("the queue tests need AWS_ENDPOINT_URL_SQS (an SQS-API server): run them with `make test` " +
			"(internal/cmd/testenv -sqs moto sets it), or set IDEM_SKIP_INTEGRATION=1 to skip them")
	}
	cfg, err := config.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	qs := &queued{stack: s, client: sqs.NewFromConfig(cfg), timeout: timeout}
	name := strings.TrimSuffix(s.idemTable, "-idem")
	qs.q, err = esm.CreateQueues(t.Context(), qs.client, name,
		esm.QueueConfig{VisibilityTimeout: time.Duration(timeout) * time.Second, MaxReceiveCount: receives})
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

// consumer starts orders-consumer under its own emulator and returns the event source
// mapping from the queue to it, which invokes it one batch at a time.
func (s *queued) consumer(hooks bool) (*devserver.RIE, *esm.Poller) {
	s.t.Helper()
	fn := s.startWith("orders-consumer", s.timeout, hooks)
	p, err := esm.New(s.t.Context(), s.client, s.q.URL, esm.Remote(fn),
		esm.WithReportBatchItemFailures(), esm.WithFunctionTimeout(time.Duration(s.timeout)*time.Second))
	if err != nil {
		s.t.Fatal(err)
	}
	return fn, p
}

func (s *queued) send(body string) string {
	s.t.Helper()
	out, err := s.client.SendMessage(s.t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(s.q.URL), MessageBody: aws.String(body)})
	if err != nil {
		s.t.Fatal(err)
	}
	return aws.ToString(out.MessageId)
}

// held returns the messages a queue holds, visible or in flight.
func (s *queued) held(url string) int {
	s.t.Helper()
	visible, inFlight, err := dlq.Depth(s.t.Context(), s.client, url)
	if err != nil {
		s.t.Fatal(err)
	}
	return visible + inFlight
}

// pollUntil polls until done reports true, at most n polls (each waits up to a second for
// messages: the loop waits for events, bounded). A failed invocation fails the test.
func (s *queued) pollUntil(p *esm.Poller, n int, done func(esm.Batch) bool) {
	s.t.Helper()
	for range n {
		b, err := p.PollOnce(s.t.Context())
		if err != nil {
			s.t.Fatal(err)
		}
		if b.InvokeErr != nil {
			s.t.Fatalf("invocation failed: %v", b.InvokeErr)
		}
		if done(b) {
			return
		}
	}
	s.t.Fatalf("condition not reached after %d polls", n)
}

// Duplicate deliveries, in one batch and in later batches, give one ledger entry per event,
// and every message is deleted.
func TestQueueDuplicates(t *testing.T) {
	t.Parallel()
	s := newQueued(t)
	_, p := s.consumer(true)

	for _, id := range []string{"evt_a", "evt_b", "evt_a", "evt_c"} { // evt_a published twice
		s.send(event(id, ""))
	}
	deleted := 0
	check := func(want int) func(esm.Batch) bool {
		return func(b esm.Batch) bool {
			if len(b.Reported) > 0 {
				t.Errorf("batch %+v: reported %v, want none", b.Messages, b.Reported)
			}
			deleted += len(b.Deleted)
			return deleted == want
		}
	}
	s.pollUntil(p, 6, check(4))
	s.send(event("evt_c", "")) // published again, later
	s.send(event("evt_a", ""))
	s.pollUntil(p, 6, check(6))

	if n := s.ledgerByEvent(); !maps.Equal(n, map[string]int{"evt_a": 1, "evt_b": 1, "evt_c": 1}) {
		t.Errorf("ledger entries per event = %v, want one each", n)
	}
	if n := s.held(s.q.URL); n != 0 {
		t.Errorf("the queue still holds %d messages", n)
	}
}

// A message reported for a transient failure reappears after the visibility timeout, with
// ApproximateReceiveCount 2, and succeeds; a message without a key is reported.
func TestQueueRedeliveryAfterVisibilityTimeout(t *testing.T) {
	t.Parallel()
	s := newQueued(t)
	_, p := s.consumer(true)

	flaky := s.send(event("evt_flaky", `,"fail":"transient_once"`))
	keyless := s.send(`{"type":"OrderPlaced","order_id":"ord_x"}`)
	var receives []int
	reported := false
	start := time.Now() // before the first receive: the redelivery comes a visibility timeout after it
	s.pollUntil(p, 10, func(b esm.Batch) bool {
		for _, m := range b.Messages {
			if m.ID == flaky {
				receives = append(receives, m.ReceiveCount)
			}
		}
		if slices.Contains(b.Reported, flaky) && !reported {
			reported = true
			if !slices.Contains(b.Reported, keyless) {
				t.Errorf("first batch reported %v, want the keyless message %s too", b.Reported, keyless)
			}
		}
		return slices.Contains(b.Deleted, flaky)
	})
	if !slices.Equal(receives, []int{1, 2}) {
		t.Errorf("receive counts of the flaky message = %v, want [1 2]", receives)
	}
	if d := time.Since(start); d < queueTimeout*time.Second {
		t.Errorf("reported and redelivered within %v, want at least the visibility timeout (%ds)", d, queueTimeout)
	}
	if n := s.ledgerByEvent(); !maps.Equal(n, map[string]int{"evt_flaky": 1}) {
		t.Errorf("ledger = %v, want one entry for evt_flaky", n)
	}
}

// A poison message is reported until the queue's redrive policy moves it to the dead-letter
// queue, its failure replayed without running the handler; once the cause is fixed and its
// key released, a redrive runs it once.
func TestQueuePoisonDLQReleaseRedrive(t *testing.T) {
	t.Parallel()
	s := newQueued(t)
	fn, p := s.consumer(true)

	body := event("evt_poison", `,"fail":"poison"`)
	poison := s.send(body)
	s.send(event("evt_ok", ""))
	var receives []int
	start := time.Now()
	s.pollUntil(p, 12, func(b esm.Batch) bool {
		for _, m := range b.Messages {
			if m.ID == poison {
				receives = append(receives, m.ReceiveCount)
			}
		}
		return s.held(s.q.DLQURL) == 1
	})
	t.Logf("in the dead-letter queue %v after it was sent", time.Since(start).Round(10*time.Millisecond))
	if !slices.Equal(receives, []int{1, 2}) {
		t.Errorf("receive counts of the poison message = %v, want [1 2] (maxReceiveCount %d)", receives, maxReceiveCount)
	}
	if n := s.ledgerByEvent(); !maps.Equal(n, map[string]int{"evt_ok": 1}) {
		t.Errorf("ledger = %v, want evt_ok only", n)
	}
	var got []string
	for _, rec := range logRecords(fn.Log()) {
		if rec["message_id"] == poison {
			got = append(got, fmt.Sprint(rec["verdict"], " reported=", rec["reported"]))
		}
	}
	if want := []string{"failed_permanently reported=true", "replayed_failure reported=true"}; !slices.Equal(got, want) {
		t.Errorf("log records of the poison message = %v, want %v:\n%s", got, want, fn.Log())
	}

	key, err := idemlambda.SQSKey(idemlambda.KeyFromBodyField("event_id"), orders.LedgerAction, events.SQSMessage{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.storeOf("orders-consumer").Get(t.Context(), key, time.Now())
	if err != nil || rec.Status != core.StatusFailed || rec.Retryable || rec.Attempts != 1 {
		t.Fatalf("record = %v, %v; want failed permanently after 1 attempt", rec, err)
	}

	// The fix is deployed (the hook off), the key released, the dead-letter queue redriven.
	fn.Stop()
	_, p = s.consumer(false)
	if err := s.storeOf("orders-consumer").Release(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	if n, err := dlq.Redrive(t.Context(), s.client, s.q.DLQURL, s.q.URL); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v; want 1 message moved", n, err)
	}
	s.pollUntil(p, 4, func(b esm.Batch) bool { return len(b.Deleted) == 1 })

	if n := s.ledgerByEvent(); !maps.Equal(n, map[string]int{"evt_ok": 1, "evt_poison": 1}) {
		t.Errorf("ledger = %v, want one entry each", n)
	}
	if rec, err := s.storeOf("orders-consumer").Get(t.Context(), key, time.Now()); err != nil || rec.Status != core.StatusSucceeded || rec.Attempts != 1 {
		t.Errorf("record after the redrive = %v, %v; want succeeded, attempt 1", rec, err)
	}
	if n, m := s.held(s.q.URL), s.held(s.q.DLQURL); n+m != 0 {
		t.Errorf("queues still hold %d and %d messages", n, m)
	}
}
