package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem/examples/orders"
	"github.com/idemgo/idem/internal/devserver"
	idemlambda "github.com/idemgo/idem/lambda"
)

// albEvent returns POST /orders as an ALB target group sends it: header
// names in lower case, in "multiValueHeaders" when the target group has
// multi-value headers enabled, else in "headers"; the query string apart;
// the identity of the user a listener rule authenticated in
// x-amzn-oidc-identity (none when user is empty).
func albEvent(multi bool, key, user, body string, extra map[string]string) map[string]any {
	h := map[string]string{
		"accept": "application/json", "content-type": "application/json", "content-length": strconv.Itoa(len(body)),
		"host": "orders-1234567890.us-east-1.elb.amazonaws.com", "user-agent": "curl/8.5.0",
		"x-amzn-trace-id": "Root=1-67a0c2b1-1234567890abcdef01234567", "x-forwarded-for": "198.51.100.7",
		"x-forwarded-port": "443", "x-forwarded-proto": "https",
	}
	if key != "" {
		h["idempotency-key"] = key
	}
	if user != "" {
		h[orders.ALBIdentityHeader] = user
	}
	for k, v := range extra {
		h[k] = v
	}
	ev := map[string]any{
		"requestContext":  map[string]any{"elb": map[string]any{"targetGroupArn": "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/orders/6d0ecf831eec9f09"}},
		"httpMethod":      "POST",
		"path":            "/orders",
		"body":            body,
		"isBase64Encoded": false,
	}
	if !multi {
		ev["headers"], ev["queryStringParameters"] = h, map[string]string{}
		return ev
	}
	mh := map[string][]string{}
	for k, v := range h {
		mh[k] = []string{v}
	}
	ev["multiValueHeaders"], ev["multiValueQueryStringParameters"] = mh, map[string][]string{}
	return ev
}

// albAnswer is an ALB function's answer with its headers read in the
// request's mode.
type albAnswer struct {
	events.ALBTargetGroupResponse
	multi bool
}

func (a albAnswer) header(name string) string {
	if !a.multi {
		return a.Headers[name]
	}
	if vs := a.MultiValueHeaders[name]; len(vs) == 1 {
		return vs[0]
	}
	return ""
}

func (s *stack) alb(r *devserver.RIE, multi bool, ev map[string]any) albAnswer {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 30*time.Second)
	defer cancel()
	status, body, err := r.Invoke(ctx, mustJSON(s.t, ev))
	var a albAnswer
	if err == nil {
		err = json.Unmarshal(body, &a.ALBTargetGroupResponse)
	}
	if err != nil || status != 200 || a.StatusCode == 0 {
		s.t.Fatalf("ALB answer %d %s: %v", status, body, err)
	}
	a.multi = multi
	if multi && a.Headers != nil || !multi && a.MultiValueHeaders != nil {
		s.t.Errorf("answered in the other header mode: %s", body)
	}
	return a
}

func (s *stack) wantALBProblem(step string, a albAnswer, status int, problem string) {
	s.t.Helper()
	var p idemlambda.Problem
	if a.StatusCode != status || a.header("Content-Type") != idemlambda.ProblemContentType || a.StatusDescription == "" ||
		json.Unmarshal([]byte(a.Body), &p) != nil || p.Type != idemlambda.ProblemTypeBase+problem {
		s.t.Errorf("%s: got %d %q %v %v %s; want %d %s", step, a.StatusCode, a.StatusDescription, a.Headers, a.MultiValueHeaders, a.Body, status, problem)
	}
}

func albOrderID(t *testing.T, a albAnswer) string {
	t.Helper()
	var p orders.Placed
	if err := json.Unmarshal([]byte(a.Body), &p); err != nil || p.OrderID == "" {
		t.Fatalf("body %q: %v", a.Body, err)
	}
	return p.OrderID
}

// The orders API behind an ALB target group, in both header modes: replay
// in the request's mode, keys scoped by the authenticated user, 422, 400,
// a base64 body, a 5xx not stored, and a 409 from a concurrent request in a
// second sandbox; one order per real execution.
func TestALB(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	a := s.startWith("orders-alb", holdTimeout, true)
	b := s.start("orders-alb")
	var want []string
	for _, multi := range []bool{false, true} {
		key := func(n int) string {
			return fmt.Sprintf("7c1e5a2b-%04d-4c2e-9d1a-%012d", map[bool]int{false: 1, true: 2}[multi], n)
		}
		step := func(name string) string { return fmt.Sprintf("multi %v: %s", multi, name) }

		first := s.alb(a, multi, albEvent(multi, key(1), "alice", orderBody, nil))
		if first.StatusCode != 201 || first.StatusDescription != "201 Created" || first.header(idemlambda.HeaderReplayed) != "" || first.header("Location") == "" {
			t.Fatalf("%s: %+v", step("first"), first)
		}
		id := albOrderID(t, first)
		replay := s.alb(b, multi, albEvent(multi, key(1), "alice", " {\"items\":[{\"sku\":\"book\",\"qty\":2,\"price_cents\":1250}], \"customer_id\":\"c-42\"}", nil))
		if replay.StatusCode != 201 || replay.header(idemlambda.HeaderReplayed) != "true" || albOrderID(t, replay) != id || replay.header("Location") != "/orders/"+id {
			t.Errorf("%s: %+v; want order %s replayed", step("replay"), replay, id)
		}
		bob := s.alb(a, multi, albEvent(multi, key(1), "bob", orderBody, nil))
		if bob.StatusCode != 201 || bob.header(idemlambda.HeaderReplayed) != "" || albOrderID(t, bob) == id {
			t.Errorf("%s: %+v; want a fresh order of bob's", step("another user, same key"), bob)
		}
		s.wantALBProblem(step("reuse"), s.alb(a, multi, albEvent(multi, key(1), "alice", `{"customer_id":"c-42","items":[{"sku":"pen","qty":1,"price_cents":100}]}`, nil)), 422, idemlambda.ProblemKeyReused)
		s.wantALBProblem(step("missing key"), s.alb(a, multi, albEvent(multi, "", "alice", orderBody, nil)), 400, idemlambda.ProblemMissingKey)

		bin := albEvent(multi, key(2), "alice", base64.StdEncoding.EncodeToString([]byte(orderBody)), map[string]string{"content-type": "application/octet-stream"})
		bin["isBase64Encoded"] = true
		placed := s.alb(a, multi, bin)
		if placed.StatusCode != 201 {
			t.Fatalf("%s: %+v", step("base64 body"), placed)
		}
		failed := s.alb(a, multi, albEvent(multi, key(3), "alice", orderBody, map[string]string{"x-test-fail": "503"}))
		retried := s.alb(b, multi, albEvent(multi, key(3), "alice", orderBody, nil))
		if failed.StatusCode != 503 || retried.StatusCode != 201 || retried.header(idemlambda.HeaderReplayed) != "" {
			t.Errorf("%s: %d then %d %v; want 503, then a fresh 201", step("5xx"), failed.StatusCode, retried.StatusCode, retried.header(idemlambda.HeaderReplayed))
		}
		want = append(want, id, albOrderID(t, bob), albOrderID(t, placed), albOrderID(t, retried))
	}
	want = append(want, s.albConflict(a, b))
	var got []string
	for _, it := range s.scan(s.ordersTable) {
		got = append(got, it[orders.OrdersKeyAttr])
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("orders table = %v, want %v", got, want)
	}
	if n := len(s.sqs.bodies()); n != len(want) {
		t.Errorf("sent %d OrderPlaced messages, want %d", n, len(want))
	}
}

// albConflict: a request held in progress in sandbox a; its duplicate reaches b and
// gets 409 with Retry-After in multiValueHeaders. It returns the order the
// slow request placed.
func (s *stack) albConflict(a, b *devserver.RIE) string {
	const slowKey = "7c1e5a2b-3333-4c2e-9d1a-000000000003"
	key, err := idemlambda.HTTPKey(slowKey, []string{"header:" + orders.ALBIdentityHeader + "=carol"})
	if err != nil {
		s.t.Fatal(err)
	}
	slow := make(chan albAnswer, 1)
	holdFile, release := hold(s.t)
	go func() {
		var ans albAnswer
		_, out, err := a.Invoke(context.Background(), mustJSON(s.t, albEvent(true, slowKey, "carol", orderBody, map[string]string{"x-test-hold-file": holdFile})))
		if err == nil {
			_ = json.Unmarshal(out, &ans.ALBTargetGroupResponse)
		}
		slow <- ans
	}()
	s.waitInProgress("orders-alb", key)
	conflict := s.alb(b, true, albEvent(true, slowKey, "carol", orderBody, nil))
	s.wantALBProblem("concurrent", conflict, 409, idemlambda.ProblemInProgress)
	if ra, err := strconv.Atoi(conflict.header("Retry-After")); err != nil || ra < 1 || ra > holdTimeout+1 || conflict.StatusDescription != "409 Conflict" {
		s.t.Errorf("409: Retry-After %q, %q", conflict.header("Retry-After"), conflict.StatusDescription)
	}
	release()
	done := <-slow
	done.multi = true
	if done.StatusCode != 201 {
		s.t.Fatalf("slow request: %+v", done)
	}
	return albOrderID(s.t, done)
}
