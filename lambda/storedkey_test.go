package idemlambda_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/httprule"
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

// An HTTP wrapper gives its handler the request as it was keyed and
// fingerprinted (httprule.RequestOf); a handler error marked
// httprule.Answered comes with the handler's own response, which is
// answered, and is the handler's outcome for the runner: here marked
// core.MarkNoRecord and wrapping core.ErrKeyReused, it is key_reused and
// leaves no record, so the next request runs the handler again.
func TestHTTPHandlerSeam(t *testing.T) {
	t.Parallel()
	var verdicts []idem.Verdict
	e := newEnv(t, idem.WithObserver(idem.ObserverFunc(func(_ context.Context, o idem.Observation) { verdicts = append(verdicts, o.Verdict) })))
	ctx := e.ctx(t, time.Minute)
	var seen []*httprule.Request
	refuse := true
	api, err := idemlambda.HTTPAPI(e.runner, func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		r, _ := httprule.RequestOf(ctx)
		seen = append(seen, r)
		if refuse {
			refuse = false
			return events.APIGatewayV2HTTPResponse{StatusCode: 422, Body: "refused"},
				httprule.Answered(core.MarkNoRecord(fmt.Errorf("%w: by the handler", core.ErrKeyReused)))
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 202, Body: "started"}, nil
	}, idemlambda.WithFingerprintSelection(core.IgnoreFields("at")))
	if err != nil {
		t.Fatal(err)
	}
	req := withSub(v2Req("POST", "/orders", "k-1", `{"sku":"A1","at":1}`), "alice")
	for i, want := range []string{"422 refused", "202 started", "202 started"} {
		resp, err := api(ctx, req)
		if got := fmt.Sprint(resp.StatusCode, " ", resp.Body); err != nil || got != want {
			t.Errorf("request %d: %s (%v), want %s", i+1, got, err, want)
		}
	}
	if fmt.Sprint(verdicts) != fmt.Sprint([]idem.Verdict{idem.KeyReused, idem.Executed, idem.Replayed}) {
		t.Errorf("verdicts %v, want key_reused, executed, replayed", verdicts)
	}
	if len(seen) != 2 || seen[0] == nil {
		t.Fatalf("the handler ran %d times (%v), want 2, each with the request", len(seen), seen)
	}
	r := seen[0]
	doc, err := httprule.SelectedPayload(r.Method, r.Path, r.Body, r.Selection)
	if err != nil || string(doc) != `{"method":"POST","path":"/orders","json":{"sku":"A1"}}` ||
		fmt.Sprint(r.Key.Sources(), r.Identity) != "map[header:idempotency-key:k-1] [sub=alice]" {
		t.Errorf("request %s (%v), key %v, identity %v", doc, err, r.Key.Sources(), r.Identity)
	}
}
