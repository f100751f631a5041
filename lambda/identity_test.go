package idemlambda_test

import (
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	idemlambda "github.com/idemgo/idem/lambda"
)

func TestRequestIdentity(t *testing.T) {
	t.Parallel()
	rest := events.APIGatewayProxyRequest{RequestContext: events.APIGatewayProxyRequestContext{
		Authorizer: map[string]any{"principalId": "user-1", "claims": map[string]any{"sub": "sub-1"}},
		Identity:   events.APIGatewayRequestIdentity{APIKeyID: "key-1"},
	}}
	httpAPI := events.APIGatewayV2HTTPRequest{RequestContext: events.APIGatewayV2HTTPRequestContext{
		Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "sub-2"}},
		},
	}}
	url := events.LambdaFunctionURLRequest{RequestContext: events.LambdaFunctionURLRequestContext{
		Authorizer: &events.LambdaFunctionURLRequestContextAuthorizerDescription{
			IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{CallerID: "AIDA1"},
		},
	}}
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"rest", idemlambda.RESTIdentity(rest), []string{"principal=user-1", "sub=sub-1", "apikey=key-1"}},
		{"rest anonymous", idemlambda.RESTIdentity(events.APIGatewayProxyRequest{}), nil},
		{"http api", idemlambda.HTTPAPIIdentity(httpAPI), []string{"sub=sub-2"}},
		{"function url", idemlambda.FunctionURLIdentity(url), []string{"iam=AIDA1"}},
	}
	for _, tc := range tests {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s: identity = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}
