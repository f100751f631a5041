package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem/core"
)

// Sentinel errors of the store, checked with errors.Is. Each is wrapped in an
// *Error that names the operation.
var (
	// ErrUnavailable: the command failed in transport (a refused or broken
	// connection, a timeout, an exhausted connection pool) or the server
	// could not take it now (LOADING, BUSY, TRYAGAIN, CLUSTERDOWN,
	// MASTERDOWN, READONLY, MOVED, ASK, OOM, NOREPLICAS, max clients). A
	// write answered with one of these errors did not happen; a write whose
	// connection failed after it was sent may have: see the package
	// documentation for why a retry is safe. Transient.
	ErrUnavailable = errors.New("redisstore: redis unavailable")
	// ErrNotReplicated: with WithWait, a write was applied on the primary
	// but fewer replicas than asked acknowledged it in time. Transient: a
	// retry recognises its own write and waits again.
	ErrNotReplicated = errors.New("redisstore: write not acknowledged by enough replicas")
	// ErrAccessDenied: the server refused the connection's credentials or
	// the command (NOAUTH, WRONGPASS, NOPERM). Permanent.
	ErrAccessDenied = errors.New("redisstore: access denied")
	// ErrRejected: the server answered with an error the store does not
	// know (for example scripting disabled, or an unknown command). Nothing
	// was written. Permanent.
	ErrRejected = errors.New("redisstore: command rejected")
	// ErrKeyTooLarge: the key is empty or longer than MaxKeySize. Permanent;
	// nothing was written.
	ErrKeyTooLarge = errors.New("redisstore: key empty or too large")
	// ErrRecordTooLarge: a reservation's record would exceed the record
	// size limit (see WithMaxRecordSize). Permanent; nothing was written. A
	// completion never fails for size: it drops the result instead.
	ErrRecordTooLarge = errors.New("redisstore: record too large")
	// ErrCorruptRecord: the key holds something that does not decode as a
	// record (another type than a hash, a missing or unknown status, a
	// number out of range, a result whose encoding is unknown or whose
	// compressed body is damaged). Permanent.
	ErrCorruptRecord = errors.New("redisstore: corrupt record")
)

// Error is a failure of a store operation. Err wraps one of the package's
// sentinel errors and, where there is one, the client's error, so both
// errors.Is(err, ErrUnavailable) and errors.As(err, &redisErr) work.
// Transient errors are additionally marked with core.MarkTransient
// (core.Classify reports Transient) and permanent ones with
// core.MarkPermanent; an *Error is found inside the mark with errors.As.
type Error struct {
	// Op is the operation: "reserve", "complete" or "get".
	Op string
	// Err is the cause.
	Err error
}

// Error describes the failure with its operation.
func (e *Error) Error() string { return fmt.Sprintf("redisstore: %s: %v", e.Op, e.Err) }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// translated is the result of translate: the error to return, and whether
// the failed command may nevertheless have been applied by the server.
type translated struct {
	err          error
	maybeApplied bool
}

// translate maps a client error to the store's errors, once, by the client's
// typed errors and, where it has none, by the error code that starts a Redis
// error reply (the protocol's, never free message text). An error the store
// made itself (an *Error) passes unchanged.
func translate(op string, err error) translated {
	wrap := func(sentinel error) *Error { return &Error{Op: op, Err: fmt.Errorf("%w: %w", sentinel, err)} }
	var own *Error
	if errors.As(err, &own) {
		return translated{err: err}
	}
	if sentinel, transient, ok := replyError(err); ok {
		// The server answered the command with an error: the scripts fail
		// before they write, so nothing was written.
		if transient {
			return translated{err: core.MarkTransient(wrap(sentinel))}
		}
		return translated{err: core.MarkPermanent(wrap(sentinel))}
	}
	switch {
	case notSent(err):
		return translated{err: core.MarkTransient(wrap(ErrUnavailable))}
	case errors.Is(err, redis.ErrClosed):
		// The caller closed the client; nothing was sent.
		return translated{err: core.MarkPermanent(&Error{Op: op, Err: err})}
	case errors.Is(err, context.Canceled):
		// The caller gave up; not ours to retry. The write may have happened.
		return translated{err: &Error{Op: op, Err: err}, maybeApplied: true}
	case transportFailure(err):
		return translated{err: core.MarkTransient(wrap(ErrUnavailable)), maybeApplied: true}
	}
	// Unknown: permanent, as core.Classify would say.
	return translated{err: &Error{Op: op, Err: err}, maybeApplied: true}
}

// replyError classifies an error reply of the server: its sentinel, whether
// it is transient, and ok false if err is no error reply.
func replyError(err error) (sentinel error, transient, ok bool) {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return nil, false, false
	}
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	switch {
	case redis.IsLoadingError(err), redis.IsTryAgainError(err), redis.IsClusterDownError(err),
		redis.IsMasterDownError(err), redis.IsReadOnlyError(err), redis.IsMaxClientsError(err),
		redis.IsOOMError(err), redis.IsNoReplicasError(err), moved, ask,
		// go-redis has no type for BUSY (a script is running too long).
		redis.HasErrorPrefix(err, "BUSY "):
		return ErrUnavailable, true, true
	case redis.IsAuthError(err), redis.IsPermissionError(err):
		return ErrAccessDenied, false, true
	case redis.HasErrorPrefix(err, "WRONGTYPE "):
		return ErrCorruptRecord, false, true
	}
	return ErrRejected, false, true
}

// notSent reports failures that certainly happened before the command
// reached a server: a refused or failed dial, no connection free in the
// client's pool.
func notSent(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) {
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
// (including the context's deadline), resets, broken pipes, a connection
// closed before the answer.
func transportFailure(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
