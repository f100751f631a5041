package idemlambda_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	idemlambda "github.com/idemgo/idem/lambda"
)

// albReq returns a request as an ALB sends it: lower-case header names, in
// headers, or with multi set in multiValueHeaders (a target group with
// multi-value headers enabled), and no caller identity.
func albReq(multi bool, method, path, key, body string, extra ...string) events.ALBTargetGroupRequest {
	h := map[string]string{
		"accept": "*/*", "content-type": "application/json", "host": "orders-1234.us-east-1.elb.amazonaws.com",
		"user-agent": "curl/8.5.0", "x-amzn-trace-id": "Root=1-67a0c2b1-1234567890abcdef01234567",
		"x-forwarded-for": "198.51.100.7", "x-forwarded-port": "443", "x-forwarded-proto": "https",
	}
	if key != "" {
		h["idempotency-key"] = key
	}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	r := events.ALBTargetGroupRequest{
		HTTPMethod: method, Path: path, Body: body,
		RequestContext: events.ALBTargetGroupRequestContext{ELB: events.ELBContext{TargetGroupArn: "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/orders/6d0ecf831eec9f09"}},
	}
	if !multi {
		r.Headers, r.QueryStringParameters = h, map[string]string{}
		return r
	}
	r.MultiValueHeaders, r.MultiValueQueryStringParameters = map[string][]string{}, map[string][]string{}
	for k, v := range h {
		r.MultiValueHeaders[k] = []string{v}
	}
	return r
}

// albHeader is a response header in the mode of the request.
func albHeader(multi bool, r events.ALBTargetGroupResponse, name string) string {
	if !multi {
		return r.Headers[name]
	}
	if vs := r.MultiValueHeaders[name]; len(vs) == 1 {
		return vs[0]
	}
	return ""
}

func TestALB(t *testing.T) {
	t.Parallel()
	for _, multi := range []bool{false, true} {
		t.Run(fmt.Sprintf("multi-value headers %v", multi), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var runs counter
			handle, err := idemlambda.ALB(e.runner, func(ctx context.Context, r events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
				n := runs.inc("all")
				resp := events.ALBTargetGroupResponse{StatusCode: 201, StatusDescription: "201 Created", Body: fmt.Sprintf(`{"order":%d}`, n)}
				if multi {
					resp.MultiValueHeaders = map[string][]string{"content-type": {"application/json"}}
				} else {
					resp.Headers = map[string]string{"content-type": "application/json"}
				}
				return resp, nil
			}, idemlambda.WithClock(e.clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			ctx := e.ctx(t, 10*time.Second)
			b64 := func(r events.ALBTargetGroupRequest) events.ALBTargetGroupRequest {
				r.Body, r.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(r.Body)), true
				return r
			}
			steps := []struct {
				name     string
				req      events.ALBTargetGroupRequest
				status   int
				body     string
				replayed bool
				problem  string
				runs     int
			}{
				{"first", albReq(multi, "POST", "/orders", "k-1", `{"sku":"mug"}`), 201, `{"order":1}`, false, "", 1},
				{"retry replays", albReq(multi, "POST", "/orders", "k-1", `{ "sku": "mug" }`), 201, `{"order":1}`, true, "", 1},
				{"base64 body of the same bytes replays", b64(albReq(multi, "POST", "/orders", "k-1", `{"sku":"mug"}`)), 201, `{"order":1}`, true, "", 1},
				{"other body is 422", albReq(multi, "POST", "/orders", "k-1", `{"sku":"pen"}`), 422, "", false, idemlambda.ProblemKeyReused, 1},
				{"other path is 422", albReq(multi, "POST", "/carts", "k-1", `{"sku":"mug"}`), 422, "", false, idemlambda.ProblemKeyReused, 1},
				{"missing key is 400", albReq(multi, "POST", "/orders", "", `{"sku":"mug"}`), 400, "", false, idemlambda.ProblemMissingKey, 1},
				{"invalid key is 400", albReq(multi, "POST", "/orders", "a b", `{"sku":"mug"}`), 400, "", false, idemlambda.ProblemInvalidKey, 1},
				{"bad base64 is 400", func() events.ALBTargetGroupRequest {
					r := albReq(multi, "POST", "/orders", "k-2", "%%%")
					r.IsBase64Encoded = true
					return r
				}(), 400, "", false, idemlambda.ProblemInvalidBody, 1},
				{"anonymous callers share keys, even with an OIDC header", albReq(multi, "POST", "/orders", "k-1", `{"sku":"mug"}`, "x-amzn-oidc-identity", "alice"), 201, `{"order":1}`, true, "", 1},
			}
			for i, s := range steps {
				resp, err := handle(ctx, s.req)
				if err != nil {
					t.Fatalf("step %d (%s): %v", i, s.name, err)
				}
				if resp.StatusCode != s.status || (s.body != "" && resp.Body != s.body) || runs.get("all") != s.runs {
					t.Errorf("step %d (%s): got %d %s after %d runs; want %d %s after %d", i, s.name, resp.StatusCode, resp.Body, runs.get("all"), s.status, s.body, s.runs)
				}
				if got := albHeader(multi, resp, idemlambda.HeaderReplayed) == "true"; got != s.replayed {
					t.Errorf("step %d (%s): replayed = %v want %v (headers %v, multi %v)", i, s.name, got, s.replayed, resp.Headers, resp.MultiValueHeaders)
				}
				if (multi && resp.Headers != nil) || (!multi && resp.MultiValueHeaders != nil) {
					t.Errorf("step %d (%s): answered in the other header mode: %v %v", i, s.name, resp.Headers, resp.MultiValueHeaders)
				}
				if s.problem != "" {
					want := fmt.Sprintf("%d %s", s.status, map[int]string{400: "Bad Request", 422: "Unprocessable Entity"}[s.status])
					if albHeader(multi, resp, "Content-Type") != idemlambda.ProblemContentType || resp.StatusDescription != want {
						t.Errorf("step %d (%s): problem answer %q %v %v", i, s.name, resp.StatusDescription, resp.Headers, resp.MultiValueHeaders)
					}
				}
			}
		})
	}
}

// A 409 from an ALB carries Retry-After in the request's header mode.
func TestALBInProgress(t *testing.T) {
	t.Parallel()
	for _, multi := range []bool{false, true} {
		e := newEnv(t)
		handle, err := idemlambda.ALB(e.runner, func(ctx context.Context, r events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
			return events.ALBTargetGroupResponse{StatusCode: 200}, nil
		}, idemlambda.WithClock(e.clock.Now))
		if err != nil {
			t.Fatal(err)
		}
		key, _ := idemlambda.HTTPKey("k-1", nil)
		p, _ := idemlambda.RequestPayload("POST", "/orders", "{}", false)
		e.hold(t, key, p, e.clock.Now().Add(1500*time.Millisecond))
		resp, _ := handle(e.ctx(t, 10*time.Second), albReq(multi, "POST", "/orders", "k-1", "{}"))
		if resp.StatusCode != 409 || albHeader(multi, resp, "Retry-After") != "2" || resp.StatusDescription != "409 Conflict" {
			t.Errorf("multi %v: got %d %q %v %v; want 409 with Retry-After 2", multi, resp.StatusCode, resp.StatusDescription, resp.Headers, resp.MultiValueHeaders)
		}
	}
}

// WithIdentityHeader scopes an ALB's keys by the user its listener rule
// authenticated.
func TestALBIdentityHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs counter
	handle, err := idemlambda.ALB(e.runner, func(ctx context.Context, r events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		return events.ALBTargetGroupResponse{StatusCode: 201, Body: fmt.Sprintf("run %d", runs.inc("all"))}, nil
	}, idemlambda.WithIdentityHeader("X-Amzn-Oidc-Identity"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := e.ctx(t, 10*time.Second)
	steps := []struct {
		name, who string
		multi     bool
		body      string
		replayed  bool
	}{
		{"alice", "alice", false, "run 1", false},
		{"bob has his own key space", "bob", true, "run 2", false},
		{"alice again replays, in either header mode", "alice", true, "run 1", true},
		{"anonymous is a third", "", false, "run 3", false},
	}
	for i, s := range steps {
		var extra []string
		if s.who != "" {
			extra = []string{"x-amzn-oidc-identity", s.who}
		}
		resp, _ := handle(ctx, albReq(s.multi, "POST", "/orders", "k-1", "{}", extra...))
		if resp.Body != s.body || (albHeader(s.multi, resp, idemlambda.HeaderReplayed) == "true") != s.replayed {
			t.Errorf("step %d (%s): got %d %q %v %v; want %q replayed %v", i, s.name, resp.StatusCode, resp.Body, resp.Headers, resp.MultiValueHeaders, s.body, s.replayed)
		}
	}
	alice, _ := idemlambda.HTTPKey("k-1", []string{"header:x-amzn-oidc-identity=alice"})
	if _, err := e.store.Get(context.Background(), alice, e.clock.Now()); err != nil {
		t.Errorf("alice's record is not under HTTPKey(value, [header:x-amzn-oidc-identity=alice]): %v", err)
	}
	for _, bad := range []string{"", "x y", "a:b"} {
		if _, err := idemlambda.ALB(e.runner, func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
			return events.ALBTargetGroupResponse{}, nil
		}, idemlambda.WithIdentityHeader(bad)); err == nil {
			t.Errorf("WithIdentityHeader(%q) accepted", bad)
		}
	}
}
