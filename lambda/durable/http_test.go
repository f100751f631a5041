package durable_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/invokeserver"
	"github.com/idemgo/idem/internal/webhooktest"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/lambda/durable"
)

const pushBody = `{"ref":"refs/heads/main","after":"6113728f27ae82c7b1a177c8d03f9e96e0adf246","repository":{"full_name":"octo/hello"}}`

// A GitHub delivery starts one execution, through every HTTP dispatcher;
// its redelivery replays the 202 from a warm sandbox's memory without an
// Invoke, and reaches the same execution from a cold one. The durable
// function receives the body, the delivery id and the forwarded event type.
func TestGitHubRedelivery(t *testing.T) {
	for _, f := range flavours {
		t.Run(f.name, func(t *testing.T) {
			r := newRig(t)
			d, err := durable.New(lambdaClient(r), fulfilARN, durable.WithForwardedHeaders("X-GitHub-Event"))
			fatalIf(t, err)
			id := "72d3162e-cc78-11e3-81ab-4c9367dc0958"
			warm := webhookSandbox(t)
			first := f.send(t, warm, d, githubOptions(), githubPush(id, pushBody))
			s := first.started(t)
			if first.headers["idempotent-replayed"] != "" {
				t.Errorf("first delivery marked replayed: %v", first.headers)
			}
			again := f.send(t, warm, d, githubOptions(), githubPush(id, pushBody))
			if again.started(t) != s || again.headers["idempotent-replayed"] != "true" {
				t.Errorf("warm redelivery: %+v, want the first answer marked Idempotent-Replayed: true", again)
			}
			equal(t, "warm sandbox: verdicts", warm.verdicts(), []string{"executed", "replayed"})
			if got := len(r.srv.Invocations()); got != 1 {
				t.Errorf("invocations after the warm redelivery = %d, want 1", got)
			}
			redelivered := githubPush(id, pushBody)
			redelivered.headers["User-Agent"] = "GitHub-Hookshot/0000000" // not forwarded: not the payload
			cold := f.send(t, webhookSandbox(t), d, githubOptions(), redelivered)
			if cold.started(t) != s || r.srv.Started() != 1 {
				t.Errorf("cold redelivery: %+v, %d executions; want the first execution", cold, r.srv.Started())
			}

			got, _ := receivedBy(t, r, s)
			equal(t, "key", []string{got.Key["endpoint"], got.Key["header:x-github-delivery"]}, []string{"github-builds", id})
			equal(t, "headers", []string{got.Headers["x-github-event"]}, []string{"push"})
			if len(got.Key) != 2 || len(got.Headers) != 1 || got.Caller != nil {
				t.Errorf("received %+v: want the key's two sources, one header, no caller", got)
			}
			want, _ := core.Canonicalize([]byte(pushBody))
			if got.Request.Method != "POST" || got.Request.Path != "/hooks/github" || string(got.Request.JSON) != string(want) {
				t.Errorf("request %+v, want POST /hooks/github with the body %s", got.Request, want)
			}
		})
	}
}

// A Stripe event sent to two endpoints starts one execution per endpoint;
// a retry to each, whose pending_webhooks changed, reaches its endpoint's
// execution from a cold sandbox: the durable function receives the body as
// fingerprinted, without the field the sender changes.
func TestStripeTwoEndpoints(t *testing.T) {
	r := newRig(t)
	event := func(pending int) string {
		return `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"payment_intent.succeeded",` +
			`"data":{"object":{"id":"pi_1","amount":2000}},"pending_webhooks":` + string(rune('0'+pending)) + `}`
	}
	starts := map[string]durable.Started{}
	for _, endpoint := range []string{"fulfilment", "ledger"} {
		a := httpAPI.send(t, webhookSandbox(t), r.d, stripeOptions(endpoint), stripeEvent("/stripe/"+endpoint, event(2)))
		starts[endpoint] = a.started(t)
	}
	if starts["fulfilment"].ExecutionName == starts["ledger"].ExecutionName || r.srv.Started() != 2 {
		t.Fatalf("starts %v, %d executions: want one per endpoint", starts, r.srv.Started())
	}
	for endpoint, s := range starts {
		retry := httpAPI.send(t, webhookSandbox(t), r.d, stripeOptions(endpoint), stripeEvent("/stripe/"+endpoint, event(1)))
		if retry.started(t) != s {
			t.Errorf("%s: retry answered %+v, want the execution %s", endpoint, retry, s.ExecutionName)
		}
		got, _ := receivedBy(t, r, s)
		if got.Key["endpoint"] != endpoint || got.Key["field:id"] != "evt_1NG8Du2eZvKYlo2CUI79vXWy" || strings.Contains(string(got.Request.JSON), "pending_webhooks") {
			t.Errorf("%s: received key %v and body %s: want the endpoint, the event id, and no pending_webhooks", endpoint, got.Key, got.Request.JSON)
		}
	}
	if got := r.srv.Started(); got != 2 {
		t.Errorf("executions started = %d, want 2", got)
	}
}

// A delivery whose signature does not verify starts nothing: 401, no
// record, no Invoke.
func TestTamperedSignature(t *testing.T) {
	r := newRig(t)
	s := webhookSandbox(t)
	tampered := githubPush("d-1", pushBody)
	tampered.body = strings.Replace(pushBody, "main", "evil", 1)
	unsigned := githubPush("d-2", pushBody)
	delete(unsigned.headers, "X-Hub-Signature-256")
	stale := stripeEvent("/stripe/fulfilment", `{"id":"evt_1","type":"charge.succeeded"}`)
	stale.headers["Stripe-Signature"] = webhooktest.StripeSignature(fixedNow.Unix()-3600, `{"id":"evt_1","type":"charge.succeeded"}`, stripeSecret)
	for _, c := range []struct {
		name string
		req  request
		opts []idemlambda.HTTPOption
	}{
		{"tampered body", tampered, githubOptions()},
		{"no signature", unsigned, githubOptions()},
		{"stale Stripe timestamp", stale, stripeOptions("fulfilment")},
	} {
		a := httpAPI.send(t, s, r.d, c.opts, c.req)
		if a.status != 401 || a.problem() != idemlambda.ProblemInvalidSignature {
			t.Errorf("%s: %+v, want 401 %s", c.name, a, idemlambda.ProblemInvalidSignature)
		}
	}
	equal(t, "verdicts", s.verdicts(), []string{"unauthorized", "unauthorized", "unauthorized"})
	if got := len(r.srv.Invocations()); got != 0 {
		t.Errorf("invocations = %d, want 0", got)
	}
}

// Another body under a delivery id is 422: refused by the runner's
// fingerprint where it remembers the id, by Lambda elsewhere; Lambda's
// refusal leaves no record, so the sandbox that met it still starts (finds)
// the execution of the first body.
func TestHTTPPayloadMismatch(t *testing.T) {
	r := newRig(t)
	other := strings.Replace(pushBody, "6113728f", "00000000", 1)
	warm := webhookSandbox(t)
	warm.send(t, r, githubPush("d-1", pushBody)).started(t)
	warm.take()

	cold := webhookSandbox(t)
	a := cold.send(t, r, githubPush("d-1", other))
	obs := cold.take()
	var exc *types.DurableExecutionAlreadyStartedException
	if a.status != 422 || a.problem() != idemlambda.ProblemKeyReused || len(obs) != 1 || obs[0].Verdict != idem.KeyReused ||
		!errors.Is(obs[0].Err, durable.ErrAlreadyStarted) || !errors.As(obs[0].Err, &exc) {
		t.Fatalf("cold sandbox: %+v, observations %+v; want 422 %s, key_reused with Lambda's exception", a, obs, idemlambda.ProblemKeyReused)
	}
	equal(t, "statuses", statuses(r.srv, 1), []int{409})

	if a := warm.send(t, r, githubPush("d-1", other)); a.status != 422 || a.problem() != idemlambda.ProblemKeyReused {
		t.Errorf("warm sandbox: %+v, want 422", a)
	}
	equal(t, "warm sandbox: verdicts", warm.verdicts(), []string{"key_reused"})
	if got := len(r.srv.Invocations()); got != 2 {
		t.Errorf("invocations = %d, want 2 (the warm sandbox refuses without an Invoke)", got)
	}

	cold.send(t, r, githubPush("d-1", pushBody)).started(t)
	equal(t, "cold sandbox, the first body: verdicts", cold.verdicts(), []string{"executed"})
	if got := r.srv.Started(); got != 1 {
		t.Errorf("executions started = %d, want 1", got)
	}
}

// send is a GitHub dispatcher's answer, over HTTP API, to req.
func (s *sandbox) send(t *testing.T, r *rig, req request) answer {
	t.Helper()
	return httpAPI.send(t, s, r.d, githubOptions(), req)
}

// Throttling, a Lambda 5xx and a failed connection are 503 with
// Retry-After, leave no record and count no attempt: the sender's retries
// go on until one starts the execution, once.
func TestHTTPThrottling(t *testing.T) {
	for _, c := range []struct {
		name, retryAfter string
		fault            invokeserver.Fault
	}{
		{"throttling", "7", invokeserver.Throttle},
		{"5xx", "1", invokeserver.ServiceError},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			r.srv.SetRetryAfter(7)
			s := webhookSandbox(t)
			for i := range idem.DefaultMaxAttempts + 1 {
				r.srv.Fail(c.fault)
				a := s.send(t, r, githubPush("d-1", pushBody))
				if a.status != 503 || a.problem() != durable.ProblemStartUnavailable || a.headers["retry-after"] != c.retryAfter {
					t.Fatalf("delivery %d: %+v, want 503 %s with Retry-After: %s", i+1, a, durable.ProblemStartUnavailable, c.retryAfter)
				}
			}
			v := s.verdicts()
			if len(v) != idem.DefaultMaxAttempts+1 || v[0] != "failed_transiently" || v[len(v)-1] != "failed_transiently" {
				t.Errorf("verdicts %v, want failed_transiently each", v)
			}
			s.send(t, r, githubPush("d-1", pushBody)).started(t)
			s.send(t, r, githubPush("d-1", pushBody)).started(t)
			equal(t, "after the faults: verdicts", s.verdicts(), []string{"executed", "replayed"})
			if got := r.srv.Started(); got != 1 {
				t.Errorf("executions started = %d, want 1", got)
			}
		})
	}
}

// Any other refusal of Lambda (a permission) is 500, not recorded: once it
// is fixed, the sender's retry starts the execution.
func TestHTTPOtherLambdaErrors(t *testing.T) {
	r := newRig(t)
	s := webhookSandbox(t)
	r.srv.Fail(invokeserver.Forbidden)
	if a := s.send(t, r, githubPush("d-1", pushBody)); a.status != 500 || a.problem() != idemlambda.ProblemInternal {
		t.Fatalf("forbidden: %+v, want 500 %s", a, idemlambda.ProblemInternal)
	}
	s.send(t, r, githubPush("d-1", pushBody)).started(t)
	equal(t, "verdicts", s.verdicts(), []string{"failed_transiently", "executed"})
}

// A body whose payload is over Lambda's asynchronous limit is 413
// body-too-large, invalid_payload, and not sent; one Lambda refuses as too
// large gets the same answer.
func TestHTTPOversized(t *testing.T) {
	r := newRig(t)
	s := webhookSandbox(t)
	big := `{"pad":"` + strings.Repeat("x", durable.MaxPayload) + `"}`
	a := s.send(t, r, githubPush("d-big", big))
	obs := s.take()
	if a.status != 413 || a.problem() != durable.ProblemBodyTooLarge || len(obs) != 1 || obs[0].Verdict != idem.InvalidPayload ||
		!errors.Is(obs[0].Err, durable.ErrPayloadTooLarge) {
		t.Fatalf("over the limit: %+v, observations %+v; want 413 %s, invalid_payload", a, obs, durable.ProblemBodyTooLarge)
	}
	if got := len(r.srv.Invocations()); got != 0 {
		t.Errorf("invocations = %d, want 0", got)
	}
	r.srv.SetMaxPayload(200)
	if a := s.send(t, r, githubPush("d-mid", pushBody+strings.Repeat(" ", 100))); a.status != 413 || a.problem() != durable.ProblemBodyTooLarge {
		t.Errorf("refused by Lambda: %+v, want 413", a)
	}
	equal(t, "refused by Lambda: verdicts", s.verdicts(), []string{"invalid_payload"})
	equal(t, "statuses", statuses(r.srv, 0), []int{413})
}

// Requests keyed by the Idempotency-Key header: one execution per caller
// and key, the caller in the payload; a retry is replayed; another body is
// 422; a request without the header is 400 and starts nothing.
func TestIdempotencyKeyRequests(t *testing.T) {
	r := newRig(t)
	s := newSandbox(t)
	order := func(sub, key, body string) request {
		return request{method: "POST", path: "/orders", jwtSub: sub, body: body,
			headers: map[string]string{"content-type": "application/json", "idempotency-key": key}}
	}
	alice := httpAPI.send(t, s, r.d, nil, order("alice", "k-1", `{"sku":"A1","qty":2}`)).started(t)
	replay := httpAPI.send(t, s, r.d, nil, order("alice", "k-1", `{ "qty": 2, "sku": "A1" }`))
	if replay.started(t) != alice || replay.headers["idempotent-replayed"] != "true" {
		t.Errorf("retry: %+v, want the first answer, replayed", replay)
	}
	bob := httpAPI.send(t, s, r.d, nil, order("bob", "k-1", `{"sku":"A1","qty":2}`)).started(t)
	if bob == alice || r.srv.Started() != 2 {
		t.Errorf("two callers with one key: %v, %v; want two executions", alice, bob)
	}
	if a := httpAPI.send(t, s, r.d, nil, order("alice", "k-1", `{"sku":"A1","qty":3}`)); a.status != 422 {
		t.Errorf("another body: %+v, want 422", a)
	}
	missing := order("alice", "", `{}`)
	delete(missing.headers, "idempotency-key")
	if a := httpAPI.send(t, s, r.d, nil, missing); a.status != 400 || a.problem() != idemlambda.ProblemMissingKey {
		t.Errorf("no key: %+v, want 400 %s", a, idemlambda.ProblemMissingKey)
	}
	equal(t, "verdicts", s.verdicts(), []string{"executed", "replayed", "executed", "key_reused", "missing_key"})

	for who, st := range map[string]durable.Started{"alice": alice, "bob": bob} {
		got, _ := receivedBy(t, r, st)
		if len(got.Caller) != 1 || !strings.Contains(got.Caller[0], who) || got.Key["header:idempotency-key"] != "k-1" || len(got.Key) != 1 {
			t.Errorf("%s: received caller %v and key %v", who, got.Caller, got.Key)
		}
	}
	if got := len(r.srv.Invocations()); got != 2 {
		t.Errorf("invocations = %d, want 2", got)
	}
}

// What the durable function receives fingerprints, under "request", as the
// wrapper fingerprinted the request (under its selection), and is the same
// bytes for every request of one key and fingerprint: a retry whose body's
// keys were reordered and whose left-out field changed reaches the
// execution from a cold sandbox.
func TestHTTPPayloadIsFingerprinted(t *testing.T) {
	r := newRig(t)
	req := func(body string) request {
		return request{method: "POST", path: "/orders", body: body, headers: map[string]string{"Idempotency-Key": "k-fp"}}
	}
	opts := []idemlambda.HTTPOption{idemlambda.WithFingerprintSelection(core.IgnoreFields("sent_at"))}
	s := newSandbox(t)
	a := httpAPI.send(t, s, r.d, opts, req(`{"b":[1,2.50],"a":"<&>","sent_at":"10:00","c":{"z":null,"y":true}}`)).started(t)
	key, err := idemlambda.HTTPKey("k-fp", nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.ExecutionName != durable.ExecutionName(key) {
		t.Errorf("execution name %s, want ExecutionName of the stored key", a.ExecutionName)
	}
	_, raw := receivedBy(t, r, a)
	var sent struct{ Request json.RawMessage }
	if err := json.Unmarshal(raw, &sent); err != nil {
		t.Fatal(err)
	}
	fp, err := core.Fingerprint(sent.Request)
	stored, gerr := s.store.Get(t.Context(), key, fixedNow)
	if err != nil || gerr != nil || stored.Fingerprint != fp || strings.Contains(string(raw), "sent_at") {
		t.Errorf("Lambda received %s, fingerprinting as %s (%v); the runner's fingerprint %s (%v): want equal, without sent_at", raw, fp, err, stored.Fingerprint, gerr)
	}
	b := httpAPI.send(t, newSandbox(t), r.d, opts, req(`{"c":{"y":true,"z":null},"sent_at":"10:05","a":"<&>","b":[1,2.50]}`)).started(t)
	if again, _ := r.srv.Payload(b.ExecutionName); b != a || string(again) != string(raw) || r.srv.Started() != 1 {
		t.Errorf("retry: %v with %s, want %v with the same payload %s", b, again, a, raw)
	}
}

// Every kind of body reaches the durable function as the wrapper
// fingerprinted it, through every HTTP dispatcher: JSON (canonical), text,
// binary bytes the platform sent in base64, none.
func TestHTTPBodies(t *testing.T) {
	bin := "\x00\xff\xfe binary"
	for _, c := range []struct {
		name, body string
		base64     bool
		want       func(received) bool
	}{
		{"json", `{ "b": 1, "a": [true, null] }`, false, func(g received) bool { return string(g.Request.JSON) == `{"a":[true,null],"b":1}` }},
		{"text", "order o-1 placed", false, func(g received) bool { return g.Request.Text != nil && *g.Request.Text == "order o-1 placed" }},
		{"binary, base64", base64.StdEncoding.EncodeToString([]byte(bin)), true, func(g received) bool { return string(g.Request.Base64) == bin }},
		{"empty", "", false, func(g received) bool {
			return g.Request.JSON == nil && g.Request.Text == nil && g.Request.Base64 == nil
		}},
	} {
		for _, f := range flavours {
			t.Run(c.name+"/"+f.name, func(t *testing.T) {
				r := newRig(t)
				s := newSandbox(t)
				req := request{method: "PUT", path: "/files/1", body: c.body, base64: c.base64, headers: map[string]string{"Idempotency-Key": "k-body"}}
				st := f.send(t, s, r.d, nil, req).started(t)
				got, raw := receivedBy(t, r, st)
				if !c.want(got) || got.Request.Method != "PUT" || got.Request.Path != "/files/1" {
					t.Errorf("received %s", raw)
				}
				var sent struct{ Request json.RawMessage }
				fatalIf(t, json.Unmarshal(raw, &sent))
				key, err := idemlambda.HTTPKey("k-body", nil)
				fatalIf(t, err)
				fp, err := core.Fingerprint(sent.Request)
				stored, gerr := s.store.Get(t.Context(), key, fixedNow)
				if err != nil || gerr != nil || fp != stored.Fingerprint {
					t.Errorf("fingerprint of %s = %s (%v), the runner's %s (%v)", sent.Request, fp, err, stored.Fingerprint, gerr)
				}
			})
		}
	}
}

// A header the dispatcher forwards is not fingerprinted: one that changed
// between deliveries makes a redelivery in a cold sandbox another payload
// to Lambda, refused 422 (forward only what the sender keeps). A dispatcher
// run unkeyed (WithOptionalKey) has nothing to name an execution after: 500,
// no Invoke.
func TestHTTPForwardedHeadersAndUnkeyed(t *testing.T) {
	r := newRig(t)
	d, err := durable.New(lambdaClient(r), fulfilARN, durable.WithForwardedHeaders("User-Agent"))
	fatalIf(t, err)
	first := githubPush("d-1", pushBody)
	httpAPI.send(t, webhookSandbox(t), d, githubOptions(), first).started(t)
	again := githubPush("d-1", pushBody)
	again.headers["User-Agent"] = "GitHub-Hookshot/0000000"
	if a := httpAPI.send(t, webhookSandbox(t), d, githubOptions(), again); a.status != 422 || a.problem() != idemlambda.ProblemKeyReused {
		t.Errorf("changed forwarded header: %+v, want 422", a)
	}

	s := newSandbox(t)
	unkeyed := request{method: "POST", path: "/orders", body: "{}"}
	if a := httpAPI.send(t, s, r.d, []idemlambda.HTTPOption{idemlambda.WithOptionalKey()}, unkeyed); a.status != 500 || a.problem() != idemlambda.ProblemInternal {
		t.Errorf("unkeyed: %+v, want 500 %s", a, idemlambda.ProblemInternal)
	}
	equal(t, "unkeyed: verdicts", s.verdicts(), []string{"unkeyed"})
	if got := len(r.srv.Invocations()); got != 2 {
		t.Errorf("invocations = %d, want 2 (none unkeyed)", got)
	}
}
