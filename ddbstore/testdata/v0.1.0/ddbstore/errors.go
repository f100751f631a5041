package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemgo/idem/awsclassify"
	"github.com/idemgo/idem/core"
)

// Sentinel errors of the store, checked with errors.Is. Each is wrapped in an
// *Error that names the operation and the table.
var (
	// ErrTableNotFound: the table does not exist, or is not ACTIVE yet
	// (DynamoDB's ResourceNotFoundException). Permanent.
	ErrTableNotFound = errors.New("ddbstore: table not found")
	// ErrAccessDenied: the caller's credentials may not use the table
	// (AccessDeniedException, UnrecognizedClientException). Permanent.
	ErrAccessDenied = errors.New("ddbstore: access denied")
	// ErrInvalidRequest: DynamoDB refused the request as invalid
	// (ValidationException, SerializationException), which usually means the
	// table's key schema differs from the store's configuration. Permanent.
	ErrInvalidRequest = errors.New("ddbstore: request rejected as invalid")
	// ErrThrottled: DynamoDB refused the request for capacity
	// (ProvisionedThroughputExceededException, RequestLimitExceeded,
	// ThrottlingException, HTTP 429). The write did not happen. Transient.
	ErrThrottled = errors.New("ddbstore: throttled")
	// ErrUnavailable: the request failed in transport or on the server (HTTP
	// 5xx, timeouts, connection resets, a response that could not be read).
	// A write may or may not have happened; see the package documentation
	// for why a retry is safe. Transient.
	ErrUnavailable = errors.New("ddbstore: dynamodb unavailable")
	// ErrKeyTooLarge: the key is empty, or the item's key does not fit
	// DynamoDB's limits: the prefix (WithKeyPrefix) and the key together
	// over the partition key's 2048 bytes, or a sort key value
	// (WithSortKeyFunc) empty or over 1024 bytes. Permanent; nothing was
	// written.
	ErrKeyTooLarge = errors.New("ddbstore: key empty or too large")
	// ErrItemTooLarge: a reservation's record would exceed the item size
	// limit (see WithMaxItemSize). Permanent; nothing was written. A
	// completion never fails for size: it drops the result instead.
	ErrItemTooLarge = errors.New("ddbstore: record too large")
	// ErrCorruptRecord: a stored item could not be decoded as a record
	// (missing key or status, a number out of range, a result whose encoding
	// is unknown or whose compressed body is damaged). Permanent.
	ErrCorruptRecord = errors.New("ddbstore: corrupt record")
	// ErrSchemaMismatch: CreateTable or CheckTable found a table whose key
	// schema is not the one the options describe: a string partition key
	// named as configured and, with WithSortKey or WithSortKeyFunc, a string
	// sort key named as configured, else none. Permanent.
	ErrSchemaMismatch = errors.New("ddbstore: table key schema does not match")
)

// Error is a failure of a store operation on a table. Err wraps one of the
// package's sentinel errors and, where there is one, the SDK's error, so both
// errors.Is(err, ErrTableNotFound) and errors.As(err, &apiErr) work. Transient
// errors are additionally marked with core.MarkTransient (core.Classify
// reports Transient) and permanent ones with core.MarkPermanent; an *Error is
// found inside the mark with errors.As.
type Error struct {
	// Op is the operation: "reserve", "complete", "get", "create table",
	// or one of the operator methods' "release", "list" and "check table".
	Op string
	// Table is the table's name.
	Table string
	// Err is the cause.
	Err error
}

// Error describes the failure with its operation and table.
func (e *Error) Error() string {
	return fmt.Sprintf("ddbstore: %s on table %q: %v", e.Op, e.Table, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Error codes that DynamoDB (and servers that copy its API) return, mapped to
// the store's sentinels. Codes not listed fall back on the HTTP status.
var (
	throttleCodes = map[string]bool{
		"ProvisionedThroughputExceededException": true,
		"RequestLimitExceeded":                   true,
		"ThrottlingException":                    true,
		"Throttling":                             true,
		"TooManyRequestsException":               true,
		// A conflicting transaction holds the item; the write was refused.
		"TransactionConflictException":     true,
		"ReplicatedWriteConflictException": true,
	}
	serverCodes = map[string]bool{
		"InternalServerError":         true,
		"InternalFailure":             true,
		"ServiceUnavailable":          true,
		"ServiceUnavailableException": true,
	}
	notFoundCodes = map[string]bool{
		"ResourceNotFoundException": true,
	}
	deniedCodes = map[string]bool{
		"AccessDeniedException":               true,
		"UnrecognizedClientException":         true,
		"InvalidSignatureException":           true,
		"MissingAuthenticationTokenException": true,
		"ExpiredTokenException":               true,
	}
	invalidCodes = map[string]bool{
		"ValidationException":    true,
		"SerializationException": true,
	}
)

// translated is the result of translate: the error to return, and whether the
// failed request may nevertheless have been applied by the server.
type translated struct {
	err          error
	maybeApplied bool
}

// translate maps an SDK error to the store's errors, once, by type and error
// code (never by message text). Conditional-check failures are handled by
// the callers before translate is reached.
func (s *Store) translate(op string, err error) translated {
	return translateErr(op, s.table, err)
}

func translateErr(op, table string, err error) translated {
	wrap := func(sentinel error) *Error {
		return &Error{Op: op, Table: table, Err: fmt.Errorf("%w: %w", sentinel, err)}
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// Not expected here; a refused condition certainly wrote nothing.
		return translated{err: core.MarkPermanent(wrap(ErrInvalidRequest))}
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		code := api.ErrorCode()
		switch {
		case throttleCodes[code]:
			return translated{err: core.MarkTransient(wrap(ErrThrottled))}
		case serverCodes[code]:
			return translated{err: core.MarkTransient(wrap(ErrUnavailable)), maybeApplied: true}
		case notFoundCodes[code]:
			return translated{err: core.MarkPermanent(wrap(ErrTableNotFound))}
		case deniedCodes[code]:
			return translated{err: core.MarkPermanent(wrap(ErrAccessDenied))}
		case invalidCodes[code]:
			return translated{err: core.MarkPermanent(wrap(ErrInvalidRequest))}
		}
	}
	if status, ok := httpStatus(err); ok {
		switch {
		case status == 429:
			return translated{err: core.MarkTransient(wrap(ErrThrottled))}
		case status >= 500:
			return translated{err: core.MarkTransient(wrap(ErrUnavailable)), maybeApplied: true}
		case status == 403:
			return translated{err: core.MarkPermanent(wrap(ErrAccessDenied))}
		case status == 404:
			return translated{err: core.MarkPermanent(wrap(ErrTableNotFound))}
		case status >= 400:
			// Another 4xx with a code we do not know: the server refused
			// the request, and it will refuse it again.
			return translated{err: core.MarkPermanent(&Error{Op: op, Table: table, Err: err})}
		}
	}
	if notSent(err) {
		return translated{err: core.MarkTransient(wrap(ErrUnavailable))}
	}
	if errors.Is(err, context.Canceled) {
		// The caller gave up; not ours to retry. The write may have
		// happened.
		return translated{err: &Error{Op: op, Table: table, Err: err}, maybeApplied: true}
	}
	if transportFailure(err) {
		return translated{err: core.MarkTransient(wrap(ErrUnavailable)), maybeApplied: true}
	}
	// Unknown: permanent, as core.Classify would say.
	return translated{err: &Error{Op: op, Table: table, Err: err}, maybeApplied: true}
}

// httpStatus returns the status of an HTTP response error (the SDK's
// *awshttp.ResponseError and smithy's *smithyhttp.ResponseError both have
// the method).
func httpStatus(err error) (int, bool) {
	var sc interface{ HTTPStatusCode() int }
	if errors.As(err, &sc) {
		if c := sc.HTTPStatusCode(); c > 0 {
			return c, true
		}
	}
	return 0, false
}

// notSent reports failures that certainly happened before the request
// reached a server: a refused or failed dial.
func notSent(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// transportFailure reports failures of the exchange itself: timeouts
// (including the context's deadline), resets, broken pipes, a response cut
// short, or a response body that could not be decoded.
func transportFailure(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var conn interface{ ConnectionError() bool } // smithyhttp.RequestSendError
	if errors.As(err, &conn) && conn.ConnectionError() {
		return true
	}
	var de *smithy.DeserializationError
	return errors.As(err, &de)
}

// ClassifyError implements idem.ErrorClassifier: AWS errors are classified
// with what the AWS SDK knows of throttling, 5xx and connection errors
// (awsclassify), so a runner over this store retries them, and records
// them as retryable, without further configuration.
func (s *Store) ClassifyError(err error) core.Class { return awsclassify.Classify(err) }
