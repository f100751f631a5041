package s3blob_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/idemgo/idem/blob"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/fakeaws"
	"github.com/idemgo/idem/s3blob"
)

// fakeStore returns a Store whose real S3 client talks to a fakeaws server
// (one attempt per call, so the answer given is the error returned).
func fakeStore(t *testing.T, answers ...http.Handler) (*s3blob.Store, *fakeaws.Server) {
	t.Helper()
	srv := fakeaws.New(t, nil)
	srv.Queue(answers...)
	client := s3.NewFromConfig(aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		BaseEndpoint:     aws.String(srv.URL),
		RetryMaxAttempts: 1,
	}, func(o *s3.Options) { o.UsePathStyle = true })
	s, err := s3blob.New(client, "idem-bucket", "results/")
	if err != nil {
		t.Fatal(err)
	}
	return s, srv
}

// object is a successful GetObject answer with body and, if sum is not
// empty, the x-amz-checksum-sha256 header S3 sends with ChecksumMode ENABLED.
func object(body []byte, sum string) fakeaws.Response {
	h := http.Header{}
	h.Set("Content-Type", "application/octet-stream")
	if sum != "" {
		h.Set("x-amz-checksum-sha256", sum)
		h.Set("x-amz-checksum-type", "FULL_OBJECT")
	}
	return fakeaws.Response{Status: 200, Header: h, Body: body}
}

func sum64(b []byte) string {
	s := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(s[:])
}

func TestWireErrors(t *testing.T) {
	t.Parallel()
	const put, get = "put", "get"
	cases := []struct {
		name   string
		op     string
		answer http.Handler
		class  core.Class // core.Classify with the default chain
		is     error      // if set, errors.Is must find it
	}{
		{"put: SlowDown 503", put, fakeaws.S3Error(503, "SlowDown", "Please reduce your request rate."), core.Transient, nil},
		{"put: InternalError 500", put, fakeaws.S3Error(500, "InternalError", "We encountered an internal error."), core.Transient, nil},
		{"put: AccessDenied 403", put, fakeaws.S3Error(403, "AccessDenied", "Access Denied"), core.Permanent, nil},
		{"put: NoSuchBucket 404", put, fakeaws.S3Error(404, "NoSuchBucket", "The specified bucket does not exist"), core.Permanent, nil},
		{"put: connection reset", put, fakeaws.Reset(), core.Transient, nil},
		{"get: NoSuchKey 404", get, fakeaws.S3Error(404, "NoSuchKey", "The specified key does not exist."), core.Permanent, blob.ErrNotFound},
		{"get: 404 without a body", get, fakeaws.Response{Status: 404, Header: http.Header{}}, core.Permanent, blob.ErrNotFound},
		{"get: NoSuchBucket 404", get, fakeaws.S3Error(404, "NoSuchBucket", "The specified bucket does not exist"), core.Permanent, nil},
		{"get: SlowDown 503", get, fakeaws.S3Error(503, "SlowDown", "Please reduce your request rate."), core.Transient, nil},
		{"get: AccessDenied 403", get, fakeaws.S3Error(403, "AccessDenied", "Access Denied"), core.Permanent, nil},
		{"get: body cut short", get, fakeaws.Truncated(object([]byte("0123456789"), ""), 4), core.Transient, nil},
		{"get: body not the one S3 checksummed", get, object([]byte("tampered"), sum64([]byte("original"))), core.Permanent, blob.ErrMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, srv := fakeStore(t, tc.answer)
			var err error
			if tc.op == put {
				err = s.Put(t.Context(), "k/obj", []byte("data"))
			} else {
				_, err = s.Get(t.Context(), "k/obj")
			}
			if err == nil {
				t.Fatal("no error")
			}
			if c := core.Classify(err, core.DefaultClassifiers...); c != tc.class {
				t.Errorf("class %v, want %v (%v)", c, tc.class, err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v does not wrap %v", err, tc.is)
			}
			if tc.is == nil && (errors.Is(err, blob.ErrNotFound) || errors.Is(err, blob.ErrMismatch)) {
				t.Errorf("error %v wraps a blob sentinel", err)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

// headers records the headers of the requests it answers with h.
type headers struct {
	h    http.Handler
	seen http.Header
}

func (c *headers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.seen = r.Header.Clone()
	c.h.ServeHTTP(w, r)
}

// Put sends the object's SHA-256 and the object under the prefix; Get asks
// for S3's checksum and returns a body that matches it.
func TestWireRequests(t *testing.T) {
	t.Parallel()
	data := []byte(`{"large":true}`)
	putAnswer := &headers{h: fakeaws.Response{Status: 200, Header: http.Header{}}}
	getAnswer := &headers{h: object(data, sum64(data))}
	s, srv := fakeStore(t, putAnswer, getAnswer)
	if err := s.Put(t.Context(), "k/obj", data); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(t.Context(), "k/obj")
	if err != nil || string(got) != string(data) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Method != http.MethodPut || reqs[0].Path != "/idem-bucket/results/k/obj" || reqs[1].Method != http.MethodGet {
		t.Fatalf("requests %+v; want PUT then GET of /idem-bucket/results/k/obj", reqs)
	}
	if got := putAnswer.seen.Get("X-Amz-Checksum-Sha256"); got != sum64(data) {
		t.Errorf("put checksum header %q, want %q", got, sum64(data))
	}
	if got := getAnswer.seen.Get("X-Amz-Checksum-Mode"); got != "ENABLED" {
		t.Errorf("get checksum mode header %q, want ENABLED", got)
	}
}

// fakeTable is a DynamoDB API that applies every PutItem and answers
// GetItem with the last item put; the other calls panic on the nil
// embedded API (the test makes none). Safe for concurrent use.
type fakeTable struct {
	ddbstore.API
	mu   sync.Mutex
	puts int                                // guarded by mu
	item map[string]ddbtypes.AttributeValue // guarded by mu
}

func (f *fakeTable) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.puts++
	f.item = in.Item
	return &dynamodb.PutItemOutput{}, nil
}

func (f *fakeTable) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &dynamodb.GetItemOutput{Item: f.item}, nil
}

// S3's error shapes, as the real SDK client returns them, through the
// DynamoDB store: a completion whose PutObject fails writes no record and
// is transient or permanent as S3 said; a replay whose GetObject fails is a
// typed error.
func TestWireThroughStore(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	rec := core.Reserve("evt:wire:1", "fp", "tok-1", nil, t0, t0.Add(time.Minute), time.Hour)
	big := make([]byte, 16<<10) // over the 4096-byte item limit below
	_, _ = rand.Read(big)
	done := core.Succeed(rec, big, t0.Add(time.Second), time.Hour)
	ok := fakeaws.Response{Status: 200, Header: http.Header{}}
	cases := []struct {
		name     string
		put, get http.Handler // get nil: no replay
		class    core.Class
		is       error
	}{
		{"put SlowDown 503", fakeaws.S3Error(503, "SlowDown", "Please reduce your request rate."), nil, core.Transient, nil},
		{"put AccessDenied 403", fakeaws.S3Error(403, "AccessDenied", "Access Denied"), nil, core.Permanent, nil},
		{"get NoSuchKey 404", ok, fakeaws.S3Error(404, "NoSuchKey", "The specified key does not exist."), core.Permanent, blob.ErrNotFound},
		{"get SlowDown 503", ok, fakeaws.S3Error(503, "SlowDown", "Please reduce your request rate."), core.Transient, nil},
		{"get AccessDenied 403", ok, fakeaws.S3Error(403, "AccessDenied", "Access Denied"), core.Permanent, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			blobs, _ := fakeStore(t, tc.put, tc.get)
			table := &fakeTable{}
			store, err := ddbstore.New(table, "idem-wire", ddbstore.WithLargeResults(blobs), ddbstore.WithMaxItemSize(4096))
			if err != nil {
				t.Fatal(err)
			}
			_, err = store.Complete(t.Context(), done)
			if tc.get != nil {
				if err != nil || table.puts != 1 {
					t.Fatalf("Complete: %v, %d PutItem; want success and 1", err, table.puts)
				}
				_, err = store.Get(t.Context(), "evt:wire:1", t0.Add(2*time.Second))
			} else if table.puts != 0 {
				t.Fatalf("%d PutItem after a failed PutObject, want 0", table.puts)
			}
			if !errors.Is(err, ddbstore.ErrLargeResult) {
				t.Fatalf("error %v does not wrap ErrLargeResult", err)
			}
			if c := core.Classify(err, core.DefaultClassifiers...); c != tc.class {
				t.Errorf("class %v, want %v (%v)", c, tc.class, err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v does not wrap %v", err, tc.is)
			}
		})
	}
}
