package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	idemlambda "github.com/idemgo/idem/lambda"
)

func TestInspectTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const key = "evt:order-1001:ship"
	f.put(t, key, spec{status: core.StatusFailed, errText: "card declined:\n  insufficient funds", done: time.Minute, token: "tok-a"})
	r := mustCmd(t, exitOK, t0.Add(time.Hour), nil, "inspect", "--table", f.table, "--key", key)
	want := strings.Join([]string{
		"table:        " + f.table,
		"source:       --key",
		"key hash:     " + idem.HashKey(key),
		"state:        failed-permanent",
		"attempts:     1",
		"updated:      2026-12-03T10:01:00Z (59m0s ago)",
		"lease end:    -",
		"retention:    2026-12-04T10:01:00Z (in 23h1m)",
		"error:        card declined: insufficient funds",
		"result:       none",
		"fingerprint:  5f70bf18a086…",
		"next call:    replay: replays the permanent failure; the handler does not run (release the key to run it again) (with the same payload, max attempts 5)",
		"fence:        failed/1/tok-a",
		"",
	}, "\n")
	if r.stdout != want {
		t.Errorf("inspect output:\n%s\nwant:\n%s", r.stdout, want)
	}
}

func TestInspectStates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ddbstore.WithMaxItemSize(4096))
	now := t0.Add(10 * time.Minute)
	big := make([]byte, 8<<10)
	fillIncompressible(big)
	tests := []struct {
		name     string
		spec     spec
		state    string
		action   string
		attempt  int
		retryAt  bool
		result   int
		omitted  bool
		maxFlags []string
	}{
		{"live lease", spec{status: core.StatusInProgress, at: 9 * time.Minute}, stateInProgress, "in_progress", 0, true, 0, false, nil},
		{"stuck", spec{status: core.StatusInProgress, lease: time.Minute}, stateStuck, "execute", 2, false, 0, false, nil},
		{"succeeded", spec{status: core.StatusSucceeded, result: []byte(`{"id":"ord_1"}`), done: time.Minute}, stateSucceeded, "replay", 0, false, 14, false, nil},
		{"omitted", spec{status: core.StatusSucceeded, result: big, done: time.Minute}, stateSucceeded, "replay", 0, false, 0, true, nil},
		{"retryable", spec{status: core.StatusFailed, retryable: true, errText: "throttled", done: time.Minute}, stateFailedRetryable, "execute", 2, false, 0, false, nil},
		{"retries exhausted", spec{status: core.StatusFailed, retryable: true, errText: "throttled", done: time.Minute}, stateFailedRetryable, "reject", 0, false, 0, false, []string{"--max-attempts", "1"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := "evt:states:" + string(rune('a'+i))
			f.put(t, key, tc.spec)
			args := append([]string{"inspect", "--table", f.table, "--key", key, "--json"}, tc.maxFlags...)
			v := decodeJSON[inspectView](t, mustCmd(t, exitOK, now, nil, args...).stdout)
			if !v.Found || v.Record == nil || v.NextCall == nil {
				t.Fatalf("view = %+v, want a record", v)
			}
			if v.Record.State != tc.state || v.NextCall.Action != tc.action || v.NextCall.Attempt != tc.attempt ||
				(v.NextCall.RetryAt != nil) != tc.retryAt || v.Record.ResultBytes != tc.result || v.Record.ResultOmitted != tc.omitted {
				t.Errorf("state %s, next %+v, result %d omitted %v; want %s, %s attempt %d retry-at %v, result %d omitted %v",
					v.Record.State, *v.NextCall, v.Record.ResultBytes, v.Record.ResultOmitted, tc.state, tc.action, tc.attempt, tc.retryAt, tc.result, tc.omitted)
			}
			if v.KeyHash != idem.HashKey(key) || v.Record.KeyHash != v.KeyHash || v.Record.FingerprintPrefix != fp[:12] {
				t.Errorf("key hash %s / %s, fingerprint %s; want %s, %s", v.KeyHash, v.Record.KeyHash, v.Record.FingerprintPrefix, idem.HashKey(key), fp[:12])
			}
		})
	}
}

// fillIncompressible fills b with a xorshift sequence, which gzip cannot
// shrink.
func fillIncompressible(b []byte) {
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
}

func TestInspectNoRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const key = "evt:never:written"
	r := mustCmd(t, exitNotFound, t0, nil, "inspect", "--table", f.table, "--key", key)
	if !strings.Contains(r.stderr, "no live record for key hash "+idem.HashKey(key)) || r.stdout != "" {
		t.Errorf("stdout %q, stderr:\n%s", r.stdout, r.stderr)
	}
	v := decodeJSON[inspectView](t, mustCmd(t, exitNotFound, t0, nil, "inspect", "--table", f.table, "--key", key, "--json").stdout)
	if v.Found || v.KeyHash != idem.HashKey(key) || v.Table != f.table {
		t.Errorf("JSON view = %+v, want found false with the key hash", v)
	}
	// A record past retention counts as absent.
	f.put(t, "evt:expired:rec", spec{status: core.StatusSucceeded, done: time.Minute, retention: time.Hour})
	mustCmd(t, exitNotFound, t0.Add(2*time.Hour), nil, "inspect", "--table", f.table, "--key", "evt:expired:rec")
}

// TestInspectSQSEvent runs the SQS wrapper over the table, then finds its
// records from the event file, and from the same message as a dead-letter
// queue hands it out (sqs receive-message).
func TestInspectSQSEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	runner, err := idem.New(f.store)
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	handler, err := idemlambda.SQS(runner, "notify", idemlambda.KeyFromBodyField("event_id"),
		func(ctx context.Context, m events.SQSMessage) ([]byte, error) {
			runs.Add(1)
			if strings.Contains(m.Body, "bad") {
				return nil, core.MarkPermanent(errors.New("template missing"))
			}
			return []byte(`"sent"`), nil
		}) // a permanent failure is reported: the queue's redrive policy takes it to the DLQ
	if err != nil {
		t.Fatal(err)
	}
	event := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: `{"event_id":"e-1"}`, EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:q"},
		{MessageId: "m-2", Body: `{"event_id":"e-2","bad":true}`, EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:q"},
	}}
	resp, err := handler(context.Background(), event)
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m-2" {
		t.Fatalf("handler = %+v, %v; want m-2 reported", resp, err)
	}
	raw, _ := json.Marshal(event)
	eventFile := writeFile(t, "event.json", string(raw))
	dlqFile := writeFile(t, "dlq.json", `{"Messages":[{"MessageId":"m-2","ReceiptHandle":"AQEB","MD5OfBody":"x",`+
		`"Body":"{\"event_id\":\"e-2\",\"bad\":true}","Attributes":{"ApproximateReceiveCount":"5"}}]}`)
	sel := []string{"--key-source", "body:event_id", "--action", "notify"}

	now := time.Now()
	ok := decodeJSON[inspectView](t, mustCmd(t, exitOK, now, nil, append([]string{"inspect", "--table", f.table, "--sqs-event", eventFile, "--message", "0", "--json"}, sel...)...).stdout)
	if ok.Record.State != stateSucceeded || ok.Record.ResultBytes != len(`"sent"`) {
		t.Errorf("message 0: %+v, want succeeded with its result", *ok.Record)
	}
	failed := decodeJSON[inspectView](t, mustCmd(t, exitOK, now, nil, append([]string{"inspect", "--table", f.table, "--sqs-event", eventFile, "--message", "1", "--json"}, sel...)...).stdout)
	if failed.Record.State != stateFailedPermanent || failed.Record.Error != "template missing" {
		t.Errorf("message 1: %+v, want failed-permanent with the handler's error", *failed.Record)
	}
	dlq := mustCmd(t, exitOK, now, nil, append([]string{"inspect", "--table", f.table, "--sqs-event", dlqFile}, sel...)...)
	for _, want := range []string{"key hash:     " + failed.KeyHash, "source:       SQS message 0 (id m-2), body field event_id, action notify", "error:        template missing"} {
		if !strings.Contains(dlq.stdout, want) {
			t.Errorf("inspect of the DLQ message lacks %q:\n%s", want, dlq.stdout)
		}
	}
	// Released, the message runs again when redriven.
	mustCmd(t, exitOK, now, nil, append([]string{"release", "--table", f.table, "--sqs-event", dlqFile, "--yes"}, sel...)...)
	before := runs.Load()
	if _, err := handler(context.Background(), events.SQSEvent{Records: event.Records[1:]}); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != before+1 {
		t.Errorf("handler ran %d times on the redriven message, want 1", runs.Load()-before)
	}
}

func TestSQSFileFormats(t *testing.T) {
	t.Parallel()
	lambdaEvent := `{"Records":[{"messageId":"m-9","body":"{}","attributes":{"MessageDeduplicationId":"d-9"},` +
		`"messageAttributes":{"EventId":{"stringValue":"e-9","dataType":"String"}}}]}`
	received := `{"Messages":[{"MessageId":"m-9","Body":"{}","Attributes":{"MessageDeduplicationId":"d-9"},` +
		`"MessageAttributes":{"EventId":{"StringValue":"e-9","DataType":"String"}}}]}`
	single := `{"messageId":"m-9","body":"{}","attributes":{"MessageDeduplicationId":"d-9"},` +
		`"messageAttributes":{"EventId":{"stringValue":"e-9","dataType":"String"}}}`
	for _, src := range []string{"attribute:EventId", "dedup", "message-id"} {
		var keys []string
		for _, doc := range []string{lambdaEvent, received, single} {
			k := keyFlags{sqsEvent: writeFile(t, "m.json", doc), config: configFlags{sources: repeated{src}, action: "act"}}
			key, _, err := k.resolve(&layoutFlags{})
			if err != nil {
				t.Fatalf("%s: %v", src, err)
			}
			keys = append(keys, key)
		}
		ks, err := idemlambda.KeyConfig{Key: []string{src}}.Source()
		if err != nil {
			t.Fatal(err)
		}
		want, err := idemlambda.SQSKey(ks, "act", events.SQSMessage{MessageId: "m-9", Attributes: map[string]string{"MessageDeduplicationId": "d-9"},
			MessageAttributes: map[string]events.SQSMessageAttribute{"EventId": {StringValue: ptr("e-9"), DataType: "String"}}})
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			if k != want {
				t.Errorf("%s: file format %d gives key hash %s, want %s", src, i, idem.HashKey(k), idem.HashKey(want))
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestInspectHTTPEvent runs each HTTP wrapper over the table and finds the
// request's record from its event, scoped by its caller.
func TestInspectHTTPEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	runner, err := idem.New(f.store)
	if err != nil {
		t.Fatal(err)
	}
	const created = `{"order_id":"ord_1"}`
	headers := map[string]string{"idempotency-key": "6f1c2a1e-8d35-4f0e-9c2f-1f2e3d4c5b6a", "content-type": "application/json"}
	rest := events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/orders", Headers: headers, Body: `{"sku":"A1"}`,
		RequestContext: events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"principalId": "user-1"}}}
	httpAPI := events.APIGatewayV2HTTPRequest{RawPath: "/orders", Headers: headers, Body: `{"sku":"A1"}`,
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/orders"},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "user-2"}}}}}
	url := events.LambdaFunctionURLRequest{RawPath: "/orders", Headers: headers, Body: `{"sku":"A1"}`,
		RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/orders"},
			Authorizer: &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::1:user/u3"}}}}

	restH, err := idemlambda.RESTAPI(runner, func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		return events.APIGatewayProxyResponse{StatusCode: 201, Body: created}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	httpH, err := idemlambda.HTTPAPI(runner, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: created}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	urlH, err := idemlambda.FunctionURL(runner, func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		return events.LambdaFunctionURLResponse{StatusCode: 201, Body: created}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if r, err := restH(ctx, rest); err != nil || r.StatusCode != 201 {
		t.Fatalf("REST: %+v %v", r, err)
	}
	if r, err := httpH(ctx, httpAPI); err != nil || r.StatusCode != 201 {
		t.Fatalf("HTTP API: %+v %v", r, err)
	}
	if r, err := urlH(ctx, url); err != nil || r.StatusCode != 201 {
		t.Fatalf("function URL: %+v %v", r, err)
	}
	otherCaller := httpAPI
	otherCaller.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "user-9"}}}
	noKey := httpAPI
	noKey.Headers = map[string]string{"content-type": "application/json"}

	tests := []struct {
		name   string
		kind   string
		event  any
		code   int
		source string
	}{
		{"rest", "rest", rest, exitOK, "rest request POST /orders, caller principal"},
		{"http api", "httpapi", httpAPI, exitOK, "httpapi request POST /orders, caller sub"},
		{"function url", "url", url, exitOK, "url request POST /orders, caller iam"},
		{"another caller", "httpapi", otherCaller, exitNotFound, ""},
		{"no header", "httpapi", noKey, exitUsage, ""},
		{"wrong kind", "url", rest, exitUsage, ""},
	}
	hashes := map[string]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw, _ := json.Marshal(tc.event)
			file := writeFile(t, "req.json", string(raw))
			r := mustCmd(t, tc.code, time.Now(), nil, "inspect", "--table", f.table, "--http-event", file, "--kind", tc.kind, "--json")
			if tc.code != exitOK {
				return
			}
			v := decodeJSON[inspectView](t, r.stdout)
			if v.Record.State != stateSucceeded || v.Record.ResultBytes == 0 || v.Source != tc.source {
				t.Errorf("view = %+v %+v, want succeeded with a result, source %q", v, *v.Record, tc.source)
			}
			if strings.Contains(r.stdout, "user-") || strings.Contains(r.stdout, headers["idempotency-key"]) {
				t.Errorf("output shows the caller or the header:\n%s", r.stdout)
			}
			hashes[v.KeyHash] = true
		})
	}
	if len(hashes) != 3 {
		t.Errorf("the three callers' records have %d distinct key hashes, want 3", len(hashes))
	}
}

// A message looked up with another action than the function's finds no record: the error
// says which flags made the key, and that the key hides them.
func TestInspectWrongAction(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	msg := events.SQSMessage{MessageId: "m-9", Body: `{"event_id":"e-9"}`}
	key, err := idemlambda.SQSKey(idemlambda.KeyFromBodyField("event_id"), "append-ledger", msg)
	if err != nil {
		t.Fatal(err)
	}
	f.put(t, key, spec{status: core.StatusFailed, errText: "poison", done: time.Minute})
	raw, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{msg}})
	file := writeFile(t, "event.json", string(raw))
	mustCmd(t, exitOK, t0, nil, "inspect", "--table", f.table, "--sqs-event", file, "--key-source", "body:event_id", "--action", "append-ledger")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"wrong action", []string{"--sqs-event", file, "--key-source", "body:event_id", "--action", "append-ledgr"},
			[]string{`If a record was expected, check --action "append-ledgr" and --key-source "body:event_id"`, "passes to idemlambda.SQS",
				"the key is a hash of both", "--key-prefix (the store's ddbstore.WithKeyPrefix; none was given)"}},
		{"wrong prefix", []string{"--sqs-event", file, "--key-source", "body:event_id", "--action", "append-ledger", "--key-prefix", "orders#"},
			[]string{`--key-prefix "orders#" (the store's ddbstore.WithKeyPrefix)`}},
		{"key", []string{"--key", "evt:other:key"}, []string{"check the key (as the function passes it to Runner.Do)"}},
	}
	for _, tc := range tests {
		for _, command := range [][]string{{"inspect"}, {"release", "--yes"}} {
			r := mustCmd(t, exitNotFound, t0, nil, append(append(command, "--table", f.table), tc.args...)...)
			for _, want := range tc.want {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("%s, %s: stderr lacks %q:\n%s", tc.name, command[0], want, r.stderr)
				}
			}
		}
	}
}

// The next call's decision follows the runner's default for the source: an
// SQS message, whose queue limits its deliveries, has no bound (a
// retryable failure after 6 receives runs again on a redrive); a key has
// idem.DefaultMaxAttempts; --max-attempts says the runner's own.
func TestInspectBoundFollowsTheSource(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	runner, err := idem.New(f.store, idem.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	handler, err := idemlambda.SQS(runner, "notify", idemlambda.KeyFromBodyField("event_id"),
		func(context.Context, events.SQSMessage) ([]byte, error) { return nil, errors.New("smtp said no") })
	if err != nil {
		t.Fatal(err)
	}
	msg := events.SQSMessage{MessageId: "m-3", Body: `{"event_id":"e-3"}`, EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:q"}
	for range idem.DefaultMaxAttempts + 1 {
		if _, err := handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}}); err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{msg}})
	eventFile := writeFile(t, "event.json", string(raw))
	key, err := idemlambda.SQSKey(idemlambda.KeyFromBodyField("event_id"), "notify", msg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, tc := range []struct {
		name   string
		args   []string
		action string
		max    int
	}{
		{"an SQS message", []string{"--sqs-event", eventFile, "--key-source", "body:event_id", "--action", "notify"}, "execute", 0},
		{"a key", []string{"--key", key}, "reject", idem.DefaultMaxAttempts},
		{"a key, with the runner's bound", []string{"--key", key, "--max-attempts", "10"}, "execute", 10},
	} {
		v := decodeJSON[inspectView](t, mustCmd(t, exitOK, now, nil, append([]string{"inspect", "--table", f.table, "--json"}, tc.args...)...).stdout)
		if v.Record == nil || v.Record.Attempts != idem.DefaultMaxAttempts+1 || v.NextCall == nil || v.NextCall.Action != tc.action || v.NextCall.MaxAttempts != tc.max {
			t.Errorf("%s: record %+v, next call %+v; want %d attempts, %s under max attempts %d (0: none)", tc.name, v.Record, v.NextCall, idem.DefaultMaxAttempts+1, tc.action, tc.max)
		}
	}
	r := mustCmd(t, exitOK, now, nil, "inspect", "--table", f.table, "--sqs-event", eventFile, "--key-source", "body:event_id", "--action", "notify")
	if !strings.Contains(r.stdout, "(with the same payload, no bound on attempts)") {
		t.Errorf("inspect of the SQS message:\n%s\nwant the next call without a bound", r.stdout)
	}
	mustCmd(t, exitUsage, now, nil, "inspect", "--table", f.table, "--key", key, "--max-attempts", "-1")
}
