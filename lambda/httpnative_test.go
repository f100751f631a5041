package idemlambda_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
)

func TestNativeResponsesReplayFaithfully(t *testing.T) {
	t.Parallel()
	const session, prefs = "session=abc; Path=/; HttpOnly; Secure", "prefs=dark; Path=/; Max-Age=3600"
	e := newEnv(t)
	ctx := e.ctx(t, 10*time.Second)
	var runs counter

	rest, _ := idemlambda.RESTAPI(e.runner, func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		runs.inc("rest")
		return events.APIGatewayProxyResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"},
			MultiValueHeaders: map[string][]string{"Set-Cookie": {session, prefs}, "Vary": {"Accept", "Origin"}}, Body: `{"id":1}`}, nil
	})
	v2, _ := idemlambda.HTTPAPI(e.runner, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs.inc("v2")
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"},
			Cookies: []string{session, prefs}, Body: "AAEC", IsBase64Encoded: true}, nil
	})
	url, _ := idemlambda.FunctionURL(e.runner, func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		runs.inc("url")
		return events.LambdaFunctionURLResponse{StatusCode: 200, Headers: map[string]string{"Content-Type": "text/plain"}, Cookies: []string{session, prefs}, Body: "ok"}, nil
	})
	alb, _ := idemlambda.ALB(e.runner, func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		runs.inc("alb")
		return events.ALBTargetGroupResponse{StatusCode: 201, StatusDescription: "201 Created",
			MultiValueHeaders: map[string][]string{"set-cookie": {session, prefs}, "content-type": {"application/json"}}, Body: `{"id":1}`}, nil
	})
	restReq := events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/login", Headers: map[string]string{"Idempotency-Key": "k-rest"}, MultiValueHeaders: map[string][]string{"Idempotency-Key": {"k-rest"}}}
	v2Req := v2Req("POST", "/login", "k-v2", "{}")
	urlReq := events.LambdaFunctionURLRequest{RawPath: "/login", Headers: map[string]string{"idempotency-key": "k-url"},
		RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/login"}}}
	albReq := albReq(true, "POST", "/login", "k-alb", "{}")

	type pair struct{ first, retry any }
	call := func(name string) pair {
		var p pair
		for i := range 2 {
			var got any
			var err error
			switch name {
			case "rest":
				got, err = rest(ctx, restReq)
			case "v2":
				got, err = v2(ctx, v2Req)
			case "url":
				got, err = url(ctx, urlReq)
			case "alb":
				got, err = alb(ctx, albReq)
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if i == 0 {
				p.first = got
			} else {
				p.retry = got
			}
		}
		return p
	}
	tests := []struct {
		name   string
		unmark func(any) (any, bool) // the retry without its marker; whether the marker was there
	}{
		{"rest", func(a any) (any, bool) {
			r := a.(events.APIGatewayProxyResponse)
			ok := r.Headers[idemlambda.HeaderReplayed] == "true"
			delete(r.Headers, idemlambda.HeaderReplayed)
			return r, ok
		}},
		{"v2", func(a any) (any, bool) {
			r := a.(events.APIGatewayV2HTTPResponse)
			ok := r.Headers[idemlambda.HeaderReplayed] == "true"
			delete(r.Headers, idemlambda.HeaderReplayed)
			return r, ok
		}},
		{"url", func(a any) (any, bool) {
			r := a.(events.LambdaFunctionURLResponse)
			ok := r.Headers[idemlambda.HeaderReplayed] == "true"
			delete(r.Headers, idemlambda.HeaderReplayed)
			return r, ok
		}},
		{"alb", func(a any) (any, bool) {
			r := a.(events.ALBTargetGroupResponse)
			ok := slices.Equal(r.MultiValueHeaders[idemlambda.HeaderReplayed], []string{"true"}) && r.Headers == nil
			delete(r.MultiValueHeaders, idemlambda.HeaderReplayed)
			return r, ok
		}},
	}
	for _, tc := range tests {
		p := call(tc.name)
		got, marked := tc.unmark(p.retry)
		if !marked {
			t.Errorf("%s: replay is not marked: %+v", tc.name, p.retry)
		}
		if !reflect.DeepEqual(got, p.first) {
			t.Errorf("%s: replay differs from the first answer:\n got %+v\nwant %+v", tc.name, got, p.first)
		}
		if n := runs.get(tc.name); n != 1 {
			t.Errorf("%s: handler ran %d times", tc.name, n)
		}
	}
}

// The store keeps a wrapper's native response in an envelope naming its
// shape.
func TestStoredResponseEnvelope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h, _ := idemlambda.HTTPAPI(e.runner, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Cookies: []string{"a=1", "b=2"}, Body: "x"}, nil
	})
	if _, err := h(e.ctx(t, 10*time.Second), v2Req("POST", "/orders", "k-1", "{}")); err != nil {
		t.Fatal(err)
	}
	key, _ := idemlambda.HTTPKey("k-1", nil)
	rec, err := e.store.Get(context.Background(), key, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		V        int                             `json:"v"`
		Shape    string                          `json:"shape"`
		Response events.APIGatewayV2HTTPResponse `json:"response"`
	}
	if err := json.Unmarshal(rec.Result, &env); err != nil || env.V != 1 || env.Shape != "http-api" ||
		!slices.Equal(env.Response.Cookies, []string{"a=1", "b=2"}) || env.Response.StatusCode != 201 {
		t.Fatalf("stored %s (%v); want {v:1, shape:http-api, response:{...}}", rec.Result, err)
	}
}

// put writes a succeeded record for key and payload holding result, as an
// earlier release, or another wrapper sharing the table, would have.
func (e *env) put(t *testing.T, key string, payload, result []byte) {
	t.Helper()
	fp, err := core.Fingerprint(payload)
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	rec := core.Reserve(key, fp, "earlier", nil, now, now.Add(time.Minute), time.Hour)
	if err := e.store.Reserve(context.Background(), rec, nil, now); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Complete(context.Background(), core.Succeed(rec, result, now, time.Hour)); err != nil {
		t.Fatal(err)
	}
}

// Records of another shape, of the format before the envelope, or of an
// unknown format are replayed as well as they can be, never re-executed.
func TestStoredResponseOtherShapes(t *testing.T) {
	t.Parallel()
	restWithCookies := `{"v":1,"shape":"rest-api","response":{"statusCode":201,"headers":{"content-type":"application/json"},"multiValueHeaders":{"Set-Cookie":["a=1","b=2"]},"body":"{}"}}`
	tests := []struct {
		name, stored string
		status       int
		cookies      []string
		headers      map[string]string
		problem      string
	}{
		{"response stored before the envelope", `{"statusCode":201,"headers":{"Location":"/orders/1"},"body":"{}"}`, 201, nil, map[string]string{"Location": "/orders/1"}, ""},
		{"REST response with two cookies, replayed to an HTTP API", restWithCookies, 201, []string{"a=1", "b=2"}, map[string]string{"Content-Type": "application/json"}, ""},
		{"omitted response", `{"v":1,"shape":"http-api","omitted":true}`, 500, nil, nil, idemlambda.ProblemResponseOmitted},
		{"a net/http middleware's response", `{"v":1,"shape":"net/http","response":{"statusCode":201,"header":{"X":["1"]},"body":"eyJ9"}}`, 500, nil, nil, idemlambda.ProblemInternal},
		{"later envelope version", `{"v":2,"shape":"http-api","response":{}}`, 500, nil, nil, idemlambda.ProblemInternal},
		{"not JSON", `\x00garbage`, 500, nil, nil, idemlambda.ProblemInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			var runs counter
			h, _ := idemlambda.HTTPAPI(e.runner, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				runs.inc("all")
				return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
			})
			key, _ := idemlambda.HTTPKey("k-1", nil)
			payload, _ := idemlambda.RequestPayload("POST", "/orders", "{}", false)
			e.put(t, key, payload, []byte(tc.stored))
			resp, err := h(e.ctx(t, 10*time.Second), v2Req("POST", "/orders", "k-1", "{}"))
			if err != nil || runs.get("all") != 0 || resp.StatusCode != tc.status {
				t.Fatalf("got %d %v %s, %v, %d runs; want %d and no run", resp.StatusCode, resp.Headers, resp.Body, err, runs.get("all"), tc.status)
			}
			if tc.problem != "" {
				if p := problemOf(t, resp); p.Type != idemlambda.ProblemTypeBase+tc.problem {
					t.Errorf("problem %s want %s", p.Type, tc.problem)
				}
				return
			}
			if !slices.Equal(resp.Cookies, tc.cookies) || resp.Headers[idemlambda.HeaderReplayed] != "true" {
				t.Errorf("cookies %v headers %v; want cookies %v, replayed", resp.Cookies, resp.Headers, tc.cookies)
			}
			for k, v := range tc.headers {
				if resp.Headers[k] != v {
					t.Errorf("header %s = %q want %q (%v)", k, resp.Headers[k], v, resp.Headers)
				}
			}
		})
	}
}

// The response hook sees every answer given in the handler's place with
// its verdict, never the handler's own, and cannot unmark a replay.
func TestResponseHook(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var seen []idem.Verdict
	hook := idemlambda.WithResponseHook(func(ctx context.Context, r *events.APIGatewayV2HTTPResponse, v idem.Verdict) {
		seen = append(seen, v)
		if r.Headers == nil {
			r.Headers = map[string]string{}
		}
		r.Headers["X-Idem-Verdict"] = v.String()
		delete(r.Headers, idemlambda.HeaderReplayed) // cannot remove the marker
		r.Headers["idempotent-replayed"] = "false"   // nor forge it in another spelling
		r.Cookies = append(r.Cookies, "seen="+v.String())
	})
	api := &orderAPI{}
	h, err := idemlambda.HTTPAPI(e.runner, api.handle, hook, idemlambda.WithClock(e.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	ctx := e.ctx(t, 10*time.Second)
	steps := []struct {
		req      events.APIGatewayV2HTTPRequest
		status   int
		verdict  string // X-Idem-Verdict; "" when the hook must not run
		replayed bool
	}{
		{v2Req("POST", "/orders", "k-1", `{"a":1}`), 201, "", false},
		{v2Req("POST", "/orders", "k-1", `{"a":1}`), 201, "replayed", true},
		{v2Req("POST", "/orders", "k-1", `{"a":2}`), 422, "key_reused", false},
		{v2Req("POST", "/orders", "", `{"a":1}`), 400, "missing_key", false},
		{v2Req("POST", "/orders", "k-2", `{"fail":"error"}`), 500, "failed_transiently", false},
	}
	for i, s := range steps {
		resp, _ := h(ctx, s.req)
		if resp.StatusCode != s.status || resp.Headers["X-Idem-Verdict"] != s.verdict {
			t.Errorf("step %d: got %d verdict header %q; want %d %q", i, resp.StatusCode, resp.Headers["X-Idem-Verdict"], s.status, s.verdict)
		}
		var markers []string
		for k, v := range resp.Headers {
			if k == idemlambda.HeaderReplayed || k == "idempotent-replayed" {
				markers = append(markers, k+": "+v)
			}
		}
		if s.replayed && !slices.Equal(markers, []string{idemlambda.HeaderReplayed + ": true"}) {
			t.Errorf("step %d: replay markers %v, want only %s: true", i, markers, idemlambda.HeaderReplayed)
		}
		if s.verdict == "" && len(markers) > 0 {
			t.Errorf("step %d: the handler's own answer went through the hook: %v", i, markers)
		}
		if s.replayed && !slices.Contains(resp.Cookies, "seen=replayed") {
			t.Errorf("step %d: the hook's cookie is missing: %v", i, resp.Cookies)
		}
	}
	if want := []idem.Verdict{idem.Replayed, idem.KeyReused, idem.MissingKey, idem.FailedTransiently}; !slices.Equal(seen, want) {
		t.Errorf("hook saw %v, want %v", seen, want)
	}
}

func TestResponseHookOfAnotherType(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wrong := idemlambda.WithResponseHook(func(context.Context, *events.ALBTargetGroupResponse, idem.Verdict) {})
	_, err := idemlambda.HTTPAPI(e.runner, (&orderAPI{}).handle, wrong)
	if err == nil {
		t.Fatal("HTTPAPI accepted a hook for ALB responses")
	}
	if _, err := idemlambda.HTTPAPI(e.runner, (&orderAPI{}).handle, idemlambda.WithResponseHook[events.APIGatewayV2HTTPResponse](nil)); err == nil {
		t.Error("nil hook accepted")
	}
}

// FuzzReplayStored: whatever a record holds, a replay never panics and
// never runs the handler; it answers what was stored or a 500 problem.
func FuzzReplayStored(f *testing.F) {
	for _, seed := range []string{
		`{"v":1,"shape":"rest-api","response":{"statusCode":201,"multiValueHeaders":{"Set-Cookie":["a=1","b=2"]},"body":"{}"}}`,
		`{"v":1,"shape":"alb-multi-value","response":{"statusCode":200,"multiValueHeaders":{"x":null}}}`,
		`{"v":1,"shape":"function-url","response":{"statusCode":200,"cookies":[""],"headers":null}}`,
		`{"statusCode":201,"headers":{"Location":"/1"},"body":"x"}`,
		`{"v":1,"shape":"http-api","omitted":true}`,
		`{"v":1,"shape":"http-api","response":"not an object"}`,
		`null`, `[]`, `{}`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, stored []byte) {
		e := newEnv(t)
		var runs counter
		v2, _ := idemlambda.HTTPAPI(e.runner, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs.inc("all")
			return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
		})
		alb, _ := idemlambda.ALB(e.runner, func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
			runs.inc("all")
			return events.ALBTargetGroupResponse{StatusCode: 201}, nil
		})
		key, _ := idemlambda.HTTPKey("k-1", nil)
		payload, _ := idemlambda.RequestPayload("POST", "/orders", "{}", false)
		e.put(t, key, payload, stored)
		ctx := e.ctx(t, 10*time.Second)
		r1, err1 := v2(ctx, v2Req("POST", "/orders", "k-1", "{}"))
		r2, err2 := alb(ctx, albReq(true, "POST", "/orders", "k-1", "{}"))
		if err1 != nil || err2 != nil || runs.get("all") != 0 {
			t.Fatalf("errors %v, %v; %d runs", err1, err2, runs.get("all"))
		}
		if r1.StatusCode == 0 || r2.StatusCode == 0 {
			t.Fatalf("status %d, %d", r1.StatusCode, r2.StatusCode)
		}
	})
}
