// Package awsclassify classifies errors of the AWS SDK for Go v2 for idem's
// retry decisions, using what the SDK itself knows (package aws/retry).
//
// core.DefaultClassifiers knows HTTP status codes and network failures but no
// service's error codes, so an AWS throttle, which arrives as HTTP 400 (or
// 403) with a code such as ThrottlingException,
// ProvisionedThroughputExceededException, RequestLimitExceeded or
// RequestThrottled, is Permanent there. Classify answers Transient for every
// error the SDK's standard retryer would retry or counts as a throttle:
// throttle codes, HTTP 500/502/503/504, S3's SlowDown and RequestTimeout,
// connection resets, refusals, timeouts and temporary DNS failures, and errors
// that say RetryableError() (such as DynamoDB's CRC-32 mismatch). For any
// other error it answers core.Unknown, never core.Permanent: the rest of the
// chain decides.
//
// Two ways to use it:
//
//   - Classifiers, the chain Classify + core.DefaultClassifiers, for
//     idem.WithClassifiers;
//   - Mark, which marks an error the SDK would retry with core.MarkTransient
//     (keeping errors.Is and errors.As to the SDK's error), for code that
//     returns errors to a runner configured with another chain.
//
// A throttled call is the service asking for a pause. The SDK honours an
// x-amz-retry-after header within its own attempts but exposes no such delay
// on the error it returns, so this package reports none: the runner's
// backoff applies.
//
// The package imports only the SDK's core module (aws, aws/retry) and idem's
// core; it needs no service client.
package awsclassify
