package ddbstore_test

import (
	"bytes"
	"context"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
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

// putRecorder is an API that keeps the PutItem inputs of the store.
type putRecorder struct{ puts []*dynamodb.PutItemInput }

func (p *putRecorder) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	p.puts = append(p.puts, in)
	return &dynamodb.PutItemOutput{}, nil
}

func (p *putRecorder) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}

// BenchmarkSDKFirstExecution measures the client side of a first execution
// (Reserve and Complete: two PutItem) with the HTTP exchange answered in
// process: the same two requests sent with the SDK alone, then through the
// store (its encoding and per-call options), then through the store on a
// client built with FastClientOptions.
func BenchmarkSDKFirstExecution(b *testing.B) {
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	rec := core.Reserve("a_unique-seq-1", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"0123456789abcdef0123456789abcdef", nil, now, now.Add(30*time.Second), time.Hour)
	done := core.Succeed(rec, []byte(`{"ok": true, "id": "a_unique-seq-1", "n": 1}`), now, time.Hour)
	newClient := func(opts ...func(*dynamodb.Options)) *dynamodb.Client {
		return dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:8000"),
			Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""), HTTPClient: answerAtOnce{}}, opts...)
	}
	viaStore := func(client ddbstore.API) func(b *testing.B) {
		s, err := ddbstore.New(client, "orders_idem")
		if err != nil {
			b.Fatal(err)
		}
		return func(b *testing.B) {
			if err := s.Reserve(ctx, rec, nil, now); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Complete(ctx, done); err != nil {
				b.Fatal(err)
			}
		}
	}
	rp := &putRecorder{}
	viaStore(rp)(b)
	plain := newClient()
	for _, bc := range []struct {
		name string
		op   func(b *testing.B)
	}{
		{"SDK alone", func(b *testing.B) {
			for _, in := range rp.puts {
				if _, err := plain.PutItem(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"store", viaStore(plain)},
		{"store, FastClientOptions", viaStore(newClient(ddbstore.FastClientOptions()))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.op(b)
			}
		})
	}
}
