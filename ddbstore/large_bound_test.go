package ddbstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/blob"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/fakeclock"
	"github.com/idemgo/idem/s3blob"
)

// swappableS3 keeps objects in memory; once swapped, GetObject answers a
// body of swapSize bytes instead (as a bucket whose object someone
// replaced), and counts the bytes read from it.
type swappableS3 struct {
	mu       sync.Mutex
	objects  map[string][]byte // guarded by mu
	swapSize int64             // guarded by mu; 0: not swapped
	noLength bool              // guarded by mu: answer without ContentLength
	read     atomic.Int64
}

func (s *swappableS3) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	b, err := io.ReadAll(in.Body)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.objects == nil {
		s.objects = map[string][]byte{}
	}
	s.objects[aws.ToString(in.Key)] = b
	return &s3.PutObjectOutput{}, nil
}

func (s *swappableS3) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var body io.Reader = bytes.NewReader(s.objects[aws.ToString(in.Key)])
	n := int64(len(s.objects[aws.ToString(in.Key)]))
	if s.swapSize > 0 {
		body, n = io.LimitReader(zeros{}, s.swapSize), s.swapSize
	}
	out := &s3.GetObjectOutput{Body: io.NopCloser(&countingReader{r: body, n: &s.read})}
	if !s.noLength {
		out.ContentLength = aws.Int64(n)
	}
	return out, nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// Item 8: a large result whose object was replaced by a far larger one is
// refused having read no more than its recorded size (and a byte), whether
// S3 says the object's length or not: every duplicate of the key would
// otherwise read the whole object.
func TestLargeResultReadBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		noLength bool
	}{{"with Content-Length", false}, {"without Content-Length", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := &swappableS3{}
			objects, err := s3blob.New(api, "idem-results", "idem/")
			if err != nil {
				t.Fatal(err)
			}
			clock := fakeclock.New(t0)
			store, err := ddbstore.New(newMemTable(), "idem-unit", ddbstore.WithLargeResults(objects), ddbstore.WithMaxItemSize(smallItem))
			if err != nil {
				t.Fatal(err)
			}
			runner, err := idem.New(store, idem.WithClock(clock.Now), idem.WithSleep(clock.Sleep), idem.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			runs := 0
			do := func() error {
				_, err := runner.Do(context.Background(), "evt:large:bound", nil, func(context.Context) ([]byte, error) {
					runs++
					return randomBytes(large), nil
				})
				return err
			}
			if err := do(); err != nil {
				t.Fatal(err)
			}
			api.mu.Lock()
			api.swapSize, api.noLength = 48<<20, tc.noLength
			api.mu.Unlock()
			err = do()
			if !errors.Is(err, blob.ErrMismatch) || runs != 1 {
				t.Fatalf("replay of a swapped object: runs %d, err %v; want no run and %v", runs, err, blob.ErrMismatch)
			}
			if got := api.read.Load(); got > large+1 {
				t.Errorf("read %d bytes of the swapped object; want at most %d (its recorded size and a byte)", got, large+1)
			}
		})
	}
}
