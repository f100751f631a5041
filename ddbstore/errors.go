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

	"github.com/idemgo/idem"
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
	// (AccessDeniedException, UnrecognizedClientException). Permanent. A
	// request refused by the caller's IAM policy (AccessDeniedException)
	// also wraps idem.ErrMisconfigured (the runner logs it at ERROR), and its
	// message names the action to grant ("dynamodb:UpdateItem"): the store
	// has one path per operation and never tries another request instead.
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
	// ErrSchemaMismatch: the table's key schema is not the one the options
	// describe (a string partition key named as configured and, with
	// WithSortKey or WithSortKeyFunc, a string sort key named as
	// configured, else none), as CreateTable, CheckTable or Store.CheckTable
	// found, or as a store call refused as invalid revealed. Found in a
	// *SchemaError, which says what fixes it. Permanent.
	ErrSchemaMismatch = errors.New("ddbstore: table key schema does not match")
)

// SchemaError is a table whose key schema is not the one the store's
// options describe (ErrSchemaMismatch), a misconfiguration no retry
// mends: errors.Is finds ErrSchemaMismatch and idem.ErrMisconfigured in it
// (the runner logs it at ERROR), and, when a store call revealed it,
// ErrInvalidRequest and DynamoDB's error. Found with errors.As inside the
// store's *Error.
type SchemaError struct {
	// Table is the table's name.
	Table string
	// Have is the table's key schema, as DescribeTable reports it:
	// "id (HASH, S)", or "PK (HASH, S), SK (RANGE, S)".
	Have string
	// Want is the key schema the store's options need.
	Want string
	// Fix names the options that give the store the table's key schema
	// (ddbstore.WithKeyAttribute("id")), or says that none can.
	Fix string
	// Err is the store call's error that revealed the mismatch (it wraps
	// ErrInvalidRequest and DynamoDB's ValidationException), or nil when a
	// check of the table found it.
	Err error
}

// Error names both key schemas and the fix.
func (e *SchemaError) Error() string {
	msg := fmt.Sprintf("%v: want %s, table has %s; %s", ErrSchemaMismatch, e.Want, e.Have, e.Fix)
	if e.Err != nil {
		msg += " (" + e.Err.Error() + ")"
	}
	return msg
}

// Unwrap returns ErrSchemaMismatch, idem.ErrMisconfigured and Err.
func (e *SchemaError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrSchemaMismatch, idem.ErrMisconfigured}
	}
	return []error{ErrSchemaMismatch, idem.ErrMisconfigured, e.Err}
}

// Error is a failure of a store operation on a table. Err wraps one of the
// package's sentinel errors and, where there is one, the SDK's error, so both
// errors.Is(err, ErrTableNotFound) and errors.As(err, &apiErr) work. Transient
// errors are additionally marked with core.MarkTransient (core.Classify
// reports Transient) and permanent ones with core.MarkPermanent; an *Error is
// found inside the mark with errors.As.
type Error struct {
	// Op is the operation: "reserve", "complete", "get", "stage" (a
	// staged write refused before the commit), "create table", or one of
	// the operator methods' "release", "list", "check table", "sweep" and
	// "delete expired".
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

// translate maps an SDK error of a call that names a key of the store's
// table (every call but a Scan) to the store's errors, once, by type and
// error code (never by message text). Conditional-check failures are
// handled by the callers before translate is reached. A failure of the
// exchange itself comes first: a reply cut short or undecodable is
// ErrUnavailable (the request may have been applied) whatever its HTTP
// status, since its error code was never read.
//
// DynamoDB refuses a key that does not fit the table's key schema with a
// ValidationException, as it refuses other invalid requests. On one, the
// store reads the table's key schema (one DescribeTable for the store's
// life, made with ctx; see Store.CheckTable) and, if it is not the one its
// options describe, answers a *SchemaError that says what fixes it.
func (s *Store) translate(ctx context.Context, op string, err error) translated {
	t := translateErr(op, s.table, err)
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "ValidationException" {
		return t
	}
	mismatch, why := s.schema.known(ctx, s)
	switch {
	case mismatch != nil:
		mismatch.Err = fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		t.err = core.MarkPermanent(&Error{Op: op, Table: s.table, Err: mismatch})
	case why != "":
		t.err = core.MarkPermanent(&Error{Op: op, Table: s.table, Err: fmt.Errorf("%w: %w (if the table's key schema is not %s, "+
			"the store's options are wrong: WithKeyAttribute, WithSortKey; its key schema could not be read to tell: %s)",
			ErrInvalidRequest, err, s.describeLayoutSchema(), why)})
	}
	return t
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
	switch {
	case notSent(err):
		return translated{err: core.MarkTransient(wrap(ErrUnavailable))}
	case errors.Is(err, context.Canceled):
		// The caller gave up; not ours to retry. The write may have
		// happened.
		return translated{err: &Error{Op: op, Table: table, Err: err}, maybeApplied: true}
	case transportFailure(err):
		// Whatever the reply's status, it was not read whole (or at
		// all): the request may have been applied.
		return translated{err: core.MarkTransient(wrap(ErrUnavailable)), maybeApplied: true}
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
			return translated{err: core.MarkPermanent(deniedError(op, table, code, err))}
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
	// Unknown: permanent, as core.Classify would say.
	return translated{err: &Error{Op: op, Table: table, Err: err}, maybeApplied: true}
}

// deniedError is the error of a request refused for the caller's
// credentials (code, one of deniedCodes): where its IAM policy lacks the
// request's action (AccessDeniedException), a misconfiguration that names
// the action to grant.
func deniedError(op, table, code string, err error) *Error {
	if code != "AccessDeniedException" {
		return &Error{Op: op, Table: table, Err: fmt.Errorf("%w: %w", ErrAccessDenied, err)}
	}
	return &Error{Op: op, Table: table, Err: fmt.Errorf(
		"%w: %w: the caller's IAM policy does not allow %s on the table: grant it (docs/dynamodb.md lists the actions of each operation): %w",
		ErrAccessDenied, idem.ErrMisconfigured, action(err), err)}
}

// action names the DynamoDB action of the request that failed with err,
// as IAM policies name it ("dynamodb:UpdateItem"), from the SDK's
// operation error; a transaction's are its items'.
func action(err error) string {
	var oe *smithy.OperationError
	switch {
	case !errors.As(err, &oe) || oe.Operation() == "":
		return "the request's action"
	case oe.Operation() == "TransactWriteItems":
		// IAM checks each item of a transaction against its own action.
		return "the action of each item of the transaction (dynamodb:PutItem for the record, and each staged item's own)"
	}
	return "dynamodb:" + oe.Operation()
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
