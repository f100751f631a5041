package idemlambda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemgo/idem"
	idemlambda "github.com/idemgo/idem/lambda"
)

// The tests of this file hold the isolation of callers, tenants and
// accounts: two of them sending the same key and body never receive each
// other's stored outcome (docs/security.md).

// answer is what a caller got: the status, whether it was a replay, the
// body.
type answer struct {
	status   int
	replayed bool
	body     string
}

func (a answer) String() string {
	return fmt.Sprintf("%d replayed=%v %q", a.status, a.replayed, a.body)
}

// serveAll sends reqs, in order, to the wrapper that wrap makes of a
// handler answering 201 with the number of its run (made by respond),
// each with the context ctx gives (nil: a plain one), and returns the
// answers (as view reads them).
func serveAll[Req, Resp any](t *testing.T, wrap func(*idem.Runner, func(context.Context, Req) (Resp, error)) (func(context.Context, Req) (Resp, error), error),
	respond func(body string) Resp, view func(Resp) answer, ctx func(i int) context.Context, reqs ...Req) []answer {
	t.Helper()
	e := newEnv(t)
	var runs counter
	h, err := wrap(e.runner, func(context.Context, Req) (Resp, error) { return respond(fmt.Sprintf("run %d", runs.inc("all"))), nil })
	if err != nil {
		t.Fatal(err)
	}
	var out []answer
	for i, r := range reqs {
		c := e.ctx(t, 10*time.Second)
		if ctx != nil {
			c = ctx(i)
		}
		resp, err := h(c, r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, view(resp))
	}
	return out
}

// serveHTTPAPI is serveAll for an HTTP API.
func serveHTTPAPI(t *testing.T, ctx func(i int) context.Context, reqs ...events.APIGatewayV2HTTPRequest) []answer {
	t.Helper()
	return serveAll(t, func(r *idem.Runner, h func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
		return idemlambda.HTTPAPI(r, h)
	}, func(body string) events.APIGatewayV2HTTPResponse {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: body}
	},
		func(resp events.APIGatewayV2HTTPResponse) answer {
			return answer{resp.StatusCode, resp.Headers[idemlambda.HeaderReplayed] == "true", resp.Body}
		}, ctx, reqs...)
}

// serveREST is serveAll for a REST API.
func serveREST(t *testing.T, reqs ...events.APIGatewayProxyRequest) []answer {
	t.Helper()
	return serveAll(t, func(r *idem.Runner, h func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)) (func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error), error) {
		return idemlambda.RESTAPI(r, h)
	}, func(body string) events.APIGatewayProxyResponse {
		return events.APIGatewayProxyResponse{StatusCode: 201, Body: body}
	},
		func(resp events.APIGatewayProxyResponse) answer {
			return answer{resp.StatusCode, resp.Headers[idemlambda.HeaderReplayed] == "true", resp.Body}
		}, nil, reqs...)
}

// restReq is a REST API request with key k-1 and authorizer a.
func restReq(a map[string]any, identity events.APIGatewayRequestIdentity) events.APIGatewayProxyRequest {
	return events.APIGatewayProxyRequest{
		Resource: "/orders", Path: "/orders", HTTPMethod: "POST",
		Headers: map[string]string{"Idempotency-Key": "k-1"}, Body: `{"a":1}`,
		RequestContext: events.APIGatewayProxyRequestContext{Authorizer: a, Identity: identity},
	}
}

// apart checks that the second caller ran the handler itself.
func apart(t *testing.T, got []answer) {
	t.Helper()
	want := []answer{{201, false, "run 1"}, {201, false, "run 2"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("two callers with one key and body got %v; want %v (the second caller must not receive the first one's response)", got, want)
	}
}

// cognitoSession is the IAM role session that a Cognito identity pool gives
// every one of its users (enhanced flow): the same userArn and callerId for
// all of them.
const (
	cognitoARN    = "arn:aws:sts::123456789012:assumed-role/Cognito_OrdersAuth_Role/CognitoIdentityCredentials"
	cognitoCaller = "AROA7ZJZYVRE7C3DUXHH6:CognitoIdentityCredentials"
)

func identityPoolUser(id string) *events.APIGatewayV2HTTPRequestContextAuthorizerDescription {
	return &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
		AccountID: "123456789012", CallerID: cognitoCaller, UserARN: cognitoARN, UserID: cognitoCaller,
		CognitoIdentity: events.APIGatewayV2HTTPRequestContextAuthorizerCognitoIdentity{
			AMR: []string{"authenticated"}, IdentityID: id, IdentityPoolID: "us-east-1:4f291106-8703-466b-8f2b-3ecee1ca56ce",
		},
	}}
}

// Item 1: users of a Cognito identity pool calling an HTTP API with IAM
// authorization share one role session; their identity ids tell them apart.
func TestIdentityPoolUsersApartHTTPAPI(t *testing.T) {
	t.Parallel()
	a, b := v2Req("POST", "/orders", "k-1", `{"a":1}`), v2Req("POST", "/orders", "k-1", `{"a":1}`)
	a.RequestContext.Authorizer = identityPoolUser("us-east-1:3f291106-8703-466b-8f2b-3ecee1ca56ce")
	b.RequestContext.Authorizer = identityPoolUser("us-east-1:9c1d2e3f-0000-4b5c-8d9e-0a1b2c3d4e5f")
	apart(t, serveHTTPAPI(t, nil, a, b))
}

// functionURLEvent is a function URL request with IAM authorization as
// Lambda sends it, from a Cognito identity pool user when identityID is set.
func functionURLEvent(identityID string) []byte {
	cognito := "null"
	if identityID != "" {
		cognito = `{"amr":["authenticated"],"identityId":"` + identityID + `","identityPoolId":"us-east-1:4f291106-8703-466b-8f2b-3ecee1ca56ce"}`
	}
	return []byte(`{
	"version": "2.0", "rawPath": "/pay", "rawQueryString": "",
	"headers": {"idempotency-key": "pay-1", "content-type": "application/json"},
	"requestContext": {
		"accountId": "123456789012", "apiId": "urlid", "domainName": "urlid.lambda-url.us-east-1.on.aws", "domainPrefix": "urlid",
		"authorizer": {"iam": {"accessKey": "ASIA2ZJZYVUEREEIHAKY", "accountId": "123456789012", "callerId": "` + cognitoCaller + `",
			"cognitoIdentity": ` + cognito + `, "principalOrgId": null, "userArn": "` + cognitoARN + `", "userId": "` + cognitoCaller + `"}},
		"http": {"method": "POST", "path": "/pay", "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "agent"},
		"requestId": "id", "time": "12/Mar/2030:19:03:58 +0000", "timeEpoch": 1899999838390
	},
	"body": "{\"cents\":100}", "isBase64Encoded": false
}`)
}

// Item 1, function URLs: aws-lambda-go's event type drops cognitoIdentity;
// the wrapper, started with lambda.Start, reads it from the event as Lambda
// sent it. Called with the typed event alone, it cannot see who the
// identity pool user is and refuses the request.
func TestIdentityPoolUsersApartFunctionURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs counter
	h, err := idemlambda.FunctionURL(e.runner, func(ctx context.Context, r events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		return events.LambdaFunctionURLResponse{StatusCode: 201, Body: fmt.Sprintf("run %d", runs.inc("all"))}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// lambda.NewHandler is what lambda.Start runs the handler with.
	invoke := lambda.NewHandler(h)
	var got []answer
	for _, id := range []string{"us-east-1:3f291106-8703-466b-8f2b-3ecee1ca56ce", "us-east-1:9c1d2e3f-0000-4b5c-8d9e-0a1b2c3d4e5f"} {
		out, err := invoke.Invoke(e.ctx(t, 10*time.Second), functionURLEvent(id))
		if err != nil {
			t.Fatal(err)
		}
		var resp events.LambdaFunctionURLResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("response %s: %v", out, err)
		}
		got = append(got, answer{resp.StatusCode, resp.Headers[idemlambda.HeaderReplayed] == "true", resp.Body})
	}
	apart(t, got)

	var typed events.LambdaFunctionURLRequest
	if err := json.Unmarshal(functionURLEvent("us-east-1:5a5a5a5a-0000-4b5c-8d9e-0a1b2c3d4e5f"), &typed); err != nil {
		t.Fatal(err)
	}
	resp, err := h(e.ctx(t, 10*time.Second), typed)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 500 || runs.get("all") != 2 {
		t.Errorf("typed event of an identity pool user: %d %q after %d runs; want 500 and no run (the caller cannot be told apart)", resp.StatusCode, resp.Body, runs.get("all"))
	}
}

// Item 2: a Lambda authorizer's context values are typed (AWS's examples
// return numbers and booleans): a numeric principalId or sub is an
// identity.
func TestLambdaAuthorizerTypedValues(t *testing.T) {
	t.Parallel()
	withLambda := func(ctx map[string]any) events.APIGatewayV2HTTPRequest {
		r := v2Req("POST", "/orders", "k-1", `{"a":1}`)
		r.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: ctx}
		return r
	}
	t.Run("http api principalId", func(t *testing.T) {
		t.Parallel()
		apart(t, serveHTTPAPI(t, nil, withLambda(map[string]any{"principalId": float64(42)}), withLambda(map[string]any{"principalId": float64(43)})))
	})
	t.Run("http api sub", func(t *testing.T) {
		t.Parallel()
		apart(t, serveHTTPAPI(t, nil, withLambda(map[string]any{"sub": float64(1001), "numberKey": float64(1)}), withLambda(map[string]any{"sub": float64(1002), "numberKey": float64(1)})))
	})
	t.Run("rest principalId", func(t *testing.T) {
		t.Parallel()
		apart(t, serveREST(t, restReq(map[string]any{"principalId": float64(42), "clientId": float64(1)}, events.APIGatewayRequestIdentity{}),
			restReq(map[string]any{"principalId": float64(43), "clientId": float64(1)}, events.APIGatewayRequestIdentity{})))
	})
	t.Run("authorizer naming no caller", func(t *testing.T) {
		t.Parallel()
		// A simple response whose context names no caller: refused, never
		// run in a key space shared by every caller.
		got := serveHTTPAPI(t, nil, withLambda(map[string]any{"stringKey": "value", "booleanKey": true}))
		if got[0].status != 500 || got[0].body == "run 1" {
			t.Errorf("authorizer without a caller: %v; want 500 and no run", got[0])
		}
	})
}

// Item 3: a JWT's subject is unique within its issuer only.
func TestJWTIssuerScopes(t *testing.T) {
	t.Parallel()
	jwt := func(iss string) events.APIGatewayV2HTTPRequest {
		r := v2Req("POST", "/orders", "k-1", `{"a":1}`)
		r.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "user-1", "iss": iss}},
		}
		return r
	}
	apart(t, serveHTTPAPI(t, nil, jwt("https://tenant-a.example.com/"), jwt("https://tenant-b.example.com/")))
	cognito := func(iss string) events.APIGatewayProxyRequest {
		return restReq(map[string]any{"claims": map[string]any{"sub": "user-1", "iss": iss}}, events.APIGatewayRequestIdentity{})
	}
	apart(t, serveREST(t, cognito("https://cognito-idp.us-east-1.amazonaws.com/us-east-1_AAAAAAAAA"), cognito("https://cognito-idp.us-east-1.amazonaws.com/us-east-1_BBBBBBBBB")))
}

// Item 6: identity parts are length-prefixed where a newline would make
// them ambiguous; a newline-free identity keeps the key it had.
func TestIdentityPartsUnambiguous(t *testing.T) {
	t.Parallel()
	apart(t, serveREST(t,
		restReq(map[string]any{"principalId": "alice"}, events.APIGatewayRequestIdentity{APIKeyID: "k-7"}),
		restReq(map[string]any{"principalId": "alice\napikey=k-7"}, events.APIGatewayRequestIdentity{})))
	// Keys of releases before: stored records stay reachable.
	for _, tc := range []struct {
		identity []string
		want     string
	}{
		{nil, "sha256:d54758b1b9c86d89a7f7d2f24f5ea32a391662abdcf9457205eb8456891a9fd9"},
		{[]string{"sub=alice"}, "sha256:f731e554a2a43e19807192494528c70235b6598bc98100c06da8d389a9df40c6"},
		{[]string{"iam=arn:aws:iam::123456789012:user/alice"}, "sha256:7fc89e22806cfd8210502a7710293c983af8db32c026460c0572a76316497f04"},
		{[]string{"principal=user-1", "sub=sub-1", "apikey=key-1"}, "sha256:784e9cef050b0337a4ef964f2ab0d6d4f5698957f3d546b0e02974e5fc109e03"},
	} {
		if got, err := idemlambda.HTTPKey("k-1", tc.identity); err != nil || got != tc.want {
			t.Errorf("HTTPKey(k-1, %q) = %s, %v; want %s, as before", tc.identity, got, err, tc.want)
		}
	}
}

// Item 5: an EventBridge event's account and an SNS notification's topic
// are set by the service, not the sender: events of two accounts (topics)
// with one key are two events.
func TestEnvelopeScopes(t *testing.T) {
	t.Parallel()
	ebIn := func(account string) string {
		return `{"version":"0","id":"3e5f7a90-1b2c-4d5e-8f9a-0b1c2d3e4f50","detail-type":"OrderPlaced","source":"com.example.orders",` +
			`"account":"` + account + `","time":"2030-01-02T03:04:05Z","region":"eu-west-1","resources":[],"detail":{"order_id":"o-42"}}`
	}
	snsIn := func(topic string) string {
		return `{"Type":"Notification","MessageId":"5f1f0c43-0000-4b5c-8d9e-0a1b2c3d4e5f","TopicArn":"` + topic +
			`","Message":"{\"order_id\":\"o-42\"}","Timestamp":"2030-01-02T03:04:05.000Z","SignatureVersion":"1","Signature":"c2ln"}`
	}
	for _, tc := range []struct {
		name       string
		env        idemlambda.Envelope
		body1, bd2 string
	}{
		{"eventbridge account", idemlambda.EventBridgeEnvelope(), ebIn("111111111111"), ebIn("222222222222")},
		{"sns topic", idemlambda.SNSEnvelope(), snsIn("arn:aws:sns:eu-west-1:123456789012:tenant-a"), snsIn("arn:aws:sns:eu-west-1:123456789012:tenant-b")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var runs counter
			h, err := idemlambda.SQS(e.runner, "ship", idemlambda.KeyFromBodyField("order_id"), func(ctx context.Context, m events.SQSMessage) ([]byte, error) {
				runs.inc("all")
				return nil, nil
			}, idemlambda.WithEnvelope(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			for i, b := range []string{tc.body1, tc.bd2} {
				resp, _ := h(e.ctx(t, time.Minute), events.SQSEvent{Records: []events.SQSMessage{{MessageId: fmt.Sprintf("m-%d", i), Body: b}}})
				if len(resp.BatchItemFailures) != 0 {
					t.Fatalf("message %d reported: %v", i, resp.BatchItemFailures)
				}
			}
			if got := runs.get("all"); got != 2 {
				t.Errorf("handler ran %d times for two senders' events with one key; want 2", got)
			}
		})
	}
	t.Run("sns wrapper topic", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		var runs counter
		h, err := idemlambda.SNS(e.runner, "ship", idemlambda.KeyFromBodyField("order_id"), func(ctx context.Context, r events.SNSEventRecord) ([]byte, error) {
			runs.inc("all")
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, topic := range []string{"arn:aws:sns:eu-west-1:123456789012:tenant-a", "arn:aws:sns:eu-west-1:123456789012:tenant-b"} {
			ev := events.SNSEvent{Records: []events.SNSEventRecord{{EventSource: "aws:sns", EventSubscriptionArn: topic + ":sub",
				SNS: events.SNSEntity{MessageID: fmt.Sprintf("m-%d", i), TopicArn: topic, Message: `{"order_id":"o-42"}`}}}}
			if err := h(e.ctx(t, time.Minute), ev); err != nil {
				t.Fatal(err)
			}
		}
		if got := runs.get("all"); got != 2 {
			t.Errorf("handler ran %d times for two topics' messages with one key; want 2", got)
		}
	})
}

// The Lambda tenant id (tenant isolation mode) scopes the keys of the HTTP
// and Typed wrappers: two tenants with one key never share an outcome, one
// tenant replays its own.
func TestLambdaTenantScopes(t *testing.T) {
	t.Parallel()
	tenants := []string{"blue", "green", "blue"}
	e := newEnv(t)
	tenantCtx := func(i int) context.Context {
		return lambdacontext.NewContext(e.ctx(t, 10*time.Second), &lambdacontext.LambdaContext{AwsRequestID: fmt.Sprintf("req-%d", i), TenantID: tenants[i]})
	}
	r := withSub(v2Req("POST", "/orders", "k-1", `{"a":1}`), "user-1")
	got := serveHTTPAPI(t, tenantCtx, r, r, r)
	want := []answer{{201, false, "run 1"}, {201, false, "run 2"}, {201, true, "run 1"}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("http request %d (tenant %s): %v; want %v", i, tenants[i], got[i], want[i])
		}
	}

	var runs counter
	typed, err := idemlambda.Typed(e.runner, func(in map[string]string) (string, error) { return "order-" + in["id"], nil },
		func(ctx context.Context, in map[string]string) (string, error) {
			return fmt.Sprintf("run %d", runs.inc("all")), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []string{"run 1", "run 2", "run 1"} {
		out, err := typed(tenantCtx(i), map[string]string{"id": "1001"})
		if err != nil || out != w {
			t.Errorf("typed call %d (tenant %s) = %q, %v; want %q", i, tenants[i], out, err, w)
		}
	}
}
