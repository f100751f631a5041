package s3blob_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/idemgo/idem/s3blob"
)

// fakeAPI is an API that answers no call; the argument tests make none.
type fakeAPI struct{}

func (fakeAPI) PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	return nil, errors.New("fake: no calls")
}

func (fakeAPI) GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return nil, errors.New("fake: no calls")
}

// The lifecycle rule for records retained 72 hours: the objects are kept
// four days (three, rounded up, and one more), then S3 removes them.
func ExampleLifecycleRule() {
	r := s3blob.LifecycleRule("idem/results/", 72*time.Hour)
	fmt.Println("id:", aws.ToString(r.ID))
	fmt.Println("prefix:", aws.ToString(r.Filter.Prefix))
	fmt.Println("expire after days:", aws.ToInt32(r.Expiration.Days))
	fmt.Println("status:", r.Status)
	// Output:
	// id: idem-results:idem/results/
	// prefix: idem/results/
	// expire after days: 4
	// status: Enabled
}

// S3 expiry is in whole days and lags: a retention is rounded up to whole
// days, plus one.
func ExampleExpirationDays() {
	for _, r := range []time.Duration{time.Hour, 24 * time.Hour, 25 * time.Hour, 7 * 24 * time.Hour} {
		fmt.Printf("%v -> %d days\n", r, s3blob.ExpirationDays(r))
	}
	// Output:
	// 1h0m0s -> 2 days
	// 24h0m0s -> 2 days
	// 25h0m0s -> 3 days
	// 168h0m0s -> 8 days
}
