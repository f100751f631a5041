package main

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/aws/smithy-go"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/ddbstore"
)

// Exit codes, one per kind of failure an operator or a script acts on
// differently.
const (
	exitOK          = 0   // success
	exitError       = 1   // any other error
	exitUsage       = 2   // bad flags, or an event file that gives no key
	exitNotFound    = 3   // no live record for the key
	exitChanged     = 4   // release refused: the record changed since it was read
	exitNotReleased = 5   // release not done: not confirmed, or the lease is live
	exitNoTable     = 6   // the table does not exist (or is not ACTIVE)
	exitSchema      = 7   // the table's key schema is not the store's
	exitDenied      = 8   // the credentials may not use the table
	exitConfig      = 9   // no AWS credentials or region, a bad profile, or an endpoint that cannot be reached
	exitUnavailable = 10  // DynamoDB throttled or unavailable: retry
	exitLeftBehind  = 11  // a redrive or a bulk release left messages or records behind
	exitInterrupted = 130 // interrupted (SIGINT, SIGTERM)
)

// usageError is a bad command line or input file; its message says what to
// change.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// configError is an AWS configuration the command cannot use: no region,
// no credentials, a profile that does not exist.
type configError struct {
	msg string
	err error
}

func (e *configError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e *configError) Unwrap() error { return e.err }

// leftBehindError is a redrive or a bulk release that did not do
// everything: its report (already written) says what it left and why.
type leftBehindError struct{ msg string }

func (e *leftBehindError) Error() string { return e.msg }

// notReleasedError is a release the command declined to make.
type notReleasedError struct{ msg string }

func (e *notReleasedError) Error() string { return e.msg }

// fail writes err's explanation to stderr and returns its exit code.
func (c *cli) fail(err error) int {
	code, msg := explain(err)
	fmt.Fprintf(c.stderr, "idem: %s\n", msg)
	if msg != err.Error() {
		fmt.Fprintf(c.stderr, "  cause: %v\n", err)
	}
	return code
}

// explain maps err to its exit code and a message that says what to do.
// Errors are matched by type and sentinel, never by text.
func explain(err error) (int, string) {
	var (
		ue  usageError
		ce  *configError
		nre *notReleasedError
		lbe *leftBehindError
		se  *ddbstore.Error
	)
	table := "the table"
	if errors.As(err, &se) {
		table = fmt.Sprintf("table %q", se.Table)
	}
	switch {
	case errors.As(err, &ue):
		return exitUsage, ue.msg
	case errors.As(err, &ce):
		return exitConfig, ce.msg
	case errors.As(err, &nre):
		return exitNotReleased, nre.msg
	case errors.As(err, &lbe):
		return exitLeftBehind, lbe.msg
	case errors.Is(err, context.Canceled):
		return exitInterrupted, "interrupted"
	case errors.Is(err, idem.ErrNotFound):
		return exitNotFound, err.Error()
	case errors.Is(err, idem.ErrRecordChanged):
		return exitChanged, err.Error()
	case errors.Is(err, ddbstore.ErrTableNotFound):
		return exitNoTable, table + " not found (or not ACTIVE): check the table name (--table, IDEM_TABLE), --region, --profile and the endpoint"
	case errors.Is(err, ddbstore.ErrSchemaMismatch):
		return exitSchema, table + " does not have the store's key schema: pass --key-attr (and --sort-key) as the store is configured, or check --table"
	case errors.Is(err, ddbstore.ErrAccessDenied):
		return exitDenied, "access denied to " + table + ": the credentials need dynamodb:DescribeTable, GetItem, Scan and (for release) DeleteItem on it"
	case unreachable(err) != "":
		return exitConfig, unreachable(err)
	case errors.Is(err, ddbstore.ErrThrottled):
		return exitUnavailable, "DynamoDB throttled the requests to " + table + ": retry later, or lower --max-rcu"
	case errors.Is(err, ddbstore.ErrUnavailable):
		return exitUnavailable, "DynamoDB is unavailable (" + table + "): retry"
	case errors.Is(err, ddbstore.ErrBadToken):
		return exitUsage, "--next is not a token that list or stats printed"
	case errors.Is(err, ddbstore.ErrCorruptRecord):
		return exitError, "the record of the key does not decode: was " + table + " written by another program?"
	}
	return exitError, err.Error()
}

// unreachable explains a request that could not reach its server (a
// refused connection, an unknown host): almost always an endpoint or region
// set wrong rather than an outage, so it names the address and the settings
// to check. It returns "" for any other error.
func unreachable(err error) string {
	var (
		dns        *net.DNSError
		op         *net.OpError
		where, why string
	)
	switch {
	case errors.As(err, &dns):
		where, why = dns.Name, "unknown host"
		if dns.IsTimeout || dns.IsTemporary {
			why = "host name lookup failed"
		}
	case errors.As(err, &op) && op.Op == "dial":
		where, why = "the endpoint", "cannot connect"
		if op.Addr != nil {
			where = op.Addr.String()
		}
		if op.Err != nil {
			why = op.Err.Error()
		}
	default:
		return ""
	}
	service, env := "AWS", "AWS_ENDPOINT_URL"
	var oe *smithy.OperationError
	if errors.As(err, &oe) {
		service = oe.Service()
		env = "AWS_ENDPOINT_URL_" + serviceEnvName(service) + " or AWS_ENDPOINT_URL"
	}
	return fmt.Sprintf("cannot reach %s at %s (%s): check the endpoint (--endpoint-url, %s) and --region, "+
		"and that the server is running", service, where, why, env)
}

// serviceEnvName is a service id as the SDK's service-specific endpoint
// variables spell it (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS).
func serviceEnvName(service string) string {
	b := make([]byte, 0, len(service))
	for _, r := range service {
		switch {
		case r >= 'a' && r <= 'z':
			b = append(b, byte(r-'a'+'A'))
		case r == ' ':
			b = append(b, '_')
		case r < 0x80:
			b = append(b, byte(r))
		}
	}
	return string(b)
}
