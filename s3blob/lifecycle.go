package s3blob

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// LifecycleAPI is the part of the S3 client that EnsureLifecycle calls. An
// *s3.Client satisfies it.
type LifecycleAPI interface {
	// GetBucketLifecycleConfiguration reads the bucket's lifecycle rules.
	GetBucketLifecycleConfiguration(ctx context.Context, in *s3.GetBucketLifecycleConfigurationInput, optFns ...func(*s3.Options)) (*s3.GetBucketLifecycleConfigurationOutput, error)
	// PutBucketLifecycleConfiguration replaces the bucket's lifecycle rules.
	PutBucketLifecycleConfiguration(ctx context.Context, in *s3.PutBucketLifecycleConfigurationInput, optFns ...func(*s3.Options)) (*s3.PutBucketLifecycleConfigurationOutput, error)
}

// RuleIDPrefix begins the ID of the lifecycle rule that LifecycleRule makes;
// the key prefix follows it.
const RuleIDPrefix = "idem-results:"

// ExpirationDays returns the days after which the lifecycle rule expires an
// object kept for a record of the given retention: the retention rounded up
// to whole days, plus one. S3 expiration is in whole days, counted from the
// object's creation and rounded to the next midnight UTC, and S3 removes
// expired objects lazily, usually within a day after that; the extra day
// covers the clocks of S3 and of the writer, so an object never expires
// before the record that points at it. A retention of zero or less gives 1.
func ExpirationDays(retention time.Duration) int32 {
	const day = 24 * time.Hour
	if retention <= 0 {
		return 1
	}
	days := retention / day // at most 106,751 for any Duration
	if retention%day != 0 {
		days++
	}
	return int32(days) + 1
}

// LifecycleRule returns the rule that expires the objects under prefix
// ExpirationDays(retention) days after they were written, current and
// noncurrent versions alike (a retried write of a versioned bucket leaves a
// noncurrent version, removed a day after it was replaced). Its ID is
// RuleIDPrefix followed by prefix (truncated to S3's 255 characters). An
// empty prefix matches the whole bucket.
func LifecycleRule(prefix string, retention time.Duration) types.LifecycleRule {
	id := RuleIDPrefix + prefix
	if len(id) > 255 {
		id = id[:255]
	}
	return types.LifecycleRule{
		ID:                          aws.String(id),
		Status:                      types.ExpirationStatusEnabled,
		Filter:                      &types.LifecycleRuleFilter{Prefix: aws.String(prefix)},
		Expiration:                  &types.LifecycleExpiration{Days: aws.Int32(ExpirationDays(retention))},
		NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1)},
	}
}

// EnsureLifecycle makes bucket's lifecycle configuration hold
// LifecycleRule(prefix, retention): it reads the bucket's rules (one
// GetBucketLifecycleConfiguration) and, unless the rule is already there as
// it should be, writes them back with the rule added or replacing the one
// of the same ID (one PutBucketLifecycleConfiguration). Other rules are
// kept. It is meant for deployment and tests; a concurrent change of the
// bucket's rules between the read and the write is lost. retention must be
// positive: it is the retention the records are kept for
// (idem.WithRetention).
func EnsureLifecycle(ctx context.Context, client LifecycleAPI, bucket, prefix string, retention time.Duration) error {
	if retention <= 0 {
		return fmt.Errorf("s3blob: lifecycle of s3://%s/%s: retention %v must be positive", bucket, prefix, retention)
	}
	want := LifecycleRule(prefix, retention)
	rules, err := currentRules(ctx, client, bucket)
	if err != nil {
		return err
	}
	kept := make([]types.LifecycleRule, 0, len(rules)+1)
	for _, r := range rules {
		if aws.ToString(r.ID) != aws.ToString(want.ID) {
			kept = append(kept, r)
			continue
		}
		if sameRule(r, want) {
			return nil
		}
	}
	_, err = client.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{
		Bucket:                 aws.String(bucket),
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: append(kept, want)},
	})
	if err != nil {
		return fmt.Errorf("s3blob: put lifecycle of s3://%s: %w", bucket, err)
	}
	return nil
}

// currentRules returns bucket's lifecycle rules; none for a bucket without a
// lifecycle configuration (NoSuchLifecycleConfiguration).
func currentRules(ctx context.Context, client LifecycleAPI, bucket string) ([]types.LifecycleRule, error) {
	out, err := client.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(bucket)})
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "NoSuchLifecycleConfiguration" {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("s3blob: get lifecycle of s3://%s: %w", bucket, err)
	}
	return out.Rules, nil
}

// sameRule reports whether the stored rule r does what want does.
func sameRule(r, want types.LifecycleRule) bool {
	return r.Status == want.Status &&
		r.Filter != nil && aws.ToString(r.Filter.Prefix) == aws.ToString(want.Filter.Prefix) &&
		r.Filter.And == nil && r.Filter.Tag == nil && r.Filter.ObjectSizeGreaterThan == nil && r.Filter.ObjectSizeLessThan == nil &&
		r.Expiration != nil && aws.ToInt32(r.Expiration.Days) == aws.ToInt32(want.Expiration.Days) &&
		r.NoncurrentVersionExpiration != nil &&
		aws.ToInt32(r.NoncurrentVersionExpiration.NoncurrentDays) == aws.ToInt32(want.NoncurrentVersionExpiration.NoncurrentDays)
}
