package idemtest

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"
)

// APIID is the HTTP API of the builders' requests; Host its default domain.
const (
	// APIID is the id of the HTTP API the requests go through.
	APIID = "a1b2c3d4e5"
	// Host is the HTTP API's default domain, the requests' host header.
	Host = APIID + ".execute-api." + Region + ".amazonaws.com"
)

// SourceIP is the address the builders' requests come from.
const SourceIP = "198.51.100.7"

// requests numbers the requests' ids: API Gateway gives every request,
// retries included, an id of its own.
var requests struct {
	sync.Mutex
	n int
}

func nextRequestID() string {
	requests.Lock()
	defer requests.Unlock()
	requests.n++
	return "req-" + strconv.Itoa(requests.n)
}

// HTTPAPIRequest returns a request as an API Gateway HTTP API (payload
// format 2.0) invokes a function: method, path and body, the headers (names
// in lower case, as HTTP APIs pass them; "idempotency-key" for an
// idemlambda.HTTPAPI key), and the request context: a request id new on
// every call, stage $default, route "METHOD path", the source IP, the time
// of SentAt. There is no authorizer (add RequestContext.Authorizer for a
// caller identity).
func HTTPAPIRequest(method, path, body string, headers map[string]string) events.APIGatewayV2HTTPRequest {
	h := map[string]string{"host": Host, "user-agent": "curl/8.5.0", "content-length": strconv.Itoa(len(body)),
		"x-forwarded-for": SourceIP, "x-forwarded-proto": "https", "x-forwarded-port": "443"}
	if body != "" {
		h["content-type"] = "application/json"
	}
	for k, v := range headers {
		h[strings.ToLower(k)] = v
	}
	id := nextRequestID()
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: method + " " + path, RawPath: path, Headers: h, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: method + " " + path, AccountID: Account, Stage: "$default", RequestID: id, APIID: APIID,
			DomainName: Host, DomainPrefix: APIID, Time: SentAt.Format("02/Jan/2006:15:04:05 -0700"), TimeEpoch: SentAt.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: SourceIP, UserAgent: h["user-agent"],
			},
		},
	}
}

// FunctionURLRequest returns a request as a Lambda function URL invokes
// the function (payload format 2.0, like HTTPAPIRequest's, with the
// function URL's domain and no route).
func FunctionURLRequest(method, path, body string, headers map[string]string) events.LambdaFunctionURLRequest {
	r := HTTPAPIRequest(method, path, body, headers)
	host := "abcdefghijklmnopqrstuvwxyz012345.lambda-url." + Region + ".on.aws"
	r.Headers["host"] = host
	return events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: path, Headers: r.Headers, Body: body,
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID: Account, RequestID: r.RequestContext.RequestID, DomainName: host, DomainPrefix: host[:32],
			Time: r.RequestContext.Time, TimeEpoch: r.RequestContext.TimeEpoch,
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{
				Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: SourceIP, UserAgent: r.Headers["user-agent"],
			},
		},
	}
}

// Delivery is one HTTP request as a webhook sender makes it: method, path,
// headers and body, to be given to a handler as an HTTP API or function URL
// event (HTTPAPIRequest, FunctionURLRequest) or as a net/http request
// (Request). A sender's retry of the same delivery is the same Delivery
// (with, for Stripe, a new signature).
type Delivery struct {
	Method string      // Method is POST.
	Path   string      // Path is the endpoint's path, such as /webhooks/github.
	Header http.Header // Header holds the sender's headers, canonical names.
	Body   []byte      // Body is the payload as sent.
}

// headers returns the delivery's headers as an HTTP API passes them: names
// in lower case, several values joined by commas.
func (d Delivery) headers() map[string]string {
	h := make(map[string]string, len(d.Header))
	keys := make([]string, 0, len(d.Header))
	for k := range d.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h[strings.ToLower(k)] = strings.Join(d.Header[k], ",")
	}
	return h
}

// HTTPAPIRequest returns the delivery as an HTTP API invokes a function
// with it (see HTTPAPIRequest).
func (d Delivery) HTTPAPIRequest() events.APIGatewayV2HTTPRequest {
	return HTTPAPIRequest(d.Method, d.Path, string(d.Body), d.headers())
}

// FunctionURLRequest returns the delivery as a function URL invokes a
// function with it (see FunctionURLRequest).
func (d Delivery) FunctionURLRequest() events.LambdaFunctionURLRequest {
	return FunctionURLRequest(d.Method, d.Path, string(d.Body), d.headers())
}

// Request returns the delivery as a net/http server receives it (for
// httpidem.Middleware), from SourceIP, to the host hooks.example.com.
func (d Delivery) Request() *http.Request {
	u := &url.URL{Path: d.Path}
	if p, err := url.ParseRequestURI(d.Path); err == nil {
		u = p
	}
	return &http.Request{
		Method: d.Method, URL: u, RequestURI: u.RequestURI(), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: d.Header.Clone(), Body: io.NopCloser(bytes.NewReader(d.Body)), ContentLength: int64(len(d.Body)),
		Host: "hooks.example.com", RemoteAddr: SourceIP + ":49152",
	}
}
