package ddbstore

import (
	"context"
	"net/http"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	smithyendpoints "github.com/aws/smithy-go/endpoints"
)

// countingResolver resolves every parameter set to the SDK's endpoint and
// counts its calls.
type countingResolver struct{ calls int }

func (r *countingResolver) ResolveEndpoint(ctx context.Context, p dynamodb.EndpointParameters) (smithyendpoints.Endpoint, error) {
	r.calls++
	return dynamodb.NewDefaultEndpointResolverV2().ResolveEndpoint(ctx, p)
}

func TestEndpointParamFieldsCompared(t *testing.T) {
	if n := reflect.TypeOf(dynamodb.EndpointParameters{}).NumField(); n != endpointParamFields {
		t.Fatalf("dynamodb.EndpointParameters has %d fields, sameEndpointParams compares %d: compare the new ones", n, endpointParamFields)
	}
}

func TestEndpointCache(t *testing.T) {
	ctx := context.Background()
	inner := &countingResolver{}
	c := cachedEndpoints(inner)
	region, table := "us-east-1", "orders"
	params := func(region string) dynamodb.EndpointParameters {
		return dynamodb.EndpointParameters{Region: aws.String(region), UseDualStack: aws.Bool(false), UseFIPS: aws.Bool(false),
			AccountIdEndpointMode: aws.String("preferred"), ResourceArn: aws.String(table)}
	}
	shared := params(region)
	for i, step := range []struct {
		name      string
		p         *dynamodb.EndpointParameters
		wantURL   string
		wantCalls int
	}{
		{"first call resolves", &shared, "https://dynamodb.us-east-1.amazonaws.com", 1},
		{"same values, new pointers: cached", ptr(params(region)), "https://dynamodb.us-east-1.amazonaws.com", 1},
		{"another region resolves", ptr(params("eu-west-1")), "https://dynamodb.eu-west-1.amazonaws.com", 2},
		{"search operation resolves", func() *dynamodb.EndpointParameters {
			p := params("eu-west-1")
			p.IsSearchOperation = aws.Bool(true)
			return &p
		}(), "", 3},
		{"FIPS resolves", func() *dynamodb.EndpointParameters { p := params("eu-west-1"); p.UseFIPS = aws.Bool(true); return &p }(),
			"https://dynamodb-fips.eu-west-1.amazonaws.com", 4},
		{"back to the first region resolves", ptr(params(region)), "https://dynamodb.us-east-1.amazonaws.com", 5},
	} {
		ep, err := c.ResolveEndpoint(ctx, *step.p)
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, step.name, err)
		}
		if got := ep.URI.String(); (step.wantURL != "" && got != step.wantURL) || inner.calls != step.wantCalls {
			t.Errorf("step %d (%s): %s after %d resolutions, want %s after %d", i, step.name, got, inner.calls, step.wantURL, step.wantCalls)
		}
	}
	// The cache keeps its own copy of the parameters.
	*shared.Region = "ap-south-1"
	if ep, _ := c.ResolveEndpoint(ctx, params(region)); inner.calls != 5 || ep.URI.Host != "dynamodb.us-east-1.amazonaws.com" {
		t.Errorf("after the caller's parameters changed: %s after %d resolutions, want the cached us-east-1 after 5", ep.URI.Host, inner.calls)
	}
	if cachedEndpoints(c) != c {
		t.Errorf("cachedEndpoints wrapped a cache again")
	}
}

func ptr[T any](v T) *T { return &v }

// funcClient is an HTTP client that is not a pointer.
type funcClient func(*http.Request) (*http.Response, error)

func (f funcClient) Do(r *http.Request) (*http.Response, error) { return f(r) }

func TestCallOptions(t *testing.T) {
	c := newCallOptions()
	hc := &http.Client{}
	custom := &countingResolver{}
	for _, tc := range []struct {
		name         string
		http         dynamodb.HTTPClient
		resolver     dynamodb.EndpointResolverV2
		wantCached   bool // the SDK's resolver gets the cache
		wantReused   bool // the same wrappers on every call
		wantNoAllocs bool
	}{
		{"SDK resolver, pointer client", hc, dynamodb.NewDefaultEndpointResolverV2(), true, true, true},
		{"custom resolver kept as it is", hc, custom, false, true, true},
		{"non-pointer client wrapped per call", funcClient(nil), dynamodb.NewDefaultEndpointResolverV2(), true, false, false},
	} {
		o := &dynamodb.Options{}
		apply := func() dynamodb.Options {
			o.HTTPClient, o.EndpointResolverV2 = tc.http, tc.resolver
			for _, fn := range c.fns {
				fn(o)
			}
			return *o
		}
		o1, o2 := apply(), apply()
		if _, ok := o1.HTTPClient.(*inMemoryBody); !ok {
			t.Errorf("%s: HTTP client %T, want the in-memory body wrapper", tc.name, o1.HTTPClient)
		}
		if _, ok := o1.EndpointResolverV2.(*endpointCache); ok != tc.wantCached {
			t.Errorf("%s: resolver %T, cached %v, want %v", tc.name, o1.EndpointResolverV2, ok, tc.wantCached)
		}
		if !tc.wantCached && o1.EndpointResolverV2 != tc.resolver {
			t.Errorf("%s: resolver replaced by %T", tc.name, o1.EndpointResolverV2)
		}
		if reused := o1.HTTPClient == o2.HTTPClient; reused != tc.wantReused {
			t.Errorf("%s: wrapper reused %v, want %v", tc.name, reused, tc.wantReused)
		}
		if allocs := testing.AllocsPerRun(100, func() { apply() }); (allocs == 0) != tc.wantNoAllocs {
			t.Errorf("%s: %v allocations per call", tc.name, allocs)
		}
	}
}

func TestFastClientOptions(t *testing.T) {
	base := dynamodb.Options{Region: "us-east-1", RetryMaxAttempts: 3, HTTPClient: &http.Client{}}
	o := base
	FastClientOptions()(&o)
	FastClientOptions()(&o)
	if !o.DisableValidateResponseChecksum {
		t.Errorf("DisableValidateResponseChecksum = false")
	}
	hc, ok := o.HTTPClient.(*inMemoryBody)
	if !ok || hc.next != base.HTTPClient {
		t.Errorf("HTTP client %#v, want one in-memory body wrapper around the configured client", o.HTTPClient)
	}
	if ec, ok := o.EndpointResolverV2.(*endpointCache); !ok || reflect.TypeOf(ec.inner) != defaultResolverType {
		t.Errorf("resolver %#v, want one cache around the SDK's resolver", o.EndpointResolverV2)
	}
	if o.RetryMaxAttempts != 3 || o.Region != "us-east-1" || o.Retryer != nil {
		t.Errorf("other settings changed: %+v", o)
	}
}
