package ddbstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/ddbinput"
)

// answerAtOnce is an SDK HTTP client that answers every request in process
// with DynamoDB's empty success (and its CRC32): what remains of a call is
// the SDK's own work and the store's.
type answerAtOnce struct{}

var emptyCRC = strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(`{}`))), 10)

func (answerAtOnce) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	h := http.Header{}
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("X-Amz-Crc32", emptyCRC)
	return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(bytes.NewReader([]byte(`{}`))), ContentLength: 2, Request: r}, nil
}

// writeRecorder is an API that keeps the write inputs of the store and answers
// each at once.
type writeRecorder struct {
	ddbstore.API // the calls the benchmarks do not make (nil)
	reqs         []any
}

func (p *writeRecorder) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	p.reqs = append(p.reqs, in)
	return &dynamodb.PutItemOutput{}, nil
}

func (p *writeRecorder) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	p.reqs = append(p.reqs, in)
	return &dynamodb.UpdateItemOutput{}, nil
}

func (p *writeRecorder) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}

// BenchmarkSDKFirstExecution measures the client side of a first execution
// with the HTTP exchange answered in process: the requests the store makes
// (the acquisition's UpdateItem and the completion's PutItem) sent with the
// SDK alone, as captured and built anew per call; then the store's Acquire
// and Complete (its encoding and per-call options), on a plain client and
// on one built with FastClientOptions; then Runner.Do over the store.
func BenchmarkSDKFirstExecution(b *testing.B) {
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	payload := []byte(`{"id": "a_unique-seq-1", "n": 1, "amount": 101, "currency": "EUR"}`)
	result := []byte(`{"ok": true, "id": "a_unique-seq-1", "n": 1}`)
	rec := core.Reserve("a_unique-seq-1", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"0123456789abcdef0123456789abcdef", nil, now, now.Add(30*time.Second), time.Hour)
	done := core.Succeed(core.Acquire(rec, nil, now), result, now, time.Hour)
	newClient := func(opts ...func(*dynamodb.Options)) *dynamodb.Client {
		return dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:8000"),
			Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""), HTTPClient: answerAtOnce{}}, opts...)
	}
	newStore := func(client ddbstore.API) *ddbstore.Store {
		s, err := ddbstore.New(client, "orders_idem")
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	viaStore := func(client ddbstore.API) func(b *testing.B) {
		s := newStore(client)
		return func(b *testing.B) {
			if _, _, err := s.Acquire(ctx, rec, now, core.Policy{}); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Complete(ctx, done); err != nil {
				b.Fatal(err)
			}
		}
	}
	viaRunner := func(client ddbstore.API) func(b *testing.B) {
		r, err := idem.New(newStore(client), idem.WithRetention(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		fn := func(context.Context) ([]byte, error) { return result, nil }
		return func(b *testing.B) {
			if out, err := r.Do(ctx, "a_unique-seq-1", payload, fn); err != nil || out.Verdict != idem.Executed {
				b.Fatal(out.Verdict, err)
			}
		}
	}
	rp := &writeRecorder{}
	viaStore(rp)(b)
	plain := newClient()
	for _, bc := range []struct {
		name string
		op   func(b *testing.B)
	}{
		{"SDK alone", func(b *testing.B) {
			if err := ddbinput.Send(ctx, plain, rp.reqs, false); err != nil {
				b.Fatal(err)
			}
		}},
		{"SDK alone, inputs built per call", func(b *testing.B) {
			if err := ddbinput.Send(ctx, plain, rp.reqs, true); err != nil {
				b.Fatal(err)
			}
		}},
		{"store", viaStore(plain)},
		{"store, FastClientOptions", viaStore(newClient(ddbstore.FastClientOptions()))},
		{"runner", viaRunner(plain)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.op(b)
			}
		})
	}
}

// refuseWith is an SDK HTTP client that refuses every request with
// DynamoDB's ConditionalCheckFailedException carrying the blocking item
// (ReturnValuesOnConditionCheckFailure ALL_OLD), item's JSON.
type refuseWith struct {
	body []byte
	crc  string
}

func newRefuseWith(item json.RawMessage) refuseWith {
	body, _ := json.Marshal(map[string]any{"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",
		"message": "The conditional request failed", "Item": item})
	return refuseWith{body: body, crc: strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10)}
}

func (c refuseWith) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	h := http.Header{}
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("X-Amz-Crc32", c.crc)
	return &http.Response{StatusCode: 400, Header: h, Body: io.NopCloser(bytes.NewReader(c.body)), ContentLength: int64(len(c.body)), Request: r}, nil
}

// keepBody is an SDK HTTP client that answers every request at once and
// keeps the last request's body.
type keepBody struct{ last *[]byte }

func (c keepBody) Do(r *http.Request) (*http.Response, error) {
	*c.last, _ = io.ReadAll(r.Body)
	return answerAtOnce{}.Do(r)
}

// BenchmarkSDKDuplicate measures the client side of a duplicate of a
// completed key as DynamoDB answers it (one UpdateItem refused with the
// stored item), with the HTTP exchange answered in process: the
// acquisition's request sent with the SDK alone, then Runner.Do over the
// store, which replays the stored result.
func BenchmarkSDKDuplicate(b *testing.B) {
	ctx := context.Background()
	payload := []byte(`{"id": "b_duplicate-seq-1", "n": 1, "amount": 101, "currency": "EUR"}`)
	result := []byte(`{"ok": true, "id": "b_duplicate-seq-1", "n": 1}`)
	newClient := func(h dynamodb.HTTPClient) *dynamodb.Client {
		return dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:8000"),
			Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""), HTTPClient: h,
			RetryMaxAttempts: 1})
	}
	newRunner := func(client ddbstore.API) *idem.Runner {
		s, err := ddbstore.New(client, "orders_idem")
		if err != nil {
			b.Fatal(err)
		}
		r, err := idem.New(s, idem.WithRetention(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	fn := func(context.Context) ([]byte, error) { return result, nil }
	// The completion's item, as the store sends it, is what the refusal carries.
	var last []byte
	rp := &writeRecorder{}
	if _, err := newRunner(rp).Do(ctx, "b_duplicate-seq-1", payload, fn); err != nil {
		b.Fatal(err)
	}
	if _, err := newRunner(newClient(keepBody{&last})).Do(ctx, "b_duplicate-seq-1", payload, fn); err != nil {
		b.Fatal(err)
	}
	var put struct{ Item json.RawMessage }
	if err := json.Unmarshal(last, &put); err != nil || len(put.Item) == 0 {
		b.Fatalf("completion body %s: %v", last, err)
	}
	refusing := newClient(newRefuseWith(put.Item))
	acquire, ok := rp.reqs[0].(*dynamodb.UpdateItemInput)
	if !ok {
		b.Fatalf("first request %T, want an UpdateItem", rp.reqs[0])
	}
	r := newRunner(refusing)
	for _, bc := range []struct {
		name string
		op   func(b *testing.B)
	}{
		{"SDK alone", func(b *testing.B) {
			var ccf *types.ConditionalCheckFailedException
			if _, err := refusing.UpdateItem(ctx, acquire); !errors.As(err, &ccf) || len(ccf.Item) == 0 {
				b.Fatal(err)
			}
		}},
		{"runner", func(b *testing.B) {
			if out, err := r.Do(ctx, "b_duplicate-seq-1", payload, fn); err != nil || out.Verdict != idem.Replayed {
				b.Fatal(out.Verdict, err)
			}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.op(b)
			}
		})
	}
}
