package idemlambda_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
)

// v2Req returns a realistic HTTP API (payload 2.0) request.
func v2Req(method, path, key, body string) events.APIGatewayV2HTTPRequest {
	h := map[string]string{"content-type": "application/json", "user-agent": "curl/8.5.0"}
	if key != "" {
		h["idempotency-key"] = key
	}
	return events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: method + " " + path,
		RawPath:  path,
		Headers:  h,
		Body:     body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:  method + " " + path,
			AccountID: "123456789012",
			Stage:     "$default",
			RequestID: "req-" + key,
			APIID:     "abc123",
			HTTP:      events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "192.0.2.1"},
		},
	}
}

func withSub(r events.APIGatewayV2HTTPRequest, sub string) events.APIGatewayV2HTTPRequest {
	r.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": sub}},
	}
	return r
}

// orderAPI is a handler whose answer is driven by the body's "status" field
// (default 201); it counts its executions and numbers its responses.
type orderAPI struct{ runs counter }

func (a *orderAPI) handle(ctx context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	n := a.runs.inc("all")
	var b struct {
		Status int    `json:"status"`
		Fail   string `json:"fail"`
		Once   int    `json:"once_status"` // the status of the first answer with fail "once"
	}
	_ = json.Unmarshal([]byte(r.Body), &b)
	if b.Fail == "error" {
		return events.APIGatewayV2HTTPResponse{}, errors.New("database is on fire")
	}
	if b.Fail == "once" && n == 1 {
		if b.Once != 0 { // an answer that asks for a retry, with its Retry-After
			return events.APIGatewayV2HTTPResponse{StatusCode: b.Once, Headers: map[string]string{"Retry-After": "7"}, Body: `{"error":"try again"}`}, nil
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusServiceUnavailable, Body: `{"error":"try again"}`}, nil
	}
	status := b.Status
	if status == 0 {
		status = http.StatusCreated
	}
	return events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/json", "Location": fmt.Sprintf("/orders/%d", n)},
		Body:       fmt.Sprintf(`{"order_id":"ord-%d"}`, n),
	}, nil
}

func problemOf(t *testing.T, r events.APIGatewayV2HTTPResponse) idemlambda.Problem {
	t.Helper()
	if ct := r.Headers["Content-Type"]; ct != idemlambda.ProblemContentType {
		t.Fatalf("Content-Type = %q want %q (body %s)", ct, idemlambda.ProblemContentType, r.Body)
	}
	var p idemlambda.Problem
	if err := json.Unmarshal([]byte(r.Body), &p); err != nil {
		t.Fatalf("problem body %q: %v", r.Body, err)
	}
	if p.Status != r.StatusCode || p.Title == "" || !strings.HasPrefix(p.Type, idemlambda.ProblemTypeBase) {
		t.Fatalf("problem %+v does not match status %d", p, r.StatusCode)
	}
	return p
}

func TestHTTPAPI(t *testing.T) {
	type step struct {
		req      events.APIGatewayV2HTTPRequest
		advance  time.Duration // the fake clock moves before the step
		status   int
		problem  string // the problem type, for the wrapper's own answers
		replayed bool
		body     string // expected body, if not a problem
		retry    string // expected Retry-After
		runs     int    // handler executions after the step
	}
	body := `{"sku":"book","qty":1}`
	tests := []struct {
		name    string
		runOpts []idem.Option
		opts    []idemlambda.HTTPOption
		prepare func(t *testing.T, e *env)
		steps   []step
	}{
		{
			name: "first request executes, its retry replays",
			steps: []step{
				{req: v2Req("POST", "/orders", "k-1", body), status: 201, body: `{"order_id":"ord-1"}`, runs: 1},
				{req: v2Req("POST", "/orders", "k-1", body), status: 201, body: `{"order_id":"ord-1"}`, replayed: true, runs: 1},
				{req: v2Req("POST", "/orders", "k-1", " {\"qty\": 1, \"sku\": \"book\"}\n"), status: 201, body: `{"order_id":"ord-1"}`, replayed: true, runs: 1},
			},
		},
		{
			name: "another key executes again",
			steps: []step{
				{req: v2Req("POST", "/orders", "k-1", body), status: 201, body: `{"order_id":"ord-1"}`, runs: 1},
				{req: v2Req("POST", "/orders", "k-2", body), status: 201, body: `{"order_id":"ord-2"}`, runs: 2},
			},
		},
		{
			name: "missing key is 400",
			steps: []step{
				{req: v2Req("POST", "/orders", "", body), status: 400, problem: idemlambda.ProblemMissingKey, runs: 0},
			},
		},
		{
			name: "missing key passes through unkeyed when optional",
			opts: []idemlambda.HTTPOption{idemlambda.WithOptionalKey()},
			steps: []step{
				{req: v2Req("POST", "/orders", "", body), status: 201, body: `{"order_id":"ord-1"}`, runs: 1},
				{req: v2Req("POST", "/orders", "", body), status: 201, body: `{"order_id":"ord-2"}`, runs: 2},
				{req: v2Req("POST", "/orders", "bad key", body), status: 400, problem: idemlambda.ProblemInvalidKey, runs: 2},
			},
		},
		{
			name: "invalid keys are 400",
			steps: []step{
				{req: v2Req("POST", "/orders", "has space", body), status: 400, problem: idemlambda.ProblemInvalidKey},
				{req: v2Req("POST", "/orders", strings.Repeat("k", idemlambda.MaxHeaderKeyLen+1), body), status: 400, problem: idemlambda.ProblemInvalidKey},
				{req: v2Req("POST", "/orders", "naïve", body), status: 400, problem: idemlambda.ProblemInvalidKey},
				{req: v2Req("POST", "/orders", "tab\tkey", body), status: 400, problem: idemlambda.ProblemInvalidKey},
				{req: v2Req("POST", "/orders", `""`, body), status: 400, problem: idemlambda.ProblemInvalidKey},
				{req: v2Req("POST", "/orders", strings.Repeat("k", idemlambda.MaxHeaderKeyLen), body), status: 201, body: `{"order_id":"ord-1"}`, runs: 1},
			},
		},
		{
			name: "quoted key is the same key",
			steps: []step{
				{req: v2Req("POST", "/orders", `"abc"`, body), status: 201, body: `{"order_id":"ord-1"}`, runs: 1},
				{req: v2Req("POST", "/orders", `abc`, body), status: 201, body: `{"order_id":"ord-1"}`, replayed: true, runs: 1},
			},
		},
		{
			name: "same key with another body is 422",
			steps: []step{
				{req: v2Req("POST", "/orders", "k-1", body), status: 201, body: `{"order_id":"ord-1"}`, runs: 1},
				{req: v2Req("POST", "/orders", "k-1", `{"sku":"book","qty":2}`), status: 422, problem: idemlambda.ProblemKeyReused, runs: 1},
				{req: v2Req("POST", "/orders", "k-1", `qty=2`), status: 422, problem: idemlambda.ProblemKeyReused, runs: 1},
			},
		},
		{
			name: "same key on another path or method is 422",
			steps: []step{
				{req: v2Req("POST", "/orders", "k-1", body), status: 201, body: `{"order_id":"ord-1"}`, runs: 1},
				{req: v2Req("POST", "/carts", "k-1", body), status: 422, problem: idemlambda.ProblemKeyReused, runs: 1},
				{req: v2Req("PUT", "/orders", "k-1", body), status: 422, problem: idemlambda.ProblemKeyReused, runs: 1},
				{req: v2Req("POST", "/orders", "k-1", body), status: 201, body: `{"order_id":"ord-1"}`, replayed: true, runs: 1},
			},
		},
		{
			name: "comma-joined repeated key is 400",
			steps: []step{
				{req: v2Req("POST", "/orders", "k-1,k-2", body), status: 400, problem: idemlambda.ProblemInvalidKey, runs: 0},
				{req: v2Req("POST", "/orders", "k-1,k-1", body), status: 400, problem: idemlambda.ProblemInvalidKey, runs: 0},
			},
		},
		{
			name: "keys are scoped by caller",
			steps: []step{
				{req: withSub(v2Req("POST", "/orders", "k-1", body), "alice"), status: 201, body: `{"order_id":"ord-1"}`, runs: 1},
				{req: withSub(v2Req("POST", "/orders", "k-1", body), "bob"), status: 201, body: `{"order_id":"ord-2"}`, runs: 2},
				{req: withSub(v2Req("POST", "/orders", "k-1", `{"other":1}`), "bob"), status: 422, problem: idemlambda.ProblemKeyReused, runs: 2},
				{req: withSub(v2Req("POST", "/orders", "k-1", body), "alice"), status: 201, body: `{"order_id":"ord-1"}`, replayed: true, runs: 2},
				{req: v2Req("POST", "/orders", "k-1", body), status: 201, body: `{"order_id":"ord-3"}`, runs: 3},
			},
		},
		{
			name: "in progress is 409 with Retry-After rounded up",
			prepare: func(t *testing.T, e *env) {
				r := v2Req("POST", "/orders", "k-1", body)
				key, err := idemlambda.HTTPKey("k-1", nil)
				if err != nil {
					t.Fatal(err)
				}
				p, err := idemlambda.RequestPayload("POST", "/orders", r.Body, false)
				if err != nil {
					t.Fatal(err)
				}
				e.hold(t, key, p, e.clock.Now().Add(2300*time.Millisecond))
			},
			steps: []step{
				{req: v2Req("POST", "/orders", "k-1", body), status: 409, problem: idemlambda.ProblemInProgress, retry: "3", runs: 0},
				{req: v2Req("POST", "/orders", "k-1", body), advance: 2 * time.Second, status: 409, problem: idemlambda.ProblemInProgress, retry: "1", runs: 0},
				{req: v2Req("POST", "/orders", "k-1", `{"other":1}`), status: 422, problem: idemlambda.ProblemKeyReused, runs: 0},
				{req: v2Req("POST", "/orders", "k-1", body), advance: time.Second, status: 201, body: `{"order_id":"ord-1"}`, runs: 1},
			},
		},
		{
			name: "4xx responses are stored and replayed",
			steps: []step{
				{req: v2Req("POST", "/orders", "k-1", `{"status":409}`), status: 409, body: `{"order_id":"ord-1"}`, runs: 1},
				{req: v2Req("POST", "/orders", "k-1", `{"status":409}`), status: 409, body: `{"order_id":"ord-1"}`, replayed: true, runs: 1},
			},
		},
		{
			name: "5xx is not stored: the retry runs again, then replays",
			steps: []step{
				{req: v2Req("POST", "/orders", "k-1", `{"fail":"once"}`), status: 503, body: `{"error":"try again"}`, runs: 1},
				{req: v2Req("POST", "/orders", "k-1", `{"fail":"once"}`), status: 201, body: `{"order_id":"ord-2"}`, runs: 2},
				{req: v2Req("POST", "/orders", "k-1", `{"fail":"once"}`), status: 201, body: `{"order_id":"ord-2"}`, replayed: true, runs: 2},
			},
		},
		{
			name: "429 is not stored: the retry after Retry-After runs again",
			steps: []step{
				{req: v2Req("POST", "/orders", "k-1", `{"fail":"once","once_status":429}`), status: 429, body: `{"error":"try again"}`, retry: "7", runs: 1},
				{req: v2Req("POST", "/orders", "k-1", `{"fail":"once","once_status":429}`), status: 201, body: `{"order_id":"ord-2"}`, runs: 2},
				{req: v2Req("POST", "/orders", "k-1", `{"fail":"once","once_status":429}`), status: 201, body: `{"order_id":"ord-2"}`, replayed: true, runs: 2},
			},
		},
		{
			name: "408 is not stored: the retry runs again",
			steps: []step{
				{req: v2Req("POST", "/orders", "k-1", `{"fail":"once","once_status":408}`), status: 408, body: `{"error":"try again"}`, retry: "7", runs: 1},
				{req: v2Req("POST", "/orders", "k-1", `{"fail":"once","once_status":408}`), status: 201, body: `{"order_id":"ord-2"}`, runs: 2},
			},
		},
		{
			name:    "429 retries use up the attempts like 5xx",
			runOpts: []idem.Option{idem.WithMaxAttempts(2)},
			steps: []step{
				{req: v2Req("POST", "/orders", "k-1", `{"status":429}`), status: 429, body: `{"order_id":"ord-1"}`, runs: 1},
				{req: v2Req("POST", "/orders", "k-1", `{"status":429}`), status: 429, body: `{"order_id":"ord-2"}`, runs: 2},
				{req: v2Req("POST", "/orders", "k-1", `{"status":429}`), status: 500, problem: idemlambda.ProblemRetriesExhausted, runs: 2},
			},
		},
		{
			name: "handler error is a 500 problem, not stored",
			steps: []step{
				{req: v2Req("POST", "/orders", "k-1", `{"fail":"error"}`), status: 500, problem: idemlambda.ProblemInternal, runs: 1},
				{req: v2Req("POST", "/orders", "k-1", `{"fail":"error"}`), status: 500, problem: idemlambda.ProblemInternal, runs: 2},
			},
		},
		{
			name:    "5xx retries use up the attempts, then retries-exhausted",
			runOpts: []idem.Option{idem.WithMaxAttempts(2)},
			steps: []step{
				{req: v2Req("POST", "/orders", "k-1", `{"status":502}`), status: 502, body: `{"order_id":"ord-1"}`, runs: 1},
				{req: v2Req("POST", "/orders", "k-1", `{"status":502}`), status: 502, body: `{"order_id":"ord-2"}`, runs: 2},
				{req: v2Req("POST", "/orders", "k-1", `{"status":502}`), status: 500, problem: idemlambda.ProblemRetriesExhausted, runs: 2},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.runOpts...)
			api := &orderAPI{}
			handle, err := idemlambda.HTTPAPI(e.runner, api.handle, append([]idemlambda.HTTPOption{idemlambda.WithClock(e.clock.Now)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			if tc.prepare != nil {
				tc.prepare(t, e)
			}
			for i, s := range tc.steps {
				e.clock.Advance(s.advance)
				resp, err := handle(e.ctx(t, 10*time.Second), s.req)
				if err != nil {
					t.Fatalf("step %d: err = %v", i, err)
				}
				if resp.StatusCode != s.status {
					t.Fatalf("step %d: status = %d want %d (body %s)", i, resp.StatusCode, s.status, resp.Body)
				}
				if s.problem != "" {
					if p := problemOf(t, resp); p.Type != idemlambda.ProblemTypeBase+s.problem {
						t.Errorf("step %d: problem type = %q want %q", i, p.Type, s.problem)
					}
				} else if resp.Body != s.body {
					t.Errorf("step %d: body = %s want %s", i, resp.Body, s.body)
				}
				if got := resp.Headers[idemlambda.HeaderReplayed] == "true"; got != s.replayed {
					t.Errorf("step %d: replayed header = %q want replayed %v", i, resp.Headers[idemlambda.HeaderReplayed], s.replayed)
				}
				if s.replayed && resp.Headers["Location"] == "" {
					t.Errorf("step %d: replay lost the stored headers: %v", i, resp.Headers)
				}
				if got := resp.Headers["Retry-After"]; got != s.retry {
					t.Errorf("step %d: Retry-After = %q want %q", i, got, s.retry)
				}
				if got := api.runs.get("all"); got != s.runs {
					t.Errorf("step %d: handler ran %d times in all, want %d", i, got, s.runs)
				}
			}
		})
	}
}

func TestRESTAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs counter
	handle, err := idemlambda.RESTAPI(e.runner, func(ctx context.Context, r events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		n := runs.inc("all")
		return events.APIGatewayProxyResponse{StatusCode: 201, Body: fmt.Sprintf("created %d", n)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	req := func(key, principal, b string, b64 bool) events.APIGatewayProxyRequest {
		r := events.APIGatewayProxyRequest{
			Resource: "/orders", Path: "/orders", HTTPMethod: "POST",
			Headers:           map[string]string{"Idempotency-Key": key},
			MultiValueHeaders: map[string][]string{"Idempotency-Key": {key}},
			Body:              b, IsBase64Encoded: b64,
			RequestContext: events.APIGatewayProxyRequestContext{
				Authorizer: map[string]any{"principalId": principal},
				Identity:   events.APIGatewayRequestIdentity{APIKeyID: "key-id-1", SourceIP: "192.0.2.1"},
			},
		}
		return r
	}
	ctx := e.ctx(t, 10*time.Second)
	steps := []struct {
		name     string
		req      events.APIGatewayProxyRequest
		status   int
		body     string
		replayed bool
	}{
		{"first", req("k-1", "alice", `{"a":1}`, false), 201, "created 1", false},
		{"base64 body of the same bytes replays", req("k-1", "alice", base64.StdEncoding.EncodeToString([]byte(`{"a":1}`)), true), 201, "created 1", true},
		{"another principal executes", req("k-1", "bob", `{"a":1}`, false), 201, "created 2", false},
		{"binary body", req("k-2", "alice", base64.StdEncoding.EncodeToString([]byte{0xff, 0x00, 0xfe}), true), 201, "created 3", false},
		{"other binary body is a reuse", req("k-2", "alice", base64.StdEncoding.EncodeToString([]byte{0xff, 0x00, 0xfd}), true), 422, "", false},
		{"bad base64 is 400", req("k-3", "alice", "%%%", true), 400, "", false},
	}
	for i, s := range steps {
		resp, err := handle(ctx, s.req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != s.status || (s.body != "" && resp.Body != s.body) || (resp.Headers[idemlambda.HeaderReplayed] == "true") != s.replayed {
			t.Errorf("step %d (%s): got %d %q %v; want %d %q replayed %v", i, s.name, resp.StatusCode, resp.Body, resp.Headers, s.status, s.body, s.replayed)
		}
	}
	// Two Idempotency-Key values in multiValueHeaders are refused.
	r := req("k-1", "alice", `{"a":1}`, false)
	r.MultiValueHeaders["idempotency-key"] = []string{"k-9"}
	resp, _ := handle(ctx, r)
	if resp.StatusCode != 400 {
		t.Errorf("two key headers: status %d want 400", resp.StatusCode)
	}
}

func TestFunctionURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs counter
	handle, err := idemlambda.FunctionURL(e.runner, func(ctx context.Context, r events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		return events.LambdaFunctionURLResponse{Body: fmt.Sprintf("run %d", runs.inc("all"))}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	req := func(arn string) events.LambdaFunctionURLRequest {
		return events.LambdaFunctionURLRequest{
			Version: "2.0", RawPath: "/pay", Headers: map[string]string{"idempotency-key": "pay-1"}, Body: `{"cents":100}`,
			RequestContext: events.LambdaFunctionURLRequestContext{
				HTTP:       events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/pay"},
				Authorizer: &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{UserARN: arn}},
			},
		}
	}
	ctx := e.ctx(t, 10*time.Second)
	want := []struct {
		arn      string
		status   int
		body     string
		replayed bool
	}{
		{"arn:aws:iam::1:user/a", 200, "run 1", false},
		{"arn:aws:iam::1:user/a", 200, "run 1", true},
		{"arn:aws:iam::1:user/b", 200, "run 2", false},
	}
	for i, w := range want {
		resp, err := handle(ctx, req(w.arn))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != w.status || resp.Body != w.body || (resp.Headers[idemlambda.HeaderReplayed] == "true") != w.replayed {
			t.Errorf("step %d: got %d %q %v; want %d %q replayed %v", i, resp.StatusCode, resp.Body, resp.Headers, w.status, w.body, w.replayed)
		}
	}
}

// faultStore wraps a store: Reserve fails with err when set, and Complete
// omits results when omit is set, as a store does for oversized results.
type faultStore struct {
	idem.Store
	err  error
	omit bool
}

func (f *faultStore) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	if f.err != nil {
		return f.err
	}
	return f.Store.Reserve(ctx, rec, prev, now)
}

func (f *faultStore) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	if f.omit && rec.Status == core.StatusSucceeded {
		rec.Result, rec.ResultOmitted = nil, true
	}
	return f.Store.Complete(ctx, rec)
}

func TestHTTPAPIStoreFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		store   *faultStore
		status  int
		problem string
		retry   string
	}{
		{"transient store failure is 503", &faultStore{err: core.MarkTransient(errors.New("throttled"))}, 503, idemlambda.ProblemStoreUnavailable, "1"},
		{"permanent store failure is 500", &faultStore{err: errors.New("table not found")}, 500, idemlambda.ProblemInternal, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			tc.store.Store = e.store
			r, err := idem.New(tc.store, idem.WithClock(e.clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			api := &orderAPI{}
			handle, err := idemlambda.HTTPAPI(r, api.handle)
			if err != nil {
				t.Fatal(err)
			}
			resp, _ := handle(e.ctx(t, 10*time.Second), v2Req("POST", "/orders", "k-1", "{}"))
			if resp.StatusCode != tc.status || resp.Headers["Retry-After"] != tc.retry {
				t.Fatalf("got %d Retry-After %q; want %d %q", resp.StatusCode, resp.Headers["Retry-After"], tc.status, tc.retry)
			}
			if p := problemOf(t, resp); p.Type != idemlambda.ProblemTypeBase+tc.problem {
				t.Errorf("problem %q want %q", p.Type, tc.problem)
			}
			if api.runs.get("all") != 0 {
				t.Errorf("handler ran although the key could not be reserved")
			}
		})
	}
	t.Run("omitted response cannot be replayed", func(t *testing.T) {
		e := newEnv(t)
		r, _ := idem.New(&faultStore{Store: e.store, omit: true}, idem.WithClock(e.clock.Now))
		api := &orderAPI{}
		handle, _ := idemlambda.HTTPAPI(r, api.handle)
		ctx := e.ctx(t, 10*time.Second)
		first, _ := handle(ctx, v2Req("POST", "/orders", "k-1", "{}"))
		second, _ := handle(ctx, v2Req("POST", "/orders", "k-1", "{}"))
		if first.StatusCode != 201 || second.StatusCode != 500 || second.Headers[idemlambda.HeaderReplayed] != "true" {
			t.Fatalf("got %d then %d %v; want 201 then a replayed 500", first.StatusCode, second.StatusCode, second.Headers)
		}
		if p := problemOf(t, second); p.Type != idemlambda.ProblemTypeBase+idemlambda.ProblemResponseOmitted {
			t.Errorf("problem %q", p.Type)
		}
		if api.runs.get("all") != 1 {
			t.Errorf("handler ran %d times, want 1", api.runs.get("all"))
		}
	})
}

func TestIdempotencyKeyHeader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		headers map[string]string
		multi   map[string][]string
		want    string
		present bool
		wantErr bool
	}{
		{"lower case", map[string]string{"idempotency-key": "abc"}, nil, "abc", true, false},
		{"canonical case", map[string]string{"Idempotency-Key": "abc"}, nil, "abc", true, false},
		{"upper case", map[string]string{"IDEMPOTENCY-KEY": "abc"}, nil, "abc", true, false},
		{"absent", map[string]string{"x-other": "abc"}, nil, "", false, false},
		{"nil maps", nil, nil, "", false, false},
		{"quoted", map[string]string{"idempotency-key": `"8e03978e-40d5-43e8-bc93-6894a57f9324"`}, nil, "8e03978e-40d5-43e8-bc93-6894a57f9324", true, false},
		{"empty", map[string]string{"idempotency-key": ""}, nil, "", true, true},
		{"space", map[string]string{"idempotency-key": "a b"}, nil, "", true, true},
		{"DEL", map[string]string{"idempotency-key": "a\x7f"}, nil, "", true, true},
		{"too long", map[string]string{"idempotency-key": strings.Repeat("a", 256)}, nil, "", true, true},
		{"longest", map[string]string{"idempotency-key": strings.Repeat("a", 255)}, nil, strings.Repeat("a", 255), true, false},
		{"multi value wins", map[string]string{"Idempotency-Key": "a"}, map[string][]string{"Idempotency-Key": {"a"}}, "a", true, false},
		{"two values", nil, map[string][]string{"Idempotency-Key": {"a", "b"}}, "", true, true},
		{"two spellings", map[string]string{"Idempotency-Key": "a", "idempotency-key": "b"}, nil, "", true, true},
		{"comma-joined values", map[string]string{"idempotency-key": "a,b"}, nil, "", true, true},
		{"comma in a multi value", nil, map[string][]string{"Idempotency-Key": {"a,b"}}, "", true, true},
		{"comma-joined quoted values", map[string]string{"idempotency-key": `"a","b"`}, nil, "", true, true},
		{"unterminated quoted string", map[string]string{"idempotency-key": `"abc`}, nil, "", true, true},
		{"quote inside", map[string]string{"idempotency-key": `a"b`}, nil, "", true, true},
		{"escape inside a quoted string", map[string]string{"idempotency-key": `"a\"b"`}, nil, "", true, true},
		{"backslash", map[string]string{"idempotency-key": `a\b`}, nil, "", true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, present, err := idemlambda.IdempotencyKeyHeader(tc.headers, tc.multi)
			if got != tc.want || present != tc.present || (err != nil) != tc.wantErr {
				t.Fatalf("= %q, %v, %v; want %q, %v, error %v", got, present, err, tc.want, tc.present, tc.wantErr)
			}
			if err != nil && !errors.Is(err, core.ErrInvalidKey) {
				t.Fatalf("error %v does not wrap ErrInvalidKey", err)
			}
		})
	}
}

func TestRequestPayload(t *testing.T) {
	t.Parallel()
	fp := func(method, path, body string, b64 bool) string {
		p, err := idemlambda.RequestPayload(method, path, body, b64)
		if err != nil {
			t.Fatal(err)
		}
		f, err := core.Fingerprint(p)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	base := fp("POST", "/orders", `{"a":1,"b":[1,2]}`, false)
	same := []struct {
		name string
		fp   string
	}{
		{"reordered keys and whitespace", fp("POST", "/orders", "{ \"b\": [1, 2],\n \"a\": 1 }", false)},
		{"base64 of the same bytes", fp("POST", "/orders", base64.StdEncoding.EncodeToString([]byte(`{"a":1,"b":[1,2]}`)), true)},
	}
	for _, s := range same {
		if s.fp != base {
			t.Errorf("%s: fingerprint differs", s.name)
		}
	}
	differ := []struct {
		name string
		fp   string
	}{
		{"other value", fp("POST", "/orders", `{"a":2,"b":[1,2]}`, false)},
		{"other method", fp("PUT", "/orders", `{"a":1,"b":[1,2]}`, false)},
		{"other path", fp("POST", "/order", `{"a":1,"b":[1,2]}`, false)},
		{"text body", fp("POST", "/orders", `a=1&b=2`, false)},
		{"empty body", fp("POST", "/orders", ``, false)},
		{"1.0 is not 1", fp("POST", "/orders", `{"a":1.0,"b":[1,2]}`, false)},
	}
	seen := map[string]string{base: "base"}
	for _, d := range differ {
		if prev, ok := seen[d.fp]; ok {
			t.Errorf("%s: fingerprint equals that of %s", d.name, prev)
		}
		seen[d.fp] = d.name
	}
	if fp("POST", "/x", "a=1", false) == fp("POST", "/x", `"a=1"`, false) {
		t.Errorf("a text body and the JSON string of the same text share a fingerprint")
	}
	if _, err := idemlambda.RequestPayload("POST", "/x", "not base64!", true); !errors.Is(err, core.ErrInvalidPayload) {
		t.Errorf("bad base64: err = %v want ErrInvalidPayload", err)
	}
	deep := strings.Repeat("[", idemlambda.MaxBodyDepth+1) + strings.Repeat("]", idemlambda.MaxBodyDepth+1)
	if _, err := idemlambda.RequestPayload("POST", "/x", deep, false); !errors.Is(err, core.ErrInvalidPayload) {
		t.Errorf("too deep: err = %v want ErrInvalidPayload", err)
	}
}

func TestDecodeBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		b64     bool
		want    string
		wantErr bool
	}{
		{"plain", `{"a":1}`, false, `{"a":1}`, false},
		{"plain that looks like base64", "eyJhIjoxfQ==", false, "eyJhIjoxfQ==", false},
		{"base64", "eyJhIjoxfQ==", true, `{"a":1}`, false},
		{"empty base64", "", true, "", false},
		{"bad base64", "%%%", true, "", true},
		{"unpadded base64", "eyJhIjoxfQ", true, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := idemlambda.DecodeBody(tc.body, tc.b64)
			if string(got) != tc.want || (err != nil) != tc.wantErr {
				t.Fatalf("= %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
			if err != nil && !errors.Is(err, core.ErrInvalidPayload) {
				t.Fatalf("error %v does not wrap ErrInvalidPayload", err)
			}
		})
	}
}

func TestHTTPOptionErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	api := &orderAPI{}
	if _, err := idemlambda.HTTPAPI(nil, api.handle); err == nil {
		t.Error("nil runner accepted")
	}
	if _, err := idemlambda.HTTPAPI(e.runner, nil); err == nil {
		t.Error("nil handler accepted")
	}
	if _, err := idemlambda.RESTAPI(e.runner, nil); err == nil {
		t.Error("nil REST handler accepted")
	}
	if _, err := idemlambda.FunctionURL(e.runner, nil); err == nil {
		t.Error("nil function URL handler accepted")
	}
}

func TestFunctionURLCommaJoinedKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs counter
	handle, err := idemlambda.FunctionURL(e.runner, func(ctx context.Context, r events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		return events.LambdaFunctionURLResponse{Body: fmt.Sprintf("run %d", runs.inc("all"))}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A function URL joins a repeated header's values with commas.
	req := events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: "/pay", Headers: map[string]string{"idempotency-key": "pay-1,pay-2"}, Body: `{"cents":100}`,
		RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/pay"}},
	}
	resp, err := handle(e.ctx(t, 10*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest || runs.get("all") != 0 {
		t.Fatalf("got %d %s, handler ran %d times; want 400 and no run", resp.StatusCode, resp.Body, runs.get("all"))
	}
	var p idemlambda.Problem
	if err := json.Unmarshal([]byte(resp.Body), &p); err != nil || p.Type != idemlambda.ProblemTypeBase+idemlambda.ProblemInvalidKey {
		t.Fatalf("problem %s: %v", resp.Body, err)
	}
}

// Options of one kind of wrapper do not fit another: the constructors take
// BatchOption or HTTPOption, and only the common Option is both.
func TestOptionKinds(t *testing.T) {
	common := idemlambda.WithClock(time.Now)
	var _ idemlambda.BatchOption = common
	var _ idemlambda.HTTPOption = common
	if _, ok := idemlambda.WithConcurrency(2).(idemlambda.HTTPOption); ok {
		t.Error("a batch option is an HTTPOption")
	}
	if _, ok := idemlambda.WithOptionalKey().(idemlambda.BatchOption); ok {
		t.Error("an HTTP option is a BatchOption")
	}
}

// A request let through without a key (WithOptionalKey) whose handler
// panics is reported as panicked, as a keyed one is; the panic goes on to
// the runtime.
func TestHTTPUnkeyedPanicIsReported(t *testing.T) {
	t.Parallel()
	var obs observed
	e := newEnv(t, idem.WithObserver(&obs))
	h, err := idemlambda.HTTPAPI(e.runner, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		panic("handler bug")
	}, idemlambda.WithOptionalKey())
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if p := recover(); p != "handler bug" {
				t.Errorf("recovered %v, want the handler's panic", p)
			}
		}()
		_, _ = h(e.ctx(t, time.Minute), v2Req("POST", "/orders", "", `{}`))
	}()
	if got := verdicts(obs.take()); !slices.Equal(got, []string{"panicked"}) {
		t.Errorf("observed %v, want [panicked]", got)
	}
}
