package idemlambda_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	idemlambda "github.com/idemgo/idem/lambda"
)

// docTable returns the rows of the first table after the heading of
// docs/security.md, each a list of its cells.
func docTable(t *testing.T, heading string) [][]string {
	t.Helper()
	raw, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("docs/security.md has no %q", heading)
	}
	var rows [][]string
	inTable := false
	for _, line := range strings.Split(doc[start+len(heading)+2:], "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		rows = append(rows, cells)
	}
	if len(rows) < 2 {
		t.Fatalf("docs/security.md: no table after %q", heading)
	}
	return rows[1:] // without the header
}

// scopeScenarios run, for each scope a wrapper adds with ScopedKey, a
// wrapper whose event carries it with the value "v-1", and return the key
// the handler was given (StoredKey) and the key without the scope.
var scopeScenarios = map[string]func(t *testing.T) (stored, unscoped string){
	idemlambda.ScopeTenant: func(t *testing.T) (string, string) {
		e := newEnv(t)
		var got string
		h, err := idemlambda.Typed(e.runner, func(string) (string, error) { return "order-1001", nil }, func(ctx context.Context, _ string) (string, error) {
			got, _ = idemlambda.StoredKey(ctx)
			return "", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h(lambdacontext.NewContext(e.ctx(t, time.Minute), &lambdacontext.LambdaContext{TenantID: "v-1"}), "in"); err != nil {
			t.Fatal(err)
		}
		return got, "order-1001"
	},
	idemlambda.ScopeMessageGroup: func(t *testing.T) (string, string) {
		msg := events.SQSMessage{MessageId: "m-1", Body: `{"id":"o-1"}`, Attributes: map[string]string{"MessageGroupId": "v-1"}}
		return sqsStoredKey(t, msg, idemlambda.WithMessageGroupTenant()), eventKey(t, "o-1")
	},
	idemlambda.ScopeTopic: func(t *testing.T) (string, string) {
		body := `{"Type":"Notification","MessageId":"n-1","TopicArn":"v-1","Message":"{\"id\":\"o-1\"}"}`
		return sqsStoredKey(t, events.SQSMessage{MessageId: "m-1", Body: body}, idemlambda.WithEnvelope(idemlambda.SNSEnvelope())), eventKey(t, "o-1")
	},
	idemlambda.ScopeAccount: func(t *testing.T) (string, string) {
		body := `{"id":"e-1","detail-type":"T","source":"s","account":"v-1","detail":{"id":"o-1"}}`
		return sqsStoredKey(t, events.SQSMessage{MessageId: "m-1", Body: body}, idemlambda.WithEnvelope(idemlambda.EventBridgeEnvelope())), eventKey(t, "o-1")
	},
}

func eventKey(t *testing.T, id string) string {
	k, err := idemlambda.EventKey(id, "docs")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// sqsStoredKey runs msg through an SQS wrapper keyed by its body's id and
// returns the key its handler was given.
func sqsStoredKey(t *testing.T, msg events.SQSMessage, opts ...idemlambda.BatchOption) string {
	e := newEnv(t)
	var got string
	h, err := idemlambda.SQS(e.runner, "docs", idemlambda.KeyFromBodyField("id"), func(ctx context.Context, _ events.SQSMessage) ([]byte, error) {
		got, _ = idemlambda.StoredKey(ctx)
		return nil, nil
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := h(e.ctx(t, time.Minute), events.SQSEvent{Records: []events.SQSMessage{msg}}); len(resp.BatchItemFailures) > 0 {
		t.Fatalf("reported %v", resp.BatchItemFailures)
	}
	return got
}

// TestSecurityDocs holds docs/security.md's tables to the code: the scopes
// written label=<value> are the wrappers' scopes, in ScopedKey's order,
// each set where the table says; the parts of the caller identity are, for
// each event source, those the wrappers take, in their order.
func TestSecurityDocs(t *testing.T) {
	t.Parallel()
	label := regexp.MustCompile("^`([a-z-]+)=<[a-z]+>`$")
	var labels []string
	for _, row := range docTable(t, "## What a stored key is made of") {
		m := label.FindStringSubmatch(row[1])
		if m == nil {
			continue
		}
		labels = append(labels, m[1])
		scenario, ok := scopeScenarios[m[1]]
		if !ok {
			t.Errorf("scope %s: the code has no such scope", m[1])
			continue
		}
		stored, unscoped := scenario(t)
		if want, err := idemlambda.ScopedKey(unscoped, m[1]+"=v-1"); err != nil || stored != want {
			t.Errorf("scope %s (set by %s): stored key %s; want %s", m[1], row[2], stored, want)
		}
	}
	if want := []string{idemlambda.ScopeTenant, idemlambda.ScopeMessageGroup, idemlambda.ScopeTopic, idemlambda.ScopeAccount}; !slices.Equal(labels, want) {
		t.Errorf("the scopes table names %q; want %q, in that order", labels, want)
	}

	parts := map[string][]string{}
	for _, row := range docTable(t, "## The caller identity") {
		for _, p := range regexp.MustCompile("`([a-z:<>-]+)`").FindAllStringSubmatch(row[2], -1) {
			parts[row[0]] = append(parts[row[0]], p[1])
		}
	}
	for source, got := range fullIdentities(t) {
		if !slices.Equal(parts[source], got) {
			t.Errorf("%s: the table lists the parts %q; the wrappers take %q", source, parts[source], got)
		}
	}
	if len(parts["ALB"]) != 0 {
		t.Errorf("ALB: the table lists parts %q; an ALB's event has none", parts["ALB"])
	}
	if want := []string{"header:<name>"}; !slices.Equal(parts["any HTTP wrapper"], want) {
		t.Errorf("WithIdentityHeader: the table lists %q; want %q", parts["any HTTP wrapper"], want)
	}
	checkIdentityHeader(t)
}

// fullIdentities returns, for each event source of the table, the labels
// of the identity of a request that has every field the wrappers read.
func fullIdentities(t *testing.T) map[string][]string {
	cert := &events.APIGatewayCustomAuthorizerRequestTypeRequestIdentityClientCert{SubjectDN: "CN=c", IssuerDN: "CN=ca", SerialNumber: "1"}
	rest, restErr := idemlambda.RESTIdentity(restWith(map[string]any{"principalId": "p", "claims": map[string]any{"sub": "s", "iss": "i"}},
		events.APIGatewayRequestIdentity{UserArn: cognitoARN, Caller: cognitoCaller, CognitoIdentityID: identityA, APIKeyID: "k", ClientCert: cert}))
	v2 := v2With(&events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		JWT:    &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "s", "iss": "i"}},
		IAM:    v2IAM(cognitoARN, cognitoCaller, identityA).IAM,
		Lambda: map[string]any{"principalId": float64(1), "sub": "s"},
	})
	v2.RequestContext.Authentication.ClientCert = events.APIGatewayV2HTTPRequestContextAuthenticationClientCert{SubjectDN: "CN=c", IssuerDN: "CN=ca", SerialNumber: "1"}
	httpAPI, httpErr := idemlambda.HTTPAPIIdentity(v2)
	iam, _ := json.Marshal(map[string]any{"userArn": cognitoARN, "callerId": cognitoCaller, "cognitoIdentity": map[string]any{"identityId": identityA}})
	url, urlErr := idemlambda.FunctionURLIdentity(urlEventJSON(string(iam)))
	for _, err := range []error{restErr, httpErr, urlErr} {
		if err != nil {
			t.Fatal(err)
		}
	}
	labels := func(id []string) []string {
		var out []string
		for _, p := range id {
			l, _, _ := strings.Cut(p, "=")
			out = append(out, strings.TrimSuffix(l, "#json"))
		}
		return out
	}
	return map[string][]string{"REST API": labels(rest), "HTTP API": labels(httpAPI), "function URL": labels(url)}
}

// checkIdentityHeader: WithIdentityHeader(name) adds header:<name> to the
// caller identity.
func checkIdentityHeader(t *testing.T) {
	e := newEnv(t)
	var got string
	h, err := idemlambda.ALB(e.runner, func(ctx context.Context, _ events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		got, _ = idemlambda.StoredKey(ctx)
		return events.ALBTargetGroupResponse{StatusCode: 200}, nil
	}, idemlambda.WithIdentityHeader("X-Caller"))
	if err != nil {
		t.Fatal(err)
	}
	req := events.ALBTargetGroupRequest{HTTPMethod: "POST", Path: "/p", Headers: map[string]string{"idempotency-key": "k-1", "x-caller": "u-1"}}
	if _, err := h(e.ctx(t, time.Minute), req); err != nil {
		t.Fatal(err)
	}
	if want, _ := idemlambda.HTTPKey("k-1", []string{"header:x-caller=u-1"}); got != want {
		t.Errorf("WithIdentityHeader(X-Caller): stored key %s; want %s", got, want)
	}
}
