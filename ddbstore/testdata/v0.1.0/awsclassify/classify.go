package awsclassify

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/idemgo/idem/core"
)

// The SDK's own checks, as its standard retryer uses them
// (aws/retry/standard.go, adaptive.go in aws-sdk-go-v2 v1.48.0):
//
//   - retry.DefaultRetryables: a canceled request is not retryable
//     (NoRetryCanceledError); an error with RetryableError() bool says for
//     itself (RetryableError; DynamoDB's CRC-32 mismatch says true); connection
//     errors, resets, refusals, temporary DNS failures and timeouts
//     (RetryableConnectionError); HTTP 500, 502, 503, 504; an HTTP 429 that
//     is no modeled error; the codes RequestTimeout and
//     RequestTimeoutException; and every throttle code below.
//   - retry.DefaultThrottles: the codes of retry.DefaultThrottleErrorCodes,
//     among them ThrottlingException, ProvisionedThroughputExceededException,
//     RequestLimitExceeded, TransactionInProgressException, RequestThrottled,
//     SlowDown, TooManyRequestsException; and an unmodeled HTTP 429.
//
// DynamoDB needs nothing more: its client (service/dynamodb v1.74.1,
// api_client.go resolveRetryer) uses these defaults and changes only the
// attempt count (4) and the base delay (25 ms); its retryable codes
// (ProvisionedThroughputExceededException, RequestLimitExceeded,
// ThrottlingException, TransactionInProgressException) are all in
// retry.DefaultThrottleErrorCodes. SQS and S3 add no codes either.
var (
	retryables = retry.IsErrorRetryables(retry.DefaultRetryables)
	throttles  = retry.IsErrorThrottles(append(retry.DefaultThrottles, retry.ThrottleErrorCode{Codes: extraThrottleCodes}))
)

// extraThrottleCodes are throttling codes of AWS services that the SDK's
// default list lacks: SQS reports a throttled KMS call for an encrypted
// queue as KMS.ThrottlingException (its KmsThrottled error).
var extraThrottleCodes = map[string]struct{}{
	"KMS.ThrottlingException": {},
	"KmsThrottled":            {},
}

// Classify is a core.Classifier that knows what the AWS SDK for Go v2
// retries: it returns core.Transient for an error the SDK's standard retryer
// would retry or counts as a throttle (retry.DefaultRetryables,
// retry.DefaultThrottles), and core.Unknown for anything else, leaving the
// verdict to the next classifier. It never returns core.Permanent.
//
// A throttle is Transient whatever its HTTP status: DynamoDB's
// ProvisionedThroughputExceededException and ThrottlingException come with
// HTTP 400, SQS's RequestThrottled with 403. A canceled context
// (context.Canceled, or the SDK's canceled request) is Unknown: cancellation
// is no verdict on the operation. A context deadline is Unknown here too (the
// SDK reports it as a canceled request); core.NetworkClassifier makes it
// Transient. Classify(nil) is Unknown.
func Classify(err error) core.Class {
	if err == nil || errors.Is(err, context.Canceled) {
		return core.Unknown
	}
	if retryables.IsErrorRetryable(err) == aws.TrueTernary || throttles.IsErrorThrottle(err) == aws.TrueTernary {
		return core.Transient
	}
	return core.Unknown
}

// Mark returns err marked with core.MarkTransient if Classify says it is
// Transient, so that core.Classify finds it as Transient with any chain; the
// mark keeps the error chain (errors.Is and errors.As still find the SDK's
// error). It returns err unchanged if err is nil, if err already carries a
// mark (a *core.MarkedError anywhere in its chain: an explicit
// core.MarkPermanent is never overridden), or if Classify does not say
// Transient.
func Mark(err error) error {
	if err == nil {
		return nil
	}
	var m *core.MarkedError
	if errors.As(err, &m) || Classify(err) != core.Transient {
		return err
	}
	return core.MarkTransient(err)
}

// Classifiers is Classify followed by core.DefaultClassifiers: the chain to
// give idem.WithClassifiers (idem.WithClassifiers(awsclassify.Classifiers...))
// for a runner over a non-AWS store, such as memstore, whose handlers call
// AWS services. An AWS throttle (HTTP 400 with a throttle code) is then
// Transient instead of Permanent. Treat it as read-only: to extend it, copy
// it (append([]core.Classifier{mine}, awsclassify.Classifiers...)).
var Classifiers = append([]core.Classifier{Classify}, core.DefaultClassifiers...)
