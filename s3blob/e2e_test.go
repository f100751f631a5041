package s3blob_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/blob"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/s3blob"
)

// countingS3 counts the object calls of an S3 client. Safe for concurrent
// use.
type countingS3 struct {
	*s3.Client
	mu         sync.Mutex
	puts, gets int // guarded by mu
}

func (c *countingS3) PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	c.mu.Lock()
	c.puts++
	c.mu.Unlock()
	return c.Client.PutObject(ctx, in, optFns...)
}

func (c *countingS3) GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Client.GetObject(ctx, in, optFns...)
}

func (c *countingS3) calls() (puts, gets int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.puts, c.gets
}

// newTable creates a DynamoDB table of its own at the configured endpoint
// (the same moto server as S3 under testenv -server moto) and returns a
// client for it.
func newTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Fatal("no DynamoDB endpoint: run `go run ./internal/cmd/testenv -server moto -- go test ./s3blob/`, " +
			"or set IDEM_SKIP_INTEGRATION=1 to skip the integration tests")
	}
	cfg, err := config.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	table := "idem-s3blob-" + hex.EncodeToString(b)
	if _, err := ddbstore.CreateTable(t.Context(), client, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return client, table
}

// TestEndToEnd runs a runner over ddbstore with its large results in S3:
// a 2 MB result executes once, is written to S3 before its record, and a
// duplicate replays the exact bytes with one GetObject; a small result
// never touches S3; a replaced or deleted object is a typed error.
func TestEndToEnd(t *testing.T) {
	s3c := motoClient(t)
	ddb, table := newTable(t)
	bucket := newBucket(t, s3c)
	ctx := t.Context()
	const retention = 24 * time.Hour
	if err := s3blob.EnsureLifecycle(ctx, s3c, bucket, "idem/", retention); err != nil {
		t.Fatal(err)
	}
	counting := &countingS3{Client: s3c}
	blobs, err := s3blob.New(counting, bucket, "idem/")
	if err != nil {
		t.Fatal(err)
	}
	store, err := ddbstore.New(ddb, table, ddbstore.WithLargeResults(blobs))
	if err != nil {
		t.Fatal(err)
	}
	runner, err := idem.New(store, idem.WithRetention(retention))
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 2<<20)
	_, _ = rand.Read(big)
	runs := 0
	handler := func(result []byte) idem.Handler {
		return func(context.Context) ([]byte, error) { runs++; return result, nil }
	}

	steps := []struct {
		name       string
		key        string
		result     []byte
		verdict    idem.Verdict
		puts, gets int // S3 calls so far
	}{
		{"small result: in the item", "evt:e2e:small", []byte(`{"ok":true}`), idem.Executed, 0, 0},
		{"small duplicate", "evt:e2e:small", []byte(`{"ok":true}`), idem.Replayed, 0, 0},
		{"2 MB result: in S3", "evt:e2e:big", big, idem.Executed, 1, 0},
		{"2 MB duplicate", "evt:e2e:big", big, idem.Replayed, 1, 1},
		{"2 MB second duplicate", "evt:e2e:big", big, idem.Replayed, 1, 2},
	}
	for i, st := range steps {
		out, err := runner.Do(ctx, st.key, []byte(`{}`), handler(st.result))
		if err != nil || out.Verdict != st.verdict || out.ResultOmitted || !bytes.Equal(out.Result, st.result) {
			t.Fatalf("step %d (%s): verdict %v, omitted %v, %d bytes (equal %v), %v",
				i, st.name, out.Verdict, out.ResultOmitted, len(out.Result), bytes.Equal(out.Result, st.result), err)
		}
		if puts, gets := counting.calls(); puts != st.puts || gets != st.gets {
			t.Fatalf("step %d (%s): %d PutObject, %d GetObject; want %d, %d", i, st.name, puts, gets, st.puts, st.gets)
		}
	}
	if runs != 2 {
		t.Fatalf("handler ran %d times, want 2", runs)
	}

	// The record points at the object, with its SHA-256 and size.
	item, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{ddbstore.DefaultKeyAttribute: &types.AttributeValueMemberS{Value: "evt:e2e:big"}}})
	if err != nil {
		t.Fatal(err)
	}
	ref := item.Item[ddbstore.AttrResultRef].(*types.AttributeValueMemberS).Value
	sum := item.Item[ddbstore.AttrResultSHA256].(*types.AttributeValueMemberS).Value
	obj, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("idem/" + ref)})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	if _, omitted := item.Item[ddbstore.AttrResultOmitted]; omitted || sum != blob.Sum(big) || !strings.HasPrefix(ref, idem.HashKey("evt:e2e:big")+"/") {
		t.Fatalf("record: omitted %v, ref %q, SHA-256 %s", omitted, ref, sum)
	}

	// A replaced object is ErrMismatch, a deleted one ErrNotFound: never
	// other bytes, and the handler does not run.
	damage := []struct {
		name string
		do   func() error
		want error
	}{
		{"replaced", func() error {
			_, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("idem/" + ref), Body: bytes.NewReader(big[:1<<20])})
			return err
		}, blob.ErrMismatch},
		{"deleted", func() error {
			_, err := s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("idem/" + ref)})
			return err
		}, blob.ErrNotFound},
	}
	for _, d := range damage {
		if err := d.do(); err != nil {
			t.Fatal(err)
		}
		out, err := runner.Do(ctx, "evt:e2e:big", []byte(`{}`), handler(big))
		if !errors.Is(err, d.want) || !errors.Is(err, ddbstore.ErrLargeResult) || out.Result != nil || runs != 2 {
			t.Fatalf("object %s: %d bytes, runs %d, %v; want %v", d.name, len(out.Result), runs, err, d.want)
		}
		if c := core.Classify(err, core.DefaultClassifiers...); c != core.Permanent {
			t.Errorf("object %s: class %v, want permanent", d.name, c)
		}
	}
}
