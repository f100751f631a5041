package ddbstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	smithyendpoints "github.com/aws/smithy-go/endpoints"
)

// FastClientOptions returns an option for dynamodb.NewFromConfig (or
// dynamodb.New) that makes every call of the client cheaper in CPU without
// changing the requests it sends or how their answers, errors and retries
// are classified. docs/benchmarks.md (section "Client CPU: idem against its
// own calls sent raw") measures each setting:
//
//   - HTTPClient: the client already configured, behind a wrapper that hands
//     net/http each request body of up to MaxInMemoryBody bytes as an
//     in-memory reader. net/http then writes the request's headers and body
//     in one TCP segment instead of two (it flushes the headers first for
//     bodies it does not know to be in memory, as the SDK's are). The bytes
//     sent are the same. The store applies this per call by default.
//   - EndpointResolverV2: the resolver already configured, behind a cache
//     that resolves each distinct set of endpoint parameters once and
//     answers the same endpoint for the same parameters after that. The
//     SDK's resolver is a pure function of its parameters (the store caches
//     it per call by default); a custom resolver whose answer may change for
//     the same parameters must not be wrapped: set it after this option.
//   - DisableValidateResponseChecksum: the client no longer computes the
//     CRC32 of every response body against DynamoDB's X-Amz-Crc32 header.
//     Over HTTPS, TLS already rejects a response altered in transit; the
//     CRC32 adds a check for plain-HTTP endpoints (local test servers).
//     This is the one setting the store does not apply by default.
//
// Retries, timeouts, credentials, signing, the user agent and every other
// setting stay as configured. The option wraps the settings it finds when
// it is applied: put it after options that set HTTPClient or
// EndpointResolverV2.
func FastClientOptions() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.DisableValidateResponseChecksum = true
		o.HTTPClient = inMemoryBodies(o.HTTPClient)
		o.EndpointResolverV2 = cachedEndpoints(o.EndpointResolverV2)
	}
}

// MaxInMemoryBody is the largest request body, in bytes, that the in-memory
// body wrapper (FastClientOptions, and the store's per-call options) copies
// into memory; larger bodies are passed on as they are.
const MaxInMemoryBody = 64 << 10

// callOptions are the options the store passes with every call: the
// in-memory body wrapper around the client's HTTP client, and the endpoint
// cache in front of the SDK's own endpoint resolver. Each remembers the
// last client setting it wrapped, so that applying them allocates nothing
// (the wrapper's copy of a request body aside). The
// zero value is not usable; newCallOptions makes one. Safe for concurrent
// use.
type callOptions struct {
	fns       []func(*dynamodb.Options)
	http      atomic.Pointer[wrapped[dynamodb.HTTPClient]]
	endpoints atomic.Pointer[wrapped[dynamodb.EndpointResolverV2]]
}

// wrapped is a client setting and the wrapper made for it.
type wrapped[T any] struct{ inner, outer T }

func newCallOptions() *callOptions {
	c := &callOptions{}
	c.fns = []func(*dynamodb.Options){c.apply}
	return c
}

// apply wraps o's HTTP client (unless it is wrapped already) and, when o
// resolves endpoints with the SDK's own resolver, caches its endpoints.
func (c *callOptions) apply(o *dynamodb.Options) {
	if o.HTTPClient != nil {
		o.HTTPClient = rewrap(&c.http, o.HTTPClient, inMemoryBodies)
	}
	if o.EndpointResolverV2 != nil && reflect.TypeOf(o.EndpointResolverV2) == defaultResolverType {
		o.EndpointResolverV2 = rewrap(&c.endpoints, o.EndpointResolverV2, cachedEndpoints)
	}
}

var defaultResolverType = reflect.TypeOf(dynamodb.NewDefaultEndpointResolverV2())

// rewrap returns wrap(inner), reusing the wrapper last made when inner is
// the same setting. Only pointers are compared (comparing other values held
// in an interface may panic); a setting of another kind is wrapped anew.
func rewrap[T any](last *atomic.Pointer[wrapped[T]], inner T, wrap func(T) T) T {
	if reflect.TypeOf(inner).Kind() != reflect.Pointer {
		return wrap(inner)
	}
	if w := last.Load(); w != nil && any(w.inner) == any(inner) {
		return w.outer
	}
	w := &wrapped[T]{inner: inner, outer: wrap(inner)}
	last.Store(w)
	return w.outer
}

// inMemoryBodies returns c behind an inMemoryBody wrapper; c itself when it
// is one already.
func inMemoryBodies(c dynamodb.HTTPClient) dynamodb.HTTPClient {
	if _, ok := c.(*inMemoryBody); ok || c == nil {
		return c
	}
	return &inMemoryBody{next: c}
}

// inMemoryBody is a dynamodb.HTTPClient that reads a request's body of known
// length (at most MaxInMemoryBody bytes) into memory and passes the request
// on with the body as a *bytes.Reader, which net/http writes in the same
// TCP segment as the headers.
type inMemoryBody struct{ next dynamodb.HTTPClient }

// Do implements dynamodb.HTTPClient.
func (c *inMemoryBody) Do(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength <= 0 || r.ContentLength > MaxInMemoryBody {
		return c.next.Do(r)
	}
	buf := make([]byte, r.ContentLength+1)
	n, err := io.ReadFull(r.Body, buf)
	if cerr := r.Body.Close(); err == io.ErrUnexpectedEOF || err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("ddbstore: reading the request body: %w", err)
	}
	if int64(n) != r.ContentLength {
		// net/http refuses such a request in the same way.
		return nil, fmt.Errorf("ddbstore: request body of %d bytes or more, ContentLength %d", n, r.ContentLength)
	}
	r.Body = io.NopCloser(bytes.NewReader(buf[:n]))
	return c.next.Do(r)
}

// cachedEndpoints returns r behind an endpointCache (the SDK's default
// resolver when r is nil); r itself when it is one already.
func cachedEndpoints(r dynamodb.EndpointResolverV2) dynamodb.EndpointResolverV2 {
	if c, ok := r.(*endpointCache); ok {
		return c
	}
	if r == nil {
		r = dynamodb.NewDefaultEndpointResolverV2()
	}
	return &endpointCache{inner: r}
}

// endpointCache is a dynamodb.EndpointResolverV2 that remembers the last
// parameters it resolved and their endpoint. A client resolves the same
// parameters on every call to one table, so one entry is enough; other
// parameters are resolved and replace it. It is safe for concurrent use:
// entries are immutable and swapped atomically. The endpoint it answers is
// shared by the calls: the SDK reads its URI, headers and properties and
// writes none of them.
type endpointCache struct {
	inner dynamodb.EndpointResolverV2
	last  atomic.Pointer[endpointEntry]
}

type endpointEntry struct {
	params   dynamodb.EndpointParameters
	endpoint smithyendpoints.Endpoint
}

// ResolveEndpoint implements dynamodb.EndpointResolverV2.
func (c *endpointCache) ResolveEndpoint(ctx context.Context, p dynamodb.EndpointParameters) (smithyendpoints.Endpoint, error) {
	if e := c.last.Load(); e != nil && sameEndpointParams(&e.params, &p) {
		return e.endpoint, nil
	}
	ep, err := c.inner.ResolveEndpoint(ctx, p)
	if err != nil {
		return ep, err
	}
	c.last.Store(&endpointEntry{params: copyEndpointParams(p), endpoint: ep})
	return ep, nil
}

// endpointParamFields is the number of fields of
// dynamodb.EndpointParameters that sameEndpointParams compares; a test
// fails when the SDK adds one.
const endpointParamFields = 9

// sameEndpointParams reports whether a and b hold the same values in every
// field of dynamodb.EndpointParameters.
func sameEndpointParams(a, b *dynamodb.EndpointParameters) bool {
	return sameValue(a.Region, b.Region) && sameValue(a.UseDualStack, b.UseDualStack) && sameValue(a.UseFIPS, b.UseFIPS) &&
		sameValue(a.Endpoint, b.Endpoint) && sameValue(a.AccountId, b.AccountId) &&
		sameValue(a.AccountIdEndpointMode, b.AccountIdEndpointMode) && sameValue(a.ResourceArn, b.ResourceArn) &&
		slices.Equal(a.ResourceArnList, b.ResourceArnList) && sameValue(a.IsSearchOperation, b.IsSearchOperation)
}

func sameValue[T comparable](a, b *T) bool { return a == b || (a != nil && b != nil && *a == *b) }

// copyEndpointParams returns p with values of its own, so that the cache
// keeps what was resolved even if the caller changes what p points to.
func copyEndpointParams(p dynamodb.EndpointParameters) dynamodb.EndpointParameters {
	p.Region, p.Endpoint, p.AccountId = copyPtr(p.Region), copyPtr(p.Endpoint), copyPtr(p.AccountId)
	p.AccountIdEndpointMode, p.ResourceArn = copyPtr(p.AccountIdEndpointMode), copyPtr(p.ResourceArn)
	p.UseDualStack, p.UseFIPS, p.IsSearchOperation = copyPtr(p.UseDualStack), copyPtr(p.UseFIPS), copyPtr(p.IsSearchOperation)
	p.ResourceArnList = slices.Clone(p.ResourceArnList)
	return p
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
