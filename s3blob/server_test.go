package s3blob_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/idemgo/idem/blob"
	"github.com/idemgo/idem/s3blob"
)

// The integration tests talk to the S3 API at the endpoint the SDK's own
// configuration names (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL), which
// internal/cmd/testenv sets when it starts moto:
//
//	go run ./internal/cmd/testenv -server moto -- go test ./s3blob/

// motoClient returns an S3 client for the configured endpoint, with
// path-style addressing, or fails the test when there is none (unless
// IDEM_SKIP_INTEGRATION=1 says to skip it): never a silent skip.
func motoClient(t *testing.T) *s3.Client {
	t.Helper()
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1: S3 integration test skipped")
	}
	if os.Getenv("AWS_ENDPOINT_URL_S3") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Fatal("no S3 endpoint: run `go run ./internal/cmd/testenv -server moto -- go test ./s3blob/` " +
			"(or set AWS_ENDPOINT_URL_S3 to an S3 API), or set IDEM_SKIP_INTEGRATION=1 to skip the integration tests")
	}
	cfg, err := config.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
}

// newBucket creates a bucket with a unique name.
func newBucket(t *testing.T, client *s3.Client) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "idem-test-" + hex.EncodeToString(b)
	if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestServerPutGet(t *testing.T) {
	t.Parallel()
	client := motoClient(t)
	bucket := newBucket(t, client)
	s, err := s3blob.New(client, bucket, "idem/results/")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	data := make([]byte, 2<<20)
	_, _ = rand.Read(data)
	if err := s.Put(ctx, "k/obj-1", data); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "k/obj-1")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %d bytes (equal %v), %v", len(got), bytes.Equal(got, data), err)
	}
	// The object is under the prefix, with the SHA-256 S3 was given.
	head, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("idem/results/k/obj-1"),
		ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToInt64(head.ContentLength) != int64(len(data)) {
		t.Fatalf("HeadObject: %v, %v", head, err)
	}
	t.Logf("stored checksum: SHA-256 %q", aws.ToString(head.ChecksumSHA256))

	// A rewrite of the same name replaces the object.
	if err := s.Put(ctx, "k/obj-1", data[:10]); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "k/obj-1"); err != nil || !bytes.Equal(got, data[:10]) {
		t.Fatalf("Get after rewrite = %d bytes, %v", len(got), err)
	}

	if _, err := s.Get(ctx, "k/missing"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Get of a missing object: %v, want blob.ErrNotFound", err)
	}
	// GetLimited reads an object of at most its bound, refuses a larger
	// one, and finds no missing one.
	if got, err := s.GetLimited(ctx, "k/obj-1", 10); err != nil || !bytes.Equal(got, data[:10]) {
		t.Fatalf("GetLimited(10) of 10 bytes = %d bytes, %v", len(got), err)
	}
	if _, err := s.GetLimited(ctx, "k/obj-1", 9); !errors.Is(err, blob.ErrMismatch) {
		t.Fatalf("GetLimited(9) of 10 bytes: %v, want blob.ErrMismatch", err)
	}
	if _, err := s.GetLimited(ctx, "k/missing", 9); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("GetLimited of a missing object: %v, want blob.ErrNotFound", err)
	}
	// A missing bucket is no missing object.
	other, _ := s3blob.New(client, bucket+"-gone", "")
	if _, err := other.Get(ctx, "k/obj-1"); err == nil || errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Get from a missing bucket: %v, want an error other than blob.ErrNotFound", err)
	}
}

// countingLifecycle counts the lifecycle writes of an S3 client.
type countingLifecycle struct {
	*s3.Client
	mu   sync.Mutex
	puts int // guarded by mu
}

func (c *countingLifecycle) PutBucketLifecycleConfiguration(ctx context.Context, in *s3.PutBucketLifecycleConfigurationInput, optFns ...func(*s3.Options)) (*s3.PutBucketLifecycleConfigurationOutput, error) {
	c.mu.Lock()
	c.puts++
	c.mu.Unlock()
	return c.Client.PutBucketLifecycleConfiguration(ctx, in, optFns...)
}

func TestServerLifecycle(t *testing.T) {
	t.Parallel()
	client := motoClient(t)
	bucket := newBucket(t, client)
	ctx := t.Context()
	// A rule of the bucket's owner, which EnsureLifecycle keeps.
	theirs := types.LifecycleRule{ID: aws.String("logs"), Status: types.ExpirationStatusEnabled,
		Filter: &types.LifecycleRuleFilter{Prefix: aws.String("logs/")}, Expiration: &types.LifecycleExpiration{Days: aws.Int32(30)}}
	c := &countingLifecycle{Client: client}

	steps := []struct {
		name      string
		retention time.Duration
		before    func()
		puts      int // lifecycle writes after the step
		days      int32
	}{
		{"no configuration yet", 72 * time.Hour, nil, 1, 4},
		{"same retention again: no write", 72 * time.Hour, nil, 1, 4},
		{"longer retention replaces the rule", 7*24*time.Hour + time.Minute, nil, 2, 9},
		{"owner's rule kept", 7*24*time.Hour + time.Minute, func() {
			_, err := client.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: aws.String(bucket),
				LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{theirs}}})
			if err != nil {
				t.Fatal(err)
			}
		}, 3, 9},
	}
	for i, st := range steps {
		if st.before != nil {
			st.before()
		}
		if err := s3blob.EnsureLifecycle(ctx, c, bucket, "idem/results/", st.retention); err != nil {
			t.Fatalf("step %d (%s): %v", i, st.name, err)
		}
		out, err := client.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(bucket)})
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, st.name, err)
		}
		var ours *types.LifecycleRule
		ids := map[string]bool{}
		for j, r := range out.Rules {
			ids[aws.ToString(r.ID)] = true
			if aws.ToString(r.ID) == s3blob.RuleIDPrefix+"idem/results/" {
				ours = &out.Rules[j]
			}
		}
		if ours == nil || ours.Filter == nil || aws.ToString(ours.Filter.Prefix) != "idem/results/" ||
			ours.Expiration == nil || aws.ToInt32(ours.Expiration.Days) != st.days || ours.Status != types.ExpirationStatusEnabled {
			t.Fatalf("step %d (%s): rules %+v; want ours with prefix idem/results/ and %d days", i, st.name, out.Rules, st.days)
		}
		if c.puts != st.puts {
			t.Errorf("step %d (%s): %d lifecycle writes, want %d", i, st.name, c.puts, st.puts)
		}
		if st.before != nil && !ids["logs"] {
			t.Errorf("step %d (%s): the owner's rule is gone: %v", i, st.name, ids)
		}
	}
}
