package idemlambda_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/logtest"
	idemlambda "github.com/idemgo/idem/lambda"
)

// fairMsg is a message of an SQS fair queue (a standard queue) for tenant,
// keyed by its body's order_id.
func fairMsg(id, tenant, orderID string) events.SQSMessage {
	attrs := map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1893553445000"}
	if tenant != "" {
		attrs["MessageGroupId"] = tenant
	}
	return events.SQSMessage{MessageId: id, Body: `{"order_id":"` + orderID + `"}`, Attributes: attrs,
		EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:orders-fair"}
}

// Fair queues: with WithMessageGroupTenant, two tenants' messages with one
// event identity are two events (each runs), one tenant's redelivery
// replays, a message without a group is refused; every record names its
// tenant in the log and the observation.
func TestMessageGroupTenant(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	obs := &observed{}
	e := newEnv(t, idem.WithLogger(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))), idem.WithObserver(obs))
	var mu sync.Mutex
	var ran []string
	h, err := idemlambda.SQS(e.runner, "ship", idemlambda.KeyFromBodyField("order_id"), func(ctx context.Context, m events.SQSMessage) ([]byte, error) {
		mu.Lock()
		ran = append(ran, m.Attributes["MessageGroupId"])
		mu.Unlock()
		return []byte(`"ok"`), nil
	}, idemlambda.WithMessageGroupTenant(), idemlambda.WithConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	batches := [][]events.SQSMessage{
		{fairMsg("m-1", "tenant-a", "o-42")},
		{fairMsg("m-2", "tenant-b", "o-42")},
		{fairMsg("m-3", "tenant-a", "o-42"), fairMsg("m-4", "", "o-42")},
	}
	var failures []string
	for _, b := range batches {
		resp, _ := h(e.ctx(t, time.Minute), events.SQSEvent{Records: b})
		failures = append(failures, failureIDs(resp)...)
	}
	if want := []string{"tenant-a", "tenant-b"}; !slices.Equal(ran, want) {
		t.Errorf("handler ran for %q; want %q (each tenant's o-42 once)", ran, want)
	}
	if want := []string{"m-4"}; !slices.Equal(failures, want) {
		t.Errorf("reported %q; want %q (the message without a group)", failures, want)
	}
	var got []string // the order within a batch is not the test's
	for _, o := range obs.take() {
		got = append(got, o.Verdict.String()+"/"+o.Tenant)
	}
	slices.Sort(got)
	if want := []string{"executed/tenant-a", "executed/tenant-b", "missing_key/", "replayed/tenant-a"}; !slices.Equal(got, want) {
		t.Errorf("observations %q; want %q", got, want)
	}
	var tenants []string
	for _, r := range logtest.JSONLines(t, logs.String()) {
		tenant, _ := r["tenant"].(string)
		tenants = append(tenants, fmt.Sprint(r["verdict"], "/", tenant))
	}
	slices.Sort(tenants)
	if want := []string{"executed/tenant-a", "executed/tenant-b", "missing_key/", "replayed/tenant-a"}; !slices.Equal(tenants, want) {
		t.Errorf("log records %q; want %q", tenants, want)
	}
}

// The other batch wrappers have no message group: the option is an error.
func TestMessageGroupTenantSQSOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	noop := func(context.Context, events.SNSEventRecord) ([]byte, error) { return nil, nil }
	if _, err := idemlambda.SNS(e.runner, "a", idemlambda.KeyFromMessageID(), noop, idemlambda.WithMessageGroupTenant()); err == nil {
		t.Error("SNS with WithMessageGroupTenant: no error")
	}
	if _, err := idemlambda.Kinesis(e.runner, "a", idemlambda.KinesisKeyFromSequenceNumber(), func(context.Context, events.KinesisEventRecord) ([]byte, error) { return nil, nil }, idemlambda.WithMessageGroupTenant()); err == nil {
		t.Error("Kinesis with WithMessageGroupTenant: no error")
	}
	if _, err := idemlambda.DynamoDBStream(e.runner, "a", idemlambda.DynamoDBKeyFromEventID(), func(context.Context, events.DynamoDBEventRecord) ([]byte, error) { return nil, nil }, idemlambda.WithMessageGroupTenant()); err == nil {
		t.Error("DynamoDBStream with WithMessageGroupTenant: no error")
	}
}

// The Lambda tenant id scopes every wrapper's keys, the batch wrappers'
// too (a function in tenant isolation mode invoked with a batch by a
// router), and names the tenant in the observation; StoredKey gives the
// handler the scoped key.
func TestLambdaTenantBatchAndStoredKey(t *testing.T) {
	t.Parallel()
	obs := &observed{}
	e := newEnv(t, idem.WithObserver(obs))
	var keys []string
	h, err := idemlambda.SQS(e.runner, "ship", idemlambda.KeyFromBodyField("order_id"), func(ctx context.Context, m events.SQSMessage) ([]byte, error) {
		k, _ := idemlambda.StoredKey(ctx)
		keys = append(keys, k)
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, tenant := range []string{"blue", "green", ""} {
		ctx := lambdacontext.NewContext(e.ctx(t, time.Minute), &lambdacontext.LambdaContext{AwsRequestID: fmt.Sprint("r-", i), TenantID: tenant})
		if resp, _ := h(ctx, events.SQSEvent{Records: []events.SQSMessage{fairMsg(fmt.Sprint("m-", i), "", "o-42")}}); len(resp.BatchItemFailures) > 0 {
			t.Fatalf("tenant %q: reported %v", tenant, resp.BatchItemFailures)
		}
	}
	plain, _ := idemlambda.EventKey("o-42", "ship")
	blue, _ := idemlambda.ScopedKey(plain, idemlambda.ScopeTenant+"=blue")
	green, _ := idemlambda.ScopedKey(plain, idemlambda.ScopeTenant+"=green")
	if want := []string{blue, green, plain}; !slices.Equal(keys, want) {
		t.Errorf("stored keys %q; want %q", keys, want)
	}
	var tenants []string
	for _, o := range obs.take() {
		tenants = append(tenants, o.Verdict.String()+"/"+o.Tenant)
	}
	if want := []string{"executed/blue", "executed/green", "executed/"}; !slices.Equal(tenants, want) {
		t.Errorf("observations %q; want %q", tenants, want)
	}
	if k, err := idemlambda.ScopedKey(plain); k != plain || err != nil {
		t.Errorf("ScopedKey without scopes = %q, %v; want the key itself", k, err)
	}
	long := make([]byte, 2000)
	for i := range long {
		long[i] = 'x'
	}
	if _, err := idemlambda.ScopedKey(plain, idemlambda.ScopeTenant+"="+string(long)); !errors.Is(err, core.ErrInvalidKey) {
		t.Errorf("ScopedKey past the source limit: %v; want an invalid key", err)
	}
}
