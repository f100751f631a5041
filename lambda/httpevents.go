package idemlambda

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
)

// Shapes: the names, in a stored response's envelope, of the response
// types. An ALB's response is stored under the header mode of its request.
const (
	shapeREST        = "rest-api"
	shapeHTTPAPI     = "http-api"
	shapeFunctionURL = "function-url"
	shapeALB         = "alb"
	shapeALBMulti    = "alb-multi-value"
)

// lambdaShapes are the shapes decode adapts to one another; "" is a
// response stored before the envelope named shapes.
var lambdaShapes = map[string]bool{"": true, shapeREST: true, shapeHTTPAPI: true, shapeFunctionURL: true, shapeALB: true, shapeALBMulti: true}

// httpRequest is the event-neutral view of a request.
type httpRequest struct {
	method, path string
	headers      map[string]string
	multi        map[string][]string // REST, and ALB with multi-value headers
	body         string
	base64       bool
	identity     []string // labelled parts, in a fixed order
	unidentified error    // an authorizer ran but names no caller (ErrUnidentifiedCaller)
	shape        string   // the stored shape of the answer
	multiAnswer  bool     // the wrapper's headers go in MultiValueHeaders
}

// flavour is what the HTTP machinery knows of one event source: the
// request's view (in the invocation's context), and the conversions of its
// response type to and from the neutral view.
type flavour[Req, Resp any] struct {
	name    string // the constructor
	request func(context.Context, Req) httpRequest
	view    func(Resp) response
	native  func(response) Resp
}

var restFlavour = flavour[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse]{
	name:    "RESTAPI",
	request: restRequest,
	view: func(r events.APIGatewayProxyResponse) response {
		return response{StatusCode: r.StatusCode, Headers: r.Headers, MultiValueHeaders: r.MultiValueHeaders, Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
	},
	native: func(v response) events.APIGatewayProxyResponse {
		return events.APIGatewayProxyResponse{StatusCode: v.StatusCode, Headers: v.Headers, MultiValueHeaders: v.MultiValueHeaders, Body: v.Body, IsBase64Encoded: v.IsBase64Encoded}
	},
}

var httpAPIFlavour = flavour[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse]{
	name:    "HTTPAPI",
	request: httpAPIRequest,
	view: func(r events.APIGatewayV2HTTPResponse) response {
		return response{StatusCode: r.StatusCode, Headers: r.Headers, MultiValueHeaders: r.MultiValueHeaders, Cookies: r.Cookies, Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
	},
	native: func(v response) events.APIGatewayV2HTTPResponse {
		return events.APIGatewayV2HTTPResponse{StatusCode: v.StatusCode, Headers: v.Headers, MultiValueHeaders: v.MultiValueHeaders, Cookies: v.Cookies, Body: v.Body, IsBase64Encoded: v.IsBase64Encoded}
	},
}

var functionURLFlavour = flavour[events.LambdaFunctionURLRequest, events.LambdaFunctionURLResponse]{
	name:    "FunctionURL",
	request: functionURLRequest,
	view: func(r events.LambdaFunctionURLResponse) response {
		return response{StatusCode: r.StatusCode, Headers: r.Headers, Cookies: r.Cookies, Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
	},
	native: func(v response) events.LambdaFunctionURLResponse {
		return events.LambdaFunctionURLResponse{StatusCode: v.StatusCode, Headers: v.Headers, Cookies: v.Cookies, Body: v.Body, IsBase64Encoded: v.IsBase64Encoded}
	},
}

var albFlavour = flavour[events.ALBTargetGroupRequest, events.ALBTargetGroupResponse]{
	name:    "ALB",
	request: albRequest,
	view: func(r events.ALBTargetGroupResponse) response {
		return response{StatusCode: r.StatusCode, StatusDescription: r.StatusDescription, Headers: r.Headers, MultiValueHeaders: r.MultiValueHeaders, Body: r.Body, IsBase64Encoded: r.IsBase64Encoded}
	},
	native: func(v response) events.ALBTargetGroupResponse {
		return events.ALBTargetGroupResponse{StatusCode: v.StatusCode, StatusDescription: v.StatusDescription, Headers: v.Headers, MultiValueHeaders: v.MultiValueHeaders, Body: v.Body, IsBase64Encoded: v.IsBase64Encoded}
	},
}

func restRequest(_ context.Context, r events.APIGatewayProxyRequest) httpRequest {
	c := restCaller(r)
	method := r.HTTPMethod
	if method == "" {
		method = r.RequestContext.HTTPMethod
	}
	return httpRequest{method: method, path: r.Path, headers: r.Headers, multi: r.MultiValueHeaders, body: r.Body, base64: r.IsBase64Encoded, identity: c.parts, unidentified: c.err, shape: shapeREST}
}

func httpAPIRequest(_ context.Context, r events.APIGatewayV2HTTPRequest) httpRequest {
	c := httpAPICaller(r)
	path := r.RawPath
	if path == "" {
		path = r.RequestContext.HTTP.Path
	}
	return httpRequest{method: r.RequestContext.HTTP.Method, path: path, headers: r.Headers, body: r.Body, base64: r.IsBase64Encoded, identity: c.parts, unidentified: c.err, shape: shapeHTTPAPI}
}

// functionURLRequest: the Cognito identity id of an IAM caller is read
// from the event as Lambda sent it (FunctionURLHandler.Invoke puts it in
// ctx).
func functionURLRequest(ctx context.Context, r events.LambdaFunctionURLRequest) httpRequest {
	c := functionURLCaller(r, urlIAMOf(ctx))
	path := r.RawPath
	if path == "" {
		path = r.RequestContext.HTTP.Path
	}
	return httpRequest{method: r.RequestContext.HTTP.Method, path: path, headers: r.Headers, body: r.Body, base64: r.IsBase64Encoded, identity: c.parts, unidentified: c.err, shape: shapeFunctionURL}
}

// albRequest: an ALB has no caller identity of its own (WithIdentityHeader
// adds one). A target group with multi-value headers sends
// multiValueHeaders and no headers, and reads only multiValueHeaders back.
func albRequest(_ context.Context, r events.ALBTargetGroupRequest) httpRequest {
	req := httpRequest{method: r.HTTPMethod, path: r.Path, headers: r.Headers, multi: r.MultiValueHeaders, body: r.Body, base64: r.IsBase64Encoded, shape: shapeALB}
	if len(r.MultiValueHeaders) > 0 {
		req.shape, req.multiAnswer = shapeALBMulti, true
	}
	return req
}
