package idemlambda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// ErrUnidentifiedCaller is the error (checked with errors.Is) of a request
// that an authorizer let through but whose caller the wrapper cannot tell
// apart from other callers: a Lambda authorizer whose context has neither
// principalId nor sub, a JWT without a sub claim, an IAM caller without a
// userArn or callerId, or a Cognito identity pool's shared role session
// without its identity id. Such a request is never run in a key space that
// other callers share: the HTTP wrappers answer it 500 internal-error,
// without running the handler, and log it (verdict invalid_key). The error
// says what to change (see docs/security.md).
var ErrUnidentifiedCaller = errors.New("idemlambda: an authorizer let the request through, but it names no caller to scope the key by")

// cognitoSession is the role session name of the credentials a Cognito
// identity pool hands to its users (GetCredentialsForIdentity, the enhanced
// flow): one IAM session for all the users of a role, told apart only by
// their identity ids.
const cognitoSession = "CognitoIdentityCredentials"

// caller is a request's caller identity as the wrappers scope keys by it:
// labelled parts ("sub=...") in a fixed order, or the error of a caller an
// authorizer let through that cannot be identified. The zero value is an
// anonymous caller.
type caller struct {
	parts []string
	err   error
}

// add adds the part label=v for a value of any JSON type: a string as it
// is, another value (a number, a boolean, an array, an object: typed
// values of a Lambda authorizer's context) as its JSON text under the label
// "<label>#json", so that it never equals a string. A missing value (nil,
// "") adds nothing; add reports whether it added a part.
func (c *caller) add(label string, v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case string:
		return c.addString(label, v)
	}
	b, err := json.Marshal(v)
	if err != nil { // not a value decoded from JSON
		b = fmt.Appendf(nil, "%v", v)
	}
	return c.addString(label+"#json", string(b))
}

func (c *caller) addString(label, v string) bool {
	if v == "" {
		return false
	}
	c.parts = append(c.parts, label+"="+v)
	return true
}

// fail records why the caller cannot be identified (the first reason).
func (c *caller) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: "+format, append([]any{ErrUnidentifiedCaller}, args...)...)
	}
}

// iam adds an IAM caller: its userArn (or callerId), and the Cognito
// identity id of an identity pool user. A Cognito identity pool's shared
// session without an identity id cannot be identified.
func (c *caller) iam(userARN, callerID, identityID string) {
	if !c.addString("iam", userARN) && !c.addString("iam", callerID) {
		c.fail("IAM authorization let the request through, but its request context has neither userArn nor callerId")
		return
	}
	if !c.addString("cognito", identityID) && (strings.HasSuffix(userARN, "/"+cognitoSession) || strings.HasSuffix(callerID, ":"+cognitoSession)) {
		c.fail("the IAM caller is a Cognito identity pool's role session (%s), which all of the pool's users share, and the request context has no cognitoIdentity.identityId to tell them apart", cognitoSession)
	}
}

// cert adds the client certificate of a mutual TLS request.
func (c *caller) cert(subject, issuer, serial string) {
	c.addString("cert-subject", subject)
	c.addString("cert-issuer", issuer)
	c.addString("cert-serial", serial)
}

// restCaller is the caller of a REST API request: a Lambda authorizer's
// principalId, a Cognito user pool authorizer's iss and sub claims, the IAM
// caller, the API key and the client certificate, each where present.
func restCaller(r events.APIGatewayProxyRequest) caller {
	var c caller
	a := r.RequestContext.Authorizer
	if p, ok := a["principalId"]; ok && p != nil && !c.add("principal", p) {
		c.fail("a Lambda authorizer let the request through with an empty principalId")
	}
	if claims, ok := a["claims"].(map[string]any); ok {
		c.add("iss", claims["iss"])
		if !c.add("sub", claims["sub"]) {
			c.fail("a Cognito user pool authorizer let the request through, but the token's claims have no sub")
		}
	}
	ri := r.RequestContext.Identity
	if ri.UserArn != "" || ri.Caller != "" {
		c.iam(ri.UserArn, ri.Caller, ri.CognitoIdentityID)
	} else {
		c.addString("cognito", ri.CognitoIdentityID)
	}
	c.addString("apikey", ri.APIKeyID)
	if cert := ri.ClientCert; cert != nil {
		c.cert(cert.SubjectDN, cert.IssuerDN, cert.SerialNumber)
	}
	return c
}

// httpAPICaller is the caller of an HTTP API request: a JWT's iss and sub
// claims, the IAM caller (with its Cognito identity id), a Lambda
// authorizer's principalId and sub, and the client certificate.
func httpAPICaller(r events.APIGatewayV2HTTPRequest) caller {
	var c caller
	if a := r.RequestContext.Authorizer; a != nil {
		if a.JWT != nil {
			c.addString("iss", a.JWT.Claims["iss"])
			if !c.addString("sub", a.JWT.Claims["sub"]) {
				c.fail("a JWT authorizer let the request through, but the token has no sub claim")
			}
		}
		if a.IAM != nil {
			c.iam(a.IAM.UserARN, a.IAM.CallerID, a.IAM.CognitoIdentity.IdentityID)
		}
		if a.Lambda != nil {
			principal := c.add("principal", a.Lambda["principalId"])
			if !c.add("lambda-sub", a.Lambda["sub"]) && !principal {
				c.fail("a Lambda authorizer let the request through, but its context has neither principalId nor sub: return the caller's id as sub in the authorizer's context")
			}
		}
	}
	cert := r.RequestContext.Authentication.ClientCert
	c.cert(cert.SubjectDN, cert.IssuerDN, cert.SerialNumber)
	return c
}

// functionURLCaller is the caller of a function URL request with AWS_IAM
// auth: the IAM caller, with the Cognito identity id that
// FunctionURLHandler.Invoke read from the event (iam: nil when the handler
// was given the typed event alone).
func functionURLCaller(r events.LambdaFunctionURLRequest, iam *urlIAM) caller {
	var c caller
	if a := r.RequestContext.Authorizer; a != nil && a.IAM != nil {
		var identityID string
		if iam != nil && iam.CognitoIdentity != nil {
			identityID = iam.CognitoIdentity.IdentityID
		}
		c.iam(a.IAM.UserARN, a.IAM.CallerID, identityID)
		if c.err != nil && iam == nil {
			c.err = fmt.Errorf("%w (the handler was given the typed event, which has no cognitoIdentity: start it with lambda.Start(handler) as FunctionURL returns it, which reads the event as Lambda sends it)", c.err)
		}
	}
	return c
}

// urlIAM is what a function URL's requestContext.authorizer.iam carries
// that events.LambdaFunctionURLRequest does not keep.
type urlIAM struct {
	CognitoIdentity *struct {
		IdentityID string `json:"identityId"`
	} `json:"cognitoIdentity"`
}

// urlEvent is the part of a function URL event that urlIAM is read from.
type urlEvent struct {
	RequestContext struct {
		Authorizer *struct {
			IAM *urlIAM `json:"iam"`
		} `json:"authorizer"`
	} `json:"requestContext"`
}

// readURLIAM reads urlIAM from a function URL event as Lambda sends it: an
// event without an IAM authorizer gives an empty one.
func readURLIAM(event []byte) *urlIAM {
	var ev urlEvent
	if json.Unmarshal(event, &ev) != nil || ev.RequestContext.Authorizer == nil || ev.RequestContext.Authorizer.IAM == nil {
		return &urlIAM{}
	}
	return ev.RequestContext.Authorizer.IAM
}

type urlIAMKey struct{}

// urlIAMOf is the urlIAM FunctionURLHandler.Invoke put in ctx (nil: none).
func urlIAMOf(ctx context.Context) *urlIAM {
	iam, _ := ctx.Value(urlIAMKey{}).(*urlIAM)
	return iam
}

// FunctionURLHandler is the handler FunctionURL returns: a function of the
// handler's own type, so that it can be called with a typed event, and an
// aws-lambda-go lambda.Handler, so that lambda.Start(handler) gives it the
// event as Lambda sends it (Invoke).
type FunctionURLHandler func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error)

// Invoke handles a function URL event as Lambda sends it: it decodes the
// event as lambda.Start decodes a typed handler's event, and reads the
// Cognito identity id of an IAM caller (requestContext.authorizer.iam.
// cognitoIdentity.identityId), which events.LambdaFunctionURLRequest does
// not keep and which tells apart the users of a Cognito identity pool, who
// share one role session. The response is encoded as lambda.Start encodes
// a typed handler's (no HTML escaping, no trailing newline). lambda.Start
// calls Invoke instead of decoding the event itself because
// FunctionURLHandler implements lambda.Handler; wrapping the handler in a
// function of another type loses that, and the wrapper then refuses
// identity pool callers (ErrUnidentifiedCaller).
func (h FunctionURLHandler) Invoke(ctx context.Context, event []byte) ([]byte, error) {
	var req events.LambdaFunctionURLRequest
	if err := json.Unmarshal(event, &req); err != nil {
		return nil, err
	}
	resp, err := h(context.WithValue(ctx, urlIAMKey{}, readURLIAM(event)), req)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(resp); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// RESTIdentity returns the caller identity that scopes the keys of a REST
// API request, as RESTAPI computes it: labelled parts ("principal=...",
// "iss=...", "sub=...", "iam=...", "cognito=...", "apikey=...",
// "cert-subject=..."; a value of another JSON type than a string under
// "<label>#json") in a fixed order, or nil for an anonymous request. The
// error, for a request an authorizer let through whose caller cannot be
// identified, wraps ErrUnidentifiedCaller (the wrapper answered it 500 and
// stored nothing). With IdempotencyKeyHeader, HTTPKey and ScopedKey it
// gives the stored key of a request, so operators' tools find its record.
// A wrapper given WithIdentityHeader(name) appends
// "header:<name in lower case>=<value>" when the request has that header.
// An ALB request has no identity but that one.
func RESTIdentity(req events.APIGatewayProxyRequest) ([]string, error) {
	c := restCaller(req)
	return c.parts, c.err
}

// HTTPAPIIdentity returns the caller identity that scopes the keys of an
// HTTP API request (payload format 2.0), as HTTPAPI computes it; see
// RESTIdentity.
func HTTPAPIIdentity(req events.APIGatewayV2HTTPRequest) ([]string, error) {
	c := httpAPICaller(req)
	return c.parts, c.err
}

// FunctionURLIdentity returns the caller identity that scopes the keys of a
// Lambda function URL request, as FunctionURL computes it, from the event
// as Lambda sends it (JSON): events.LambdaFunctionURLRequest does not keep
// the Cognito identity id of an IAM caller. See RESTIdentity.
func FunctionURLIdentity(event []byte) ([]string, error) {
	var req events.LambdaFunctionURLRequest
	if err := json.Unmarshal(event, &req); err != nil {
		return nil, fmt.Errorf("idemlambda: not a function URL event: %w", err)
	}
	c := functionURLCaller(req, readURLIAM(event))
	return c.parts, c.err
}
