package idemlambda

import "github.com/aws/aws-lambda-go/events"

// RESTIdentity returns the caller identity that scopes the keys of a REST
// API request, as RESTAPI computes it: labelled parts ("principal=...",
// "sub=...", "iam=...", "cognito=...", "apikey=...") in a fixed order, or
// nil for an anonymous request. With IdempotencyKeyHeader and HTTPKey it
// gives the stored key of a request, so operators' tools find its record.
// A wrapper given WithIdentityHeader(name) appends
// "header:<name in lower case>=<value>" when the request has that header.
// An ALB request has no identity but that one.
func RESTIdentity(req events.APIGatewayProxyRequest) []string {
	return restRequest(req).identity
}

// HTTPAPIIdentity returns the caller identity that scopes the keys of an
// HTTP API request (payload format 2.0), as HTTPAPI computes it; see
// RESTIdentity.
func HTTPAPIIdentity(req events.APIGatewayV2HTTPRequest) []string {
	return httpAPIRequest(req).identity
}

// FunctionURLIdentity returns the caller identity that scopes the keys of a
// Lambda function URL request, as FunctionURL computes it; see RESTIdentity.
func FunctionURLIdentity(req events.LambdaFunctionURLRequest) []string {
	return functionURLRequest(req).identity
}
