package idemlambda_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	idemlambda "github.com/idemgo/idem/lambda"
)

func TestStoredKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := e.ctx(t, time.Minute)
	if k, ok := idemlambda.StoredKey(ctx); ok || k != "" {
		t.Errorf("outside a handler: %q, %v; want none", k, ok)
	}

	var got []string
	seen := func(ctx context.Context) {
		k, ok := idemlambda.StoredKey(ctx)
		if !ok {
			k = "(none)"
		}
		got = append(got, k)
	}
	api, err := idemlambda.HTTPAPI(e.runner, func(ctx context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		seen(ctx)
		return events.APIGatewayV2HTTPResponse{StatusCode: 503}, nil // not stored: the retry runs again
	}, idemlambda.WithOptionalKey())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = api(ctx, withSub(v2Req("POST", "/orders", "k-1", "{}"), "alice"))
	_, _ = api(ctx, withSub(v2Req("POST", "/orders", "k-1", "{}"), "alice"))
	_, _ = api(ctx, v2Req("POST", "/orders", "", "{}"))
	httpKey, err := idemlambda.HTTPKey("k-1", []string{"sub=alice"})
	if err != nil {
		t.Fatal(err)
	}

	consumer, err := idemlambda.SQS(e.runner, "act", idemlambda.KeyFromBodyField("event_id"), func(ctx context.Context, m events.SQSMessage) ([]byte, error) {
		seen(ctx)
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	msg := sqsMsg("m1", `{"event_id":"e1"}`)
	_, _ = consumer(ctx, events.SQSEvent{Records: []events.SQSMessage{msg}})
	sqsKey, err := idemlambda.SQSKey(idemlambda.KeyFromBodyField("event_id"), "act", msg)
	if err != nil {
		t.Fatal(err)
	}

	typed, err := idemlambda.Typed(e.runner, func(string) (string, error) { return "evt:typed:key", nil },
		func(ctx context.Context, in string) (string, error) { seen(ctx); return in, nil })
	if err != nil {
		t.Fatal(err)
	}
	_, _ = typed(ctx, "in")

	want := []string{httpKey, httpKey, "(none)", sqsKey, "evt:typed:key"}
	if len(got) != len(want) {
		t.Fatalf("handlers saw %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("call %d: StoredKey = %q want %q", i, got[i], want[i])
		}
	}
}
