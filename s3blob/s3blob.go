package s3blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/idemgo/idem/awsclassify"
	"github.com/idemgo/idem/blob"
	"github.com/idemgo/idem/core"
)

// API is the part of the S3 client that a Store calls. An *s3.Client
// satisfies it; tests may pass a fake.
type API interface {
	// PutObject writes an object.
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	// GetObject reads an object.
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// maxKey is S3's limit on an object key, in bytes.
const maxKey = 1024

// Store is a blob.Store on the objects of an S3 bucket under a key prefix.
// It is safe for concurrent use by multiple goroutines. Create one with New;
// the zero value is not usable.
type Store struct {
	client API
	bucket string
	prefix string
}

var (
	_ blob.Store         = (*Store)(nil)
	_ blob.LimitedGetter = (*Store)(nil)
)

// New returns a Store that keeps the object named name at the key
// prefix+name of bucket. The prefix (for example "idem/results/") is what
// the lifecycle rule matches (LifecycleRule); it may be empty. New makes no
// calls.
func New(client API, bucket, prefix string) (*Store, error) {
	if client == nil {
		return nil, errors.New("s3blob: nil client")
	}
	if len(bucket) < 3 || len(bucket) > 63 {
		return nil, fmt.Errorf("s3blob: bucket name %q must be 3 to 63 characters", bucket)
	}
	if len(prefix) > maxKey/2 {
		return nil, fmt.Errorf("s3blob: prefix of %d bytes, at most %d", len(prefix), maxKey/2)
	}
	return &Store{client: client, bucket: bucket, prefix: prefix}, nil
}

// Bucket returns the store's bucket.
func (s *Store) Bucket() string { return s.bucket }

// Prefix returns the store's key prefix.
func (s *Store) Prefix() string { return s.prefix }

func (s *Store) key(name string) (string, error) {
	if name == "" || len(s.prefix)+len(name) > maxKey {
		return "", fmt.Errorf("s3blob: object name of %d bytes: want 1 to %d with the prefix", len(name), maxKey-len(s.prefix))
	}
	return s.prefix + name, nil
}

// Put implements blob.Store.Put with one PutObject that carries the
// object's SHA-256 (ChecksumSHA256), which S3 checks before it stores the
// object.
func (s *Store) Put(ctx context.Context, name string, data []byte) error {
	key, err := s.key(name)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:         aws.String(s.bucket),
		Key:            aws.String(key),
		Body:           bytes.NewReader(data),
		ContentLength:  aws.Int64(int64(len(data))),
		ContentType:    aws.String("application/octet-stream"),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:])),
	})
	if err != nil {
		return awsclassify.Mark(fmt.Errorf("s3blob: put s3://%s/%s: %w", s.bucket, key, err))
	}
	return nil
}

// Get implements blob.Store.Get with one GetObject that asks for the stored
// checksum (ChecksumMode ENABLED). A body whose SHA-256 differs from the
// checksum S3 returns is an error wrapping blob.ErrMismatch, whether the
// SDK's own check or this one finds it (marked permanent when this one
// does); an object without a SHA-256
// checksum is returned unchecked (the caller checks its own copy of the
// sum). A body cut short is a transient error.
func (s *Store) Get(ctx context.Context, name string) ([]byte, error) {
	return s.get(ctx, name, -1)
}

// GetLimited implements blob.LimitedGetter as Get does, reading no more
// than max+1 bytes of the object: an object whose Content-Length is over
// max is refused before its body is read, and a body that runs past max
// (whatever S3 said its length was) when max+1 bytes are read. Either is an
// error wrapping blob.ErrMismatch.
func (s *Store) GetLimited(ctx context.Context, name string, max int64) ([]byte, error) {
	return s.get(ctx, name, max)
}

// get is Get, reading at most max+1 bytes when max is not negative.
func (s *Store) get(ctx context.Context, name string, max int64) ([]byte, error) {
	key, err := s.key(name)
	if err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket:       aws.String(s.bucket),
		Key:          aws.String(key),
		ChecksumMode: types.ChecksumModeEnabled,
	})
	if err != nil {
		return nil, s.getError(key, err)
	}
	defer out.Body.Close()
	var body io.Reader = out.Body
	if max >= 0 {
		if n := aws.ToInt64(out.ContentLength); n > max {
			return nil, blob.TooLarge(name, n, max)
		}
		body = io.LimitReader(out.Body, max+1)
	}
	data, err := io.ReadAll(body)
	if max >= 0 && int64(len(data)) > max {
		return nil, blob.TooLarge(name, -1, max)
	}
	want := aws.ToString(out.ChecksumSHA256)
	if strings.Contains(want, "-") {
		want = "" // a composite checksum of a multipart upload: not the object's SHA-256
	}
	if want != "" && (err == nil || int64(len(data)) == aws.ToInt64(out.ContentLength)) {
		// With the whole body at hand, a failed read is the SDK's own
		// check of S3's checksum: the same comparison tells.
		sum := sha256.Sum256(data)
		if got := base64.StdEncoding.EncodeToString(sum[:]); got != want {
			return nil, core.MarkPermanent(fmt.Errorf("s3blob: get s3://%s/%s: %w: body SHA-256 %s, S3 says %s", s.bucket, key, blob.ErrMismatch, got, want))
		}
	}
	if err != nil {
		return nil, awsclassify.Mark(fmt.Errorf("s3blob: get s3://%s/%s: reading the body: %w", s.bucket, key, err))
	}
	return data, nil
}

// getError translates a failed GetObject: a missing object (NoSuchKey, or
// an HTTP 404 without a body, as S3 answers when the caller may not list
// the bucket) wraps blob.ErrNotFound; the rest is marked as awsclassify
// says.
func (s *Store) getError(key string, err error) error {
	var nsk *types.NoSuchKey
	var sc interface{ HTTPStatusCode() int }
	if errors.As(err, &nsk) || (errors.As(err, &sc) && sc.HTTPStatusCode() == 404 && !noSuchBucket(err)) {
		return fmt.Errorf("s3blob: get s3://%s/%s: %w: %w", s.bucket, key, blob.ErrNotFound, err)
	}
	return awsclassify.Mark(fmt.Errorf("s3blob: get s3://%s/%s: %w", s.bucket, key, err))
}

// noSuchBucket reports S3's NoSuchBucket, a 404 that is a configuration
// error rather than a missing object.
func noSuchBucket(err error) bool {
	var nsb *types.NoSuchBucket
	if errors.As(err, &nsb) {
		return true
	}
	var api interface{ ErrorCode() string }
	return errors.As(err, &api) && api.ErrorCode() == "NoSuchBucket"
}
