package idemlambda_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	idemlambda "github.com/idemgo/idem/lambda"
)

// typed is v as an authorizer's context may carry it: the JSON value v
// spells (a number, a boolean, an object: typed context values), else the
// string v.
func typed(v string) any {
	var x any
	if json.Valid([]byte(v)) && json.Unmarshal([]byte(v), &x) == nil {
		return x
	}
	return v
}

// describe names values with their types, so that the number 42 and the
// string "42" are two values, and strings byte for byte (invalid UTF-8
// included).
func describe(xs ...any) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		if s, ok := x.(string); ok {
			parts[i] = "string:" + strconv.Quote(s)
			continue
		}
		b, _ := json.Marshal(x) // a value decoded from JSON: valid UTF-8
		parts[i] = fmt.Sprintf("%T:%s", x, b)
	}
	b, _ := json.Marshal(parts)
	return string(b)
}

// asSent is s as a JSON event carries it: invalid UTF-8 replaced, as
// encoding/json writes it (Lambda sends JSON in UTF-8).
func asSent(s string) string {
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

// callerShape makes the request of one authorizer shape for a caller named
// by two values, and says who that caller is: the values that tell the
// platform's callers apart, with their types.
type callerShape struct {
	name     string
	identity func(v, aux string) ([]string, error)
	who      func(v, aux string) string
}

func fuzzShapes() []callerShape {
	pair := func(v, aux string) string { return describe(v, aux) }
	typedPair := func(v, aux string) string { return describe(typed(v), typed(aux)) }
	return []callerShape{
		{"rest lambda authorizer and api key", func(v, aux string) ([]string, error) {
			return idemlambda.RESTIdentity(restWith(map[string]any{"principalId": typed(v), "clientId": float64(1)}, events.APIGatewayRequestIdentity{APIKeyID: aux}))
		}, func(v, aux string) string { return describe(typed(v), aux) }},
		{"rest cognito user pool", func(v, aux string) ([]string, error) {
			return idemlambda.RESTIdentity(restWith(map[string]any{"claims": map[string]any{"sub": typed(v), "iss": aux}}, events.APIGatewayRequestIdentity{}))
		}, func(v, aux string) string { return describe(typed(v), aux) }},
		{"rest iam", func(v, aux string) ([]string, error) {
			return idemlambda.RESTIdentity(restWith(nil, events.APIGatewayRequestIdentity{UserArn: v, Caller: caller1, CognitoIdentityID: aux}))
		}, pair},
		{"rest mutual tls", func(v, aux string) ([]string, error) {
			return idemlambda.RESTIdentity(restWith(nil, events.APIGatewayRequestIdentity{ClientCert: &events.APIGatewayCustomAuthorizerRequestTypeRequestIdentityClientCert{SubjectDN: v, IssuerDN: "CN=ca", SerialNumber: aux}}))
		}, pair},
		{"http api jwt", func(v, aux string) ([]string, error) {
			return idemlambda.HTTPAPIIdentity(v2With(v2JWT(map[string]string{"sub": v, "iss": aux})))
		}, pair},
		{"http api iam", func(v, aux string) ([]string, error) {
			return idemlambda.HTTPAPIIdentity(v2With(v2IAM(v, cognitoCaller, aux)))
		}, pair},
		{"http api lambda authorizer", func(v, aux string) ([]string, error) {
			return idemlambda.HTTPAPIIdentity(v2With(v2Lambda(map[string]any{"principalId": typed(v), "sub": typed(aux), "booleanKey": true})))
		}, typedPair},
		{"http api mutual tls", func(v, aux string) ([]string, error) {
			r := v2With(nil)
			r.RequestContext.Authentication.ClientCert = events.APIGatewayV2HTTPRequestContextAuthenticationClientCert{SubjectDN: v, IssuerDN: aux, SerialNumber: "1"}
			return idemlambda.HTTPAPIIdentity(r)
		}, pair},
		{"function url iam", func(v, aux string) ([]string, error) {
			iam, _ := json.Marshal(map[string]any{"userArn": v, "callerId": caller1, "cognitoIdentity": map[string]any{"identityId": aux}})
			return idemlambda.FunctionURLIdentity(urlEventJSON(string(iam)))
		}, func(v, aux string) string { return pair(asSent(v), asSent(aux)) }},
	}
}

// FuzzCallerIdentity: over every authorizer shape AWS documents (IAM with
// Cognito identity pools, Cognito user pools, JWT, Lambda authorizers with
// typed context values, API keys, mutual TLS; REST APIs, HTTP APIs,
// function URLs), two distinct callers never share a key scope, one caller
// always has the same, a caller that cannot be identified is an error
// wrapping ErrUnidentifiedCaller, and no value makes the extraction panic.
func FuzzCallerIdentity(f *testing.F) {
	for _, s := range []struct {
		shape            uint8
		a, auxA, b, auxB string
	}{
		{0, "alice", "", "alice\napikey=k-7", ""},
		{0, "alice", "k-7", "alice\napikey=k-7", ""},
		{0, "42", "", `"42"`, ""},
		{1, "user-1", "https://a.example/", "user-1", "https://b.example/"},
		{2, cognitoARN, identityA, cognitoARN, "us-east-1:other"},
		{2, cognitoARN, "", cognitoARN, identityA},
		{4, "user-1", "https://a.example/", "user-1", "https://a.example/"},
		{5, cognitoARN, identityA, cognitoARN, "us-east-1:other"},
		{6, "42", "", "43", ""},
		{6, "{}", "true", "", "true"},
		{6, `{"a":1,"b":2}`, "", `{"b":2,"a":1}`, ""},
		{8, cognitoARN, identityA, cognitoARN, ""},
		{3, "CN=a", "1", "CN=a\ncert-serial=1", ""},
	} {
		f.Add(s.shape, s.a, s.auxA, s.b, s.auxB)
	}
	shapes := fuzzShapes()
	f.Fuzz(func(t *testing.T, shape uint8, a, auxA, b, auxB string) {
		s := shapes[int(shape)%len(shapes)]
		idA, errA := s.identity(a, auxA)
		idB, errB := s.identity(b, auxB)
		for _, err := range []error{errA, errB} {
			if err != nil && !errors.Is(err, idemlambda.ErrUnidentifiedCaller) {
				t.Fatalf("%s: error %v does not wrap ErrUnidentifiedCaller", s.name, err)
			}
		}
		if errA != nil || errB != nil {
			return
		}
		keyA, err := idemlambda.HTTPKey("k-1", idA)
		if err != nil {
			t.Fatalf("%s: HTTPKey(%q): %v", s.name, idA, err)
		}
		keyB, err := idemlambda.HTTPKey("k-1", idB)
		if err != nil {
			t.Fatalf("%s: HTTPKey(%q): %v", s.name, idB, err)
		}
		same := s.who(a, auxA) == s.who(b, auxB)
		if same != (keyA == keyB) {
			t.Fatalf("%s: callers %s and %s (the same: %v) have identities %q and %q, keys equal: %v",
				s.name, s.who(a, auxA), s.who(b, auxB), same, idA, idB, keyA == keyB)
		}
	})
}
