package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/s3blob"
)

// Capabilities measured on moto: staged completion (TransactWriteItems,
// which dynalite does not have) and large results kept in S3.

// s3Env is an S3 client of moto whose requests are counted by operation.
type s3Env struct {
	client *s3.Client
	bucket string
	mu     sync.Mutex
	n      map[string]int64 // guarded by mu
}

// s3Counter counts S3 requests: PutObject, GetObject, other.
type s3Counter struct {
	env   *s3Env
	inner http.RoundTripper
}

func (c s3Counter) RoundTrip(r *http.Request) (*http.Response, error) {
	op := "S3 " + r.Method
	switch {
	case r.Method == http.MethodPut && r.URL.Query().Get("x-id") == "PutObject":
		op = "S3 PutObject"
	case r.Method == http.MethodGet && r.URL.Query().Get("x-id") == "GetObject":
		op = "S3 GetObject"
	}
	c.env.mu.Lock()
	c.env.n[op]++
	c.env.mu.Unlock()
	return c.inner.RoundTrip(r)
}

func (s *s3Env) counts() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.n))
	for k, v := range s.n {
		out[k] = v
	}
	return out
}

// newS3Env returns a counted S3 client of the server at endpoint, with a
// bucket.
func newS3Env(ctx context.Context, endpoint string) (*s3Env, error) {
	env := &s3Env{bucket: "idem-bench-results", n: map[string]int64{}}
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	if err != nil {
		return nil, err
	}
	env.client = s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint, o.UsePathStyle = aws.String(endpoint), true
		o.DisableLogOutputChecksumValidationSkipped = true // moto answers GetObject without a checksum
		o.HTTPClient = &http.Client{Transport: s3Counter{env: env, inner: &http.Transport{Proxy: nil}}}
	})
	if _, err := env.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(env.bucket)}); err != nil {
		return nil, err
	}
	return env, nil
}

// stagedCounts are the writes staged per execution.
var stagedCounts = []int{1, 10, 99}

// stagedRows measures staged completion (idem.Stage): a handler that
// stages 1, 10 and 99 writes, committed with its success in one
// TransactWriteItems; then a duplicate of each.
func stagedRows(e *capEnv) ([]capRow, error) {
	r, err := e.runner()
	if err != nil {
		return nil, err
	}
	var rows []capRow
	for _, k := range stagedCounts {
		name := fmt.Sprintf("staged_%d", k)
		h := func(_ int, ev event) idem.Handler {
			return func(ctx context.Context) ([]byte, error) {
				items := make([]types.TransactWriteItem, k)
				for j := range items {
					items[j] = types.TransactWriteItem{Put: &types.Put{TableName: aws.String(e.table), Item: map[string]types.AttributeValue{
						ddbstore.DefaultKeyAttribute: &types.AttributeValueMemberS{Value: fmt.Sprintf("order#%s#%02d", ev.key, j)},
						"amount":                     &types.AttributeValueMemberN{Value: fmt.Sprint(100 + j)},
						"currency":                   &types.AttributeValueMemberS{Value: "EUR"}}}}
				}
				if err := ddbstore.Stage(ctx, items...); err != nil {
					return nil, err
				}
				return ev.result, nil
			}
		}
		for _, want := range []idem.Verdict{idem.Executed, idem.Replayed} {
			row, err := e.measure(name+"_"+want.String(), "execution", e.events, func() error { return e.do(r, name, e.events, want, h) })
			if err != nil {
				return nil, err
			}
			row.Note = fmt.Sprintf("a handler that stages %d PutItems of about 50 bytes (idem.Stage); the record and the staged items commit in one TransactWriteItems, twice each item's units; then a duplicate", k)
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// largeResult is the size of the large results measured.
const largeResult = 600 << 10

// largeRows measures a 600 KB result: incompressible, kept in S3
// (ddbstore.WithLargeResults); and compressible JSON, kept gzip-compressed
// in the item. A first execution, then a duplicate.
func largeRows(e *capEnv) ([]capRow, error) {
	blobs, err := s3blob.New(e.s3.client, e.s3.bucket, "idem/results/")
	if err != nil {
		return nil, err
	}
	st, err := ddbstore.New(e.client, e.table, ddbstore.WithLargeResults(blobs))
	if err != nil {
		return nil, err
	}
	r, err := idem.New(st, runnerOptions()...)
	if err != nil {
		return nil, err
	}
	var rows []capRow
	for _, c := range []struct {
		name   string
		result []byte
	}{{"large_result_600KB_random_s3", randomResult(largeResult)}, {"large_result_600KB_json_gzip", jsonResult(largeResult)}} {
		h := func(int, event) idem.Handler { return func(context.Context) ([]byte, error) { return c.result, nil } }
		for _, want := range []idem.Verdict{idem.Executed, idem.Replayed} {
			row, err := e.measure(c.name+"_"+want.String(), "execution", e.events, func() error {
				return e.do(r, c.name, e.events, want, h)
			})
			if err != nil {
				return nil, err
			}
			row.Note = fmt.Sprintf("a result of %d bytes (%s); then a duplicate, which reads it back", len(c.result),
				strings.TrimPrefix(c.name, "large_result_600KB_"))
			rows = append(rows, row)
		}
	}
	if err := checkReplay(e, r, rows); err != nil {
		return nil, err
	}
	return rows, nil
}

// checkReplay checks that a duplicate of the large results replays them
// whole (the measured replays only check the verdict).
func checkReplay(e *capEnv, r *idem.Runner, _ []capRow) error {
	ev := makeEvent("large_result_600KB_random_s3", "cap", 0, 100)
	out, err := r.Do(e.ctx, ev.key, ev.payload, func(context.Context) ([]byte, error) { return nil, nil })
	if err != nil || !bytes.Equal(out.Result, randomResult(largeResult)) {
		return fmt.Errorf("large result: the replay has %d bytes (%v), want the %d stored", len(out.Result), err, largeResult)
	}
	return nil
}
