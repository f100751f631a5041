package ddbstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/fakeaws"
	"github.com/idemgo/idem/storetest"
)

// writeCounter counts the writes of the connections it dials.
type writeCounter struct{ writes atomic.Int64 }

func (w *writeCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, w: w}, nil
}

type countingConn struct {
	net.Conn
	w *writeCounter
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.w.writes.Add(1)
	return c.Conn.Write(p)
}

// bodyRecorder is a fake DynamoDB that keeps each request's decoded JSON
// body and answers with the next queued answer (200 {} when none is left).
type bodyRecorder struct {
	mu      sync.Mutex
	bodies  []any
	answers []fakeaws.Response
}

func (b *bodyRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var v any
	_ = json.Unmarshal(raw, &v)
	b.mu.Lock()
	b.bodies = append(b.bodies, v)
	a := fakeaws.JSONResponse(200, []byte(`{}`))
	if len(b.answers) > 0 {
		a, b.answers = b.answers[0], b.answers[1:]
	}
	b.mu.Unlock()
	a.ServeHTTP(w, r)
}

// fakeClient returns a client of the fake DynamoDB at url whose connections
// count their writes, with one attempt per call and opts applied last.
func fakeClient(url string, w *writeCounter, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: w.dial}}
	return dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""), HTTPClient: hc}, opts...)
}

// storeCalls makes the store calls whose requests and answers the client
// tests compare: a reservation, its completion, a reservation refused by
// the completed record, and three failures to classify.
func storeCalls(t *testing.T, s *ddbstore.Store) []error {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	rec := core.Reserve("order-1234", "fp", "token-1", nil, now, now.Add(time.Minute), time.Hour)
	done := core.Succeed(rec, []byte(`{"ok":true}`), now.Add(time.Second), time.Hour)
	errs := []error{s.Reserve(ctx, rec, nil, now)}
	_, err := s.Complete(ctx, done)
	errs = append(errs, err)
	for range 4 {
		errs = append(errs, s.Reserve(ctx, core.Reserve("order-1234", "fp", "token-2", nil, now, now.Add(time.Minute), time.Hour), nil, now))
	}
	return errs
}

// The store's per-call options and FastClientOptions send the same requests
// as the plain client and classify the answers in the same way: success,
// a refused condition (the blocking item from ALL_OLD), throttling, a 5xx
// (and the read that follows it) and a validation error.
func TestClientOptionsSameRequestsAndErrors(t *testing.T) {
	t.Parallel()
	blocking := `{"Item":{"pk":{"S":"order-1234"},"status":{"S":"succeeded"},"fingerprint":{"S":"fp"},"lease_token":{"S":"token-1"},` +
		`"attempts":{"N":"1"},"expires_at":{"N":"1796313600"},"updated_at_ms":{"N":"1764763201000"},"result":{"B":"eyJvayI6dHJ1ZX0="}},` +
		`"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}`
	answers := func() []fakeaws.Response {
		return []fakeaws.Response{fakeaws.JSONResponse(200, []byte(`{}`)), fakeaws.JSONResponse(200, []byte(`{}`)),
			fakeaws.JSONResponse(400, []byte(blocking)),
			fakeaws.DynamoDBError(400, "ThrottlingException", "slow down"),
			fakeaws.DynamoDBError(500, "InternalServerError", "oops"),
			// The store reads the key after a failure that may have been
			// applied (the 500): no item.
			fakeaws.JSONResponse(200, []byte(`{}`)),
			fakeaws.DynamoDBError(400, "ValidationException", "bad"),
			// The store describes the table after a validation error: its
			// key schema is the store's, so the error stays as it is.
			describeAnswer(`"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}]`)}
	}
	check := []func(error) bool{
		func(err error) bool { return err == nil },
		func(err error) bool { return err == nil },
		func(err error) bool {
			var c *idem.ConflictError
			return errors.As(err, &c) && c.Existing.Status == core.StatusSucceeded
		},
		func(err error) bool {
			return errors.Is(err, ddbstore.ErrThrottled) && core.Classify(err) == core.Transient
		},
		func(err error) bool {
			return errors.Is(err, ddbstore.ErrUnavailable) && core.Classify(err) == core.Transient
		},
		func(err error) bool {
			return errors.Is(err, ddbstore.ErrInvalidRequest) && core.Classify(err) == core.Permanent
		},
	}
	var bodies [][]any
	for _, tc := range []struct {
		name string
		opts []func(*dynamodb.Options)
	}{
		{"plain client", nil},
		{"FastClientOptions", []func(*dynamodb.Options){ddbstore.FastClientOptions()}},
	} {
		fake := &bodyRecorder{answers: answers()}
		srv := fakeaws.New(t, fake)
		s, err := ddbstore.New(fakeClient(srv.URL, &writeCounter{}, tc.opts...), "orders_idem")
		if err != nil {
			t.Fatal(err)
		}
		for i, err := range storeCalls(t, s) {
			if !check[i](err) {
				t.Errorf("%s: call %d: error %v, not classified as expected", tc.name, i, err)
			}
		}
		bodies = append(bodies, fake.bodies)
	}
	if len(bodies[0]) != 8 {
		t.Fatalf("the fake got %d requests, want 8", len(bodies[0]))
	}
	if !reflect.DeepEqual(bodies[0], bodies[1]) {
		t.Errorf("request bodies differ:\nplain %v\nfast  %v", bodies[0], bodies[1])
	}
}

// net/http writes a request whose body it does not know to be in memory
// (the SDK's) in two writes, headers then body; the store's per-call
// options hand it the body as a *bytes.Reader, which it writes with the
// headers in one.
func TestStoreWritesEachRequestOnce(t *testing.T) {
	t.Parallel()
	srv := fakeaws.New(t, fakeaws.JSONResponse(200, []byte(`{}`)))
	for _, tc := range []struct {
		name       string
		viaStore   bool
		opts       []func(*dynamodb.Options)
		wantWrites int64
	}{
		{"SDK client alone", false, nil, 2},
		{"SDK client with FastClientOptions", false, []func(*dynamodb.Options){ddbstore.FastClientOptions()}, 1},
		{"through the store", true, nil, 1},
	} {
		w := &writeCounter{}
		client := fakeClient(srv.URL, w, tc.opts...)
		in := &dynamodb.PutItemInput{TableName: aws.String("orders_idem"), Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}}}
		// The first call dials; count the second's writes.
		for i := range 2 {
			before := w.writes.Load()
			var err error
			if tc.viaStore {
				s, nerr := ddbstore.New(client, "orders_idem")
				if nerr != nil {
					t.Fatalf("New: %v", nerr)
				}
				now := time.Now()
				err = s.Reserve(context.Background(), core.Reserve("order-1", "fp", "tok", nil, now, now.Add(time.Minute), time.Hour), nil, now)
			} else {
				_, err = client.PutItem(context.Background(), in)
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if got := w.writes.Load() - before; i == 1 && got != tc.wantWrites {
				t.Errorf("%s: %d writes for one request, want %d", tc.name, got, tc.wantWrites)
			}
		}
	}
}

// The store runs storetest's conformance suite on a client built with
// FastClientOptions.
func TestConformanceFastClient(t *testing.T) {
	integration(t)
	f := newFixture(t)
	client := dynamodb.New(f.client.Options(), ddbstore.FastClientOptions())
	s, err := ddbstore.New(client, f.table)
	if err != nil {
		t.Fatal(err)
	}
	f.store = s
	store := conformanceStore(t, f)
	storetest.Run(t, func(t *testing.T) idem.Store { return store })
}
