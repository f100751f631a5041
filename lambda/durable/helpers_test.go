package durable_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/fakeclock"
	"github.com/idemgo/idem/internal/invokeserver"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/lambda/durable"
	"github.com/idemgo/idem/memstore"
)

// fulfilARN is the durable function's qualified ARN (its alias live).
const fulfilARN = "arn:aws:lambda:us-east-1:123456789012:function:fulfil:live"

// rig is the local Invoke server and a dispatcher that reaches it through
// the SDK's Lambda client, which does not retry itself (the runner does).
type rig struct {
	srv    *invokeserver.Server
	client *lambda.Client
	d      *durable.Dispatcher
}

// fixedNow is the sandboxes' fake clock's start.
var fixedNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// lambdaClient returns the rig's Lambda client.
func lambdaClient(r *rig) *lambda.Client { return r.client }

func newRig(t *testing.T) *rig {
	t.Helper()
	srv := invokeserver.Start()
	t.Cleanup(srv.Close)
	client := lambda.New(lambda.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	d, err := durable.New(client, fulfilARN)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{srv: srv, client: client, d: d}
}

// sandbox is one dispatcher sandbox: a runner over its own memory (no
// table), with a fake clock, that records every call's observation.
type sandbox struct {
	store  idem.Store
	runner *idem.Runner
	mu     sync.Mutex
	seen   []idem.Observation
}

func newSandbox(t *testing.T, opts ...idem.Option) *sandbox {
	t.Helper()
	return newSandboxOver(t, memstore.New(), opts...)
}

// newSandboxOver is newSandbox with its runner over store.
func newSandboxOver(t *testing.T, store idem.Store, opts ...idem.Option) *sandbox {
	t.Helper()
	clock := fakeclock.New(fixedNow)
	s := &sandbox{store: store}
	base := []idem.Option{
		idem.WithClock(clock.Now), idem.WithSleep(clock.Sleep), idem.WithRand(func() float64 { return 0 }),
		idem.WithObserver(idem.ObserverFunc(func(_ context.Context, o idem.Observation) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.seen = append(s.seen, o)
		})),
	}
	r, err := idem.New(s.store, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	s.runner = r
	return s
}

// take returns the observations since the last take.
func (s *sandbox) take() []idem.Observation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.seen
	s.seen = nil
	return out
}

// verdicts returns the verdicts since the last take, in the calls' order.
func (s *sandbox) verdicts() []string {
	var out []string
	for _, o := range s.take() {
		out = append(out, o.Verdict.String())
	}
	return out
}

// sqs dispatches ev through the sandbox's SQS dispatcher (action "fulfil",
// keyed by the body's order_id) and returns the reported message ids.
func (s *sandbox) sqs(t *testing.T, d *durable.Dispatcher, ev events.SQSEvent, opts ...idemlambda.BatchOption) []string {
	t.Helper()
	h, err := durable.SQS(s.runner, "fulfil", idemlambda.KeyFromBodyField("order_id"), d, append(opts, idemlambda.WithConcurrency(1))...)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// batch is an SQS event of bodies, message ids m-1, m-2, ... (prefixed).
func batch(prefix string, bodies ...string) events.SQSEvent {
	var ev events.SQSEvent
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: fmt.Sprintf("%sm-%d", prefix, i+1), Body: b, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders",
			Attributes: map[string]string{"ApproximateReceiveCount": "1"},
		})
	}
	return ev
}

// order is an order event's body.
func order(id string, amount int) string {
	return fmt.Sprintf(`{"order_id": %q, "amount": %d, "currency": "EUR"}`, id, amount)
}

// statuses returns the server's answers' status codes since invocation from.
func statuses(srv *invokeserver.Server, from int) []int {
	var out []int
	for _, inv := range srv.Invocations()[from:] {
		out = append(out, inv.Status)
	}
	return out
}

// names returns the distinct execution names the server was asked for.
func names(srv *invokeserver.Server) []string {
	seen := map[string]bool{}
	var out []string
	for _, inv := range srv.Invocations() {
		if !seen[inv.Name] {
			seen[inv.Name] = true
			out = append(out, inv.Name)
		}
	}
	return out
}

func equal[T comparable](t *testing.T, what string, got, want []T) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}
