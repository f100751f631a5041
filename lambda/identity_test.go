package idemlambda_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	idemlambda "github.com/idemgo/idem/lambda"
)

// The authorizer shapes AWS documents, as aws-lambda-go decodes them.

const (
	userARN    = "arn:aws:iam::123456789012:user/alice"
	caller1    = "AIDAJQABLZS4A3QDU576Q"
	identityA  = "us-east-1:3f291106-8703-466b-8f2b-3ecee1ca56ce"
	poolIssuer = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_AAAAAAAAA"
)

func restWith(a map[string]any, id events.APIGatewayRequestIdentity) events.APIGatewayProxyRequest {
	return events.APIGatewayProxyRequest{RequestContext: events.APIGatewayProxyRequestContext{Authorizer: a, Identity: id}}
}

func v2With(a *events.APIGatewayV2HTTPRequestContextAuthorizerDescription) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{RequestContext: events.APIGatewayV2HTTPRequestContext{Authorizer: a}}
}

func v2IAM(arn, callerID, identityID string) *events.APIGatewayV2HTTPRequestContextAuthorizerDescription {
	return &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
		AccountID: "123456789012", UserARN: arn, CallerID: callerID,
		CognitoIdentity: events.APIGatewayV2HTTPRequestContextAuthorizerCognitoIdentity{IdentityID: identityID},
	}}
}

func v2Lambda(ctx map[string]any) *events.APIGatewayV2HTTPRequestContextAuthorizerDescription {
	return &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: ctx}
}

func v2JWT(claims map[string]string) *events.APIGatewayV2HTTPRequestContextAuthorizerDescription {
	return &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims}}
}

// urlEventJSON is a function URL event as Lambda sends it, with iam as its
// requestContext.authorizer.iam ("" for no authorizer).
func urlEventJSON(iam string) []byte {
	a := ""
	if iam != "" {
		a = `"authorizer": {"iam": ` + iam + `},`
	}
	return []byte(`{"version":"2.0","rawPath":"/pay","headers":{},"requestContext":{` + a + `"http":{"method":"POST","path":"/pay"}}}`)
}

func TestRequestIdentity(t *testing.T) {
	t.Parallel()
	mtls := &events.APIGatewayCustomAuthorizerRequestTypeRequestIdentityClientCert{SubjectDN: "CN=client-1", IssuerDN: "CN=My Private CA", SerialNumber: "1"}
	v2mtls := v2With(nil)
	v2mtls.RequestContext.Authentication.ClientCert = events.APIGatewayV2HTTPRequestContextAuthenticationClientCert{SubjectDN: "CN=client-1", IssuerDN: "CN=My Private CA", SerialNumber: "1"}
	identity := func(parts []string, err error) func() ([]string, error) {
		return func() ([]string, error) { return parts, err }
	}
	tests := []struct {
		name string
		got  func() ([]string, error)
		want []string // nil with unidentified: ErrUnidentifiedCaller
		bad  bool
	}{
		// REST APIs: requestContext.authorizer and requestContext.identity.
		{"rest anonymous", identity(idemlambda.RESTIdentity(restWith(nil, events.APIGatewayRequestIdentity{}))), nil, false},
		{"rest lambda authorizer", identity(idemlambda.RESTIdentity(restWith(map[string]any{"principalId": "user-1", "stringKey": "v"}, events.APIGatewayRequestIdentity{}))), []string{"principal=user-1"}, false},
		{"rest lambda authorizer, numeric principal", identity(idemlambda.RESTIdentity(restWith(map[string]any{"principalId": float64(42), "clientId": float64(1)}, events.APIGatewayRequestIdentity{}))), []string{"principal#json=42"}, false},
		{"rest lambda authorizer, empty principal", identity(idemlambda.RESTIdentity(restWith(map[string]any{"principalId": ""}, events.APIGatewayRequestIdentity{}))), nil, true},
		{"rest cognito user pool", identity(idemlambda.RESTIdentity(restWith(map[string]any{"claims": map[string]any{"sub": "sub-1", "iss": poolIssuer, "email": "a@example.com"}}, events.APIGatewayRequestIdentity{}))), []string{"iss=" + poolIssuer, "sub=sub-1"}, false},
		{"rest cognito claims without sub", identity(idemlambda.RESTIdentity(restWith(map[string]any{"claims": map[string]any{"iss": poolIssuer}}, events.APIGatewayRequestIdentity{}))), nil, true},
		{"rest context value named claims", identity(idemlambda.RESTIdentity(restWith(map[string]any{"principalId": "user-1", "claims": "none"}, events.APIGatewayRequestIdentity{}))), []string{"principal=user-1"}, false},
		{"rest iam user", identity(idemlambda.RESTIdentity(restWith(nil, events.APIGatewayRequestIdentity{UserArn: userARN, Caller: caller1, AccountID: "123456789012"}))), []string{"iam=" + userARN}, false},
		{"rest iam caller only", identity(idemlambda.RESTIdentity(restWith(nil, events.APIGatewayRequestIdentity{Caller: caller1}))), []string{"iam=" + caller1}, false},
		{"rest identity pool user", identity(idemlambda.RESTIdentity(restWith(nil, events.APIGatewayRequestIdentity{UserArn: cognitoARN, Caller: cognitoCaller, CognitoIdentityID: identityA}))), []string{"iam=" + cognitoARN, "cognito=" + identityA}, false},
		{"rest identity pool session without identity", identity(idemlambda.RESTIdentity(restWith(nil, events.APIGatewayRequestIdentity{UserArn: cognitoARN, Caller: cognitoCaller}))), nil, true},
		{"rest api key", identity(idemlambda.RESTIdentity(restWith(nil, events.APIGatewayRequestIdentity{APIKeyID: "key-1", APIKey: "secret"}))), []string{"apikey=key-1"}, false},
		{"rest mutual tls", identity(idemlambda.RESTIdentity(restWith(nil, events.APIGatewayRequestIdentity{ClientCert: mtls}))), []string{"cert-subject=CN=client-1", "cert-issuer=CN=My Private CA", "cert-serial=1"}, false},
		{"rest every one", identity(idemlambda.RESTIdentity(restWith(map[string]any{"principalId": "user-1", "claims": map[string]any{"sub": "sub-1"}}, events.APIGatewayRequestIdentity{APIKeyID: "key-1"}))), []string{"principal=user-1", "sub=sub-1", "apikey=key-1"}, false},
		// HTTP APIs: requestContext.authorizer.{jwt,iam,lambda} and
		// requestContext.authentication.clientCert.
		{"http api anonymous", identity(idemlambda.HTTPAPIIdentity(v2With(nil))), nil, false},
		{"http api jwt", identity(idemlambda.HTTPAPIIdentity(v2With(v2JWT(map[string]string{"sub": "sub-2", "iss": poolIssuer, "scope": "orders"})))), []string{"iss=" + poolIssuer, "sub=sub-2"}, false},
		{"http api jwt without sub", identity(idemlambda.HTTPAPIIdentity(v2With(v2JWT(map[string]string{"iss": poolIssuer})))), nil, true},
		{"http api iam user", identity(idemlambda.HTTPAPIIdentity(v2With(v2IAM(userARN, caller1, "")))), []string{"iam=" + userARN}, false},
		{"http api identity pool user", identity(idemlambda.HTTPAPIIdentity(v2With(v2IAM(cognitoARN, cognitoCaller, identityA)))), []string{"iam=" + cognitoARN, "cognito=" + identityA}, false},
		{"http api identity pool session without identity", identity(idemlambda.HTTPAPIIdentity(v2With(v2IAM(cognitoARN, cognitoCaller, "")))), nil, true},
		{"http api iam without caller", identity(idemlambda.HTTPAPIIdentity(v2With(v2IAM("", "", "")))), nil, true},
		{"http api lambda principalId", identity(idemlambda.HTTPAPIIdentity(v2With(v2Lambda(map[string]any{"principalId": "user-1"})))), []string{"principal=user-1"}, false},
		{"http api lambda numeric principalId", identity(idemlambda.HTTPAPIIdentity(v2With(v2Lambda(map[string]any{"principalId": float64(42), "numberKey": float64(1)})))), []string{"principal#json=42"}, false},
		{"http api lambda sub", identity(idemlambda.HTTPAPIIdentity(v2With(v2Lambda(map[string]any{"sub": "user-1"})))), []string{"lambda-sub=user-1"}, false},
		{"http api lambda typed sub", identity(idemlambda.HTTPAPIIdentity(v2With(v2Lambda(map[string]any{"sub": map[string]any{"tenant": "t-1", "user": float64(7)}})))), []string{`lambda-sub#json={"tenant":"t-1","user":7}`}, false},
		{"http api lambda naming no caller", identity(idemlambda.HTTPAPIIdentity(v2With(v2Lambda(map[string]any{"stringKey": "value", "booleanKey": true})))), nil, true},
		{"http api lambda empty context", identity(idemlambda.HTTPAPIIdentity(v2With(v2Lambda(map[string]any{})))), nil, true},
		{"http api mutual tls", identity(idemlambda.HTTPAPIIdentity(v2mtls)), []string{"cert-subject=CN=client-1", "cert-issuer=CN=My Private CA", "cert-serial=1"}, false},
		// Function URLs: requestContext.authorizer.iam, as Lambda sends it.
		{"function url anonymous", identity(idemlambda.FunctionURLIdentity(urlEventJSON(""))), nil, false},
		{"function url iam user", identity(idemlambda.FunctionURLIdentity(urlEventJSON(`{"userArn":"` + userARN + `","callerId":"` + caller1 + `","cognitoIdentity":null,"principalOrgId":null}`))), []string{"iam=" + userARN}, false},
		{"function url identity pool user", identity(idemlambda.FunctionURLIdentity(urlEventJSON(`{"userArn":"` + cognitoARN + `","callerId":"` + cognitoCaller + `","cognitoIdentity":{"amr":["authenticated"],"identityId":"` + identityA + `","identityPoolId":"us-east-1:pool"}}`))), []string{"iam=" + cognitoARN, "cognito=" + identityA}, false},
		{"function url identity pool session without identity", identity(idemlambda.FunctionURLIdentity(urlEventJSON(`{"userArn":"` + cognitoARN + `","callerId":"` + cognitoCaller + `","cognitoIdentity":null}`))), nil, true},
	}
	for _, tc := range tests {
		got, err := tc.got()
		switch {
		case tc.bad && !errors.Is(err, idemlambda.ErrUnidentifiedCaller):
			t.Errorf("%s: identity %q, %v; want an error wrapping ErrUnidentifiedCaller", tc.name, got, err)
		case !tc.bad && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("%s: identity = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := idemlambda.FunctionURLIdentity([]byte("not json")); err == nil {
		t.Error("FunctionURLIdentity of a body that is not JSON: no error")
	}
}

// A typed value and the string of its JSON text are two callers.
func TestTypedIdentityValues(t *testing.T) {
	t.Parallel()
	number, _ := idemlambda.HTTPAPIIdentity(v2With(v2Lambda(map[string]any{"principalId": float64(42)})))
	text, _ := idemlambda.HTTPAPIIdentity(v2With(v2Lambda(map[string]any{"principalId": "42"})))
	k1, err1 := idemlambda.HTTPKey("k-1", number)
	k2, err2 := idemlambda.HTTPKey("k-1", text)
	if err1 != nil || err2 != nil || k1 == k2 {
		t.Errorf("principalId 42 and \"42\": keys %s, %s (%v, %v); want two keys", k1, k2, err1, err2)
	}
	b, _ := json.Marshal(number)
	if string(b) != `["principal#json=42"]` {
		t.Errorf("numeric principalId: identity %s", b)
	}
}
