package s3blob_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/idemgo/idem/s3blob"
)

func TestExpirationDays(t *testing.T) {
	t.Parallel()
	const day = 24 * time.Hour
	cases := []struct {
		name      string
		retention time.Duration
		want      int32
	}{
		{"zero", 0, 1},
		{"negative", -time.Hour, 1},
		{"one second", time.Second, 2},
		{"one hour", time.Hour, 2},
		{"exactly a day", day, 2},
		{"a day and a second", day + time.Second, 3},
		{"the default 24 h", 24 * time.Hour, 2},
		{"seven days", 7 * day, 8},
		{"a year", 365 * day, 366},
		{"the longest duration", math.MaxInt64, 106_753},
	}
	for _, tc := range cases {
		if got := s3blob.ExpirationDays(tc.retention); got != tc.want {
			t.Errorf("%s: ExpirationDays(%v) = %d, want %d", tc.name, tc.retention, got, tc.want)
		}
		// The object outlives the record: the days cover the retention
		// and one more.
		if got := time.Duration(s3blob.ExpirationDays(tc.retention)) * day; tc.retention > 0 && tc.retention < 1<<62 && got < tc.retention+day {
			t.Errorf("%s: %v of expiry < retention %v + a day", tc.name, got, tc.retention)
		}
	}
}

func TestLifecycleRule(t *testing.T) {
	t.Parallel()
	r := s3blob.LifecycleRule("idem/results/", 72*time.Hour)
	if aws.ToString(r.ID) != "idem-results:idem/results/" || r.Status != types.ExpirationStatusEnabled ||
		aws.ToString(r.Filter.Prefix) != "idem/results/" || aws.ToInt32(r.Expiration.Days) != 4 ||
		aws.ToInt32(r.NoncurrentVersionExpiration.NoncurrentDays) != 1 {
		t.Fatalf("rule %+v", r)
	}
	long := s3blob.LifecycleRule(strings.Repeat("p", 300), time.Hour)
	if n := len(aws.ToString(long.ID)); n != 255 || len(aws.ToString(long.Filter.Prefix)) != 300 {
		t.Fatalf("long prefix: ID of %d characters, want 255, and the whole prefix in the filter", n)
	}
}

func TestEnsureLifecycleArguments(t *testing.T) {
	t.Parallel()
	if err := s3blob.EnsureLifecycle(t.Context(), nil, "bucket", "p/", 0); err == nil {
		t.Fatal("EnsureLifecycle with retention 0 accepted")
	}
}

func TestNewArguments(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name           string
		client         s3blob.API
		bucket, prefix string
	}{
		{"nil client", nil, "bucket", ""},
		{"short bucket", fakeAPI{}, "b", ""},
		{"long bucket", fakeAPI{}, strings.Repeat("b", 64), ""},
		{"long prefix", fakeAPI{}, "bucket", strings.Repeat("p", 513)},
	}
	for _, tc := range cases {
		if _, err := s3blob.New(tc.client, tc.bucket, tc.prefix); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	s, err := s3blob.New(fakeAPI{}, "bucket", strings.Repeat("p", 512))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), strings.Repeat("n", 513), nil); err == nil {
		t.Error("Put of a key over 1024 bytes accepted")
	}
	if _, err := s.Get(t.Context(), ""); err == nil {
		t.Error("Get of an empty name accepted")
	}
}
