package idemlambda_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
)

// FuzzKeyFromBodyField: never panics; a found identity is never empty, and
// a key derived from it is valid; a string put at a path is found there.
func FuzzKeyFromBodyField(f *testing.F) {
	f.Add(`{"event_id":"e-1"}`, "event_id", "x")
	f.Add(`{"detail":{"id":42}}`, "detail.id", "y")
	f.Add(`[1,2]`, "0", "")
	f.Add(`{"a":null}`, "a", "z")
	f.Add(`not json`, "a", "é")
	f.Add(`{"a":{"b":{"c":"d"}}} trailing`, "a.b.c", "q")
	f.Fuzz(func(t *testing.T, doc, path, value string) {
		src := idemlambda.KeyFromBodyField(path)
		if id, err := src.EventID(events.SQSMessage{Body: doc}); err == nil {
			if id == "" {
				t.Fatalf("empty identity from %q at %q", doc, path)
			}
		}
		if value == "" || path == "" || !utf8.ValidString(value) || !utf8.ValidString(path) {
			return
		}
		// Build {"p1":{"p2":...value}} and look the value up again.
		var v any = value
		parts := strings.Split(path, ".")
		for i := len(parts) - 1; i >= 0; i-- {
			v = map[string]any{parts[i]: v}
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		id, err := src.EventID(events.SQSMessage{Body: string(b)})
		if err != nil || id != value {
			t.Fatalf("EventID(%s, %q) = %q, %v; want %q", b, path, id, err, value)
		}
		key, err := idemlambda.EventKey(id, "act")
		if err == nil {
			if verr := core.ValidateKey(key); verr != nil {
				t.Fatalf("EventKey gave invalid key %q: %v", key, verr)
			}
		}
	})
}

// FuzzIdempotencyKeyHeader: never panics; an accepted value is 1 to 255
// visible ASCII characters other than a comma and gives a valid stored key
// that depends on it.
func FuzzIdempotencyKeyHeader(f *testing.F) {
	f.Add("8e03978e-40d5-43e8-bc93-6894a57f9324", "sub=alice")
	f.Add(`"quoted"`, "")
	f.Add("", "iam=arn:aws:iam::1:user/x")
	f.Add("a\x00b", "")
	f.Add("a,b", "")
	f.Fuzz(func(t *testing.T, header, identity string) {
		v, present, err := idemlambda.IdempotencyKeyHeader(map[string]string{"Idempotency-Key": header}, nil)
		if !present {
			t.Fatal("a present header was not found")
		}
		if err != nil {
			return
		}
		if len(v) < 1 || len(v) > idemlambda.MaxHeaderKeyLen {
			t.Fatalf("accepted %q of length %d", v, len(v))
		}
		for i := 0; i < len(v); i++ {
			if v[i] < 0x21 || v[i] > 0x7e || v[i] == ',' {
				t.Fatalf("accepted %q with byte %#x", v, v[i])
			}
		}
		var id []string
		if identity != "" {
			id = []string{identity}
		}
		key, err := idemlambda.HTTPKey(v, id)
		if err != nil {
			t.Fatalf("HTTPKey(%q, %q): %v", v, id, err)
		}
		if verr := core.ValidateKey(key); verr != nil {
			t.Fatalf("HTTPKey gave invalid key %q: %v", key, verr)
		}
		if other, err := idemlambda.HTTPKey(v+"x", id); err == nil && other == key {
			t.Fatalf("two header values share the key %q", key)
		}
	})
}

// FuzzRequestPayload: never panics; the payload is always fingerprintable;
// a body and its base64 form fingerprint the same.
func FuzzRequestPayload(f *testing.F) {
	f.Add("POST", "/orders", `{"a":1}`)
	f.Add("POST", "/orders", "a=1&b=2")
	f.Add("PUT", "/x", "\xff\x00")
	f.Add("POST", "", "")
	f.Add("POST", "/d", `{"a":1,"a":2}`)
	f.Fuzz(func(t *testing.T, method, path, body string) {
		p, err := idemlambda.RequestPayload(method, path, body, false)
		if errors.Is(err, core.ErrInvalidPayload) && strings.Count(body, "[")+strings.Count(body, "{") > idemlambda.MaxBodyDepth {
			return // nested too deep: refused
		}
		if err != nil {
			t.Fatalf("RequestPayload: %v", err)
		}
		fp, err := core.Fingerprint(p)
		if err != nil {
			t.Fatalf("payload %s does not fingerprint: %v", p, err)
		}
		p64, err := idemlambda.RequestPayload(method, path, base64.StdEncoding.EncodeToString([]byte(body)), true)
		if err != nil {
			t.Fatalf("base64 RequestPayload: %v", err)
		}
		if fp64, _ := core.Fingerprint(p64); fp64 != fp {
			t.Fatalf("base64 body fingerprints differently: %s vs %s", p, p64)
		}
	})
}

// FuzzSQSEvent: any SQS event JSON is handled without a panic, every
// reported item is a message id of the batch, and a message is reported at
// most once.
func FuzzSQSEvent(f *testing.F) {
	f.Add(`{"Records":[{"messageId":"m1","body":"{\"event_id\":\"e1\"}","eventSourceARN":"arn:aws:sqs:eu-west-1:1:q"}]}`)
	f.Add(`{"Records":[{"messageId":"m1","body":"{\"event_id\":\"e1\"}","attributes":{"MessageGroupId":"g"}},{"messageId":"m2","body":"{}","attributes":{"MessageGroupId":"g"}}]}`)
	f.Add(`{"Records":[{"messageId":"","body":""},{"messageId":"m","body":"{\"event_id\":1.5e3}"}]}`)
	f.Fuzz(func(t *testing.T, raw string) {
		var ev events.SQSEvent
		if json.Unmarshal([]byte(raw), &ev) != nil || len(ev.Records) > 50 {
			return
		}
		e := newEnv(t)
		handle, err := idemlambda.SQS(e.runner, "fuzz", idemlambda.KeyFromBodyField("event_id"),
			func(ctx context.Context, m events.SQSMessage) ([]byte, error) { return nil, nil })
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		resp, err := handle(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]int{}
		for _, m := range ev.Records {
			ids[m.MessageId]++
		}
		seen := map[string]int{}
		for _, f := range resp.BatchItemFailures {
			if ids[f.ItemIdentifier] == 0 {
				t.Fatalf("reported %q, not in the batch", f.ItemIdentifier)
			}
			seen[f.ItemIdentifier]++
			if seen[f.ItemIdentifier] > ids[f.ItemIdentifier] {
				t.Fatalf("reported %q more often than it was delivered", f.ItemIdentifier)
			}
		}
	})
}

// FuzzALBEvent decodes ALB target group requests as the runtime does and
// serves them: no panic, a valid status, and the handler runs at most once
// for a request and its replay.
func FuzzALBEvent(f *testing.F) {
	f.Add(`{"httpMethod":"POST","path":"/orders","headers":{"idempotency-key":"k-1"},"body":"{\"n\":1}"}`)
	f.Add(`{"httpMethod":"POST","path":"/orders","multiValueHeaders":{"Idempotency-Key":["a","b"]},"body":"e30=","isBase64Encoded":true}`)
	f.Add(`{"httpMethod":"","path":"","headers":{"Idempotency-Key":"\"\\\""},"body":"[[[[","isBase64Encoded":true}`)
	f.Fuzz(func(t *testing.T, raw string) {
		var req events.ALBTargetGroupRequest
		if json.Unmarshal([]byte(raw), &req) != nil {
			return
		}
		e := newEnv(t)
		runs := 0
		handle, err := idemlambda.ALB(e.runner, func(ctx context.Context, r events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
			runs++
			return events.ALBTargetGroupResponse{StatusCode: 201, Body: "made"}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for range 2 {
			resp, err := handle(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode < 100 || resp.StatusCode > 599 {
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
		if runs > 1 {
			_, ok, kerr := idemlambda.IdempotencyKeyHeader(req.Headers, req.MultiValueHeaders)
			if ok && kerr == nil {
				t.Fatalf("a keyed request ran %d times", runs)
			}
		}
	})
}
