package core

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// Class is the retry class of an error.
type Class int

const (
	// Unknown: the classifier has no opinion; the next one in the chain is
	// asked, and if none knows, the error is Permanent.
	Unknown Class = iota
	// Transient: the operation may succeed if retried.
	Transient
	// Permanent: retrying will not help.
	Permanent
)

// String returns the class's lower-case name.
func (c Class) String() string {
	switch c {
	case Transient:
		return "transient"
	case Permanent:
		return "permanent"
	}
	return "unknown"
}

// Classifier gives an error's class, or Unknown to defer to the next one.
type Classifier func(error) Class

// MarkedError is an error explicitly marked transient or permanent by
// MarkTransient or MarkPermanent; Classify finds it with errors.As.
type MarkedError struct {
	// Err is the marked error.
	Err error
	// Class is Transient or Permanent.
	Class Class
	// After, if positive, is the least delay before a retry, as a server's
	// Retry-After asks.
	After time.Duration
	// Later, for a transient error, asks that it be recorded as retryable
	// but not retried in the same call: the retry is left to a later
	// delivery (see MarkRetryLater).
	Later bool
}

// Error returns the marked error's message.
func (e *MarkedError) Error() string {
	if e.Err == nil {
		return e.Class.String() + " error"
	}
	return e.Err.Error()
}

// Unwrap returns the marked error.
func (e *MarkedError) Unwrap() error { return e.Err }

// RetryAfter returns the least delay before a retry (zero if none).
func (e *MarkedError) RetryAfter() time.Duration { return e.After }

// MarkTransient marks err as transient: Classify returns Transient for it
// and for any error wrapping it. MarkTransient(nil) is nil.
func MarkTransient(err error) error {
	if err == nil {
		return nil
	}
	return &MarkedError{Err: err, Class: Transient}
}

// MarkTransientAfter marks err as transient with a least delay before the
// retry, such as an HTTP Retry-After header gives.
func MarkTransientAfter(err error, after time.Duration) error {
	if err == nil {
		return nil
	}
	return &MarkedError{Err: err, Class: Transient, After: after}
}

// MarkRetryLater marks err as transient, to be recorded as retryable and
// retried by a later delivery rather than in the same call: an HTTP handler's
// 5xx, 408 or 429 answer, say, which the client retries itself.
// MarkRetryLater(nil) is nil.
func MarkRetryLater(err error) error {
	if err == nil {
		return nil
	}
	return &MarkedError{Err: err, Class: Transient, Later: true}
}

// RetryLater reports whether err is marked with MarkRetryLater.
func RetryLater(err error) bool {
	var m *MarkedError
	return errors.As(err, &m) && m.Class == Transient && m.Later
}

// MarkPermanent marks err as permanent. MarkPermanent(nil) is nil.
func MarkPermanent(err error) error {
	if err == nil {
		return nil
	}
	return &MarkedError{Err: err, Class: Permanent}
}

// Classify returns err's class: an explicit mark found with errors.As wins;
// otherwise each classifier of the chain is asked in order and the first
// answer other than Unknown is taken; if none knows, the error is Permanent.
// Classify(nil) is Unknown.
func Classify(err error, chain ...Classifier) Class {
	if err == nil {
		return Unknown
	}
	var m *MarkedError
	if errors.As(err, &m) && (m.Class == Transient || m.Class == Permanent) {
		return m.Class
	}
	for _, c := range chain {
		if c == nil {
			continue
		}
		if cl := c(err); cl != Unknown {
			return cl
		}
	}
	return Permanent
}

// RetryAfter returns the least delay before a retry that err asks for: the
// RetryAfter() of the first error in its chain that has such a method, or 0.
func RetryAfter(err error) time.Duration {
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		if d := ra.RetryAfter(); d > 0 {
			return d
		}
	}
	return 0
}

// StatusCoder is implemented by errors that carry an HTTP status code.
type StatusCoder interface {
	// HTTPStatusCode returns the response's status code.
	HTTPStatusCode() int
}

// HTTPStatusClassifier classifies errors that carry an HTTP status code
// (StatusCoder, as the AWS SDK's response errors do): 408, 429, 500, 502,
// 503 and 504 are Transient; other 4xx codes are Permanent; anything else is
// Unknown.
func HTTPStatusClassifier(err error) Class {
	var sc StatusCoder
	if !errors.As(err, &sc) {
		return Unknown
	}
	switch code := sc.HTTPStatusCode(); {
	case code == 408 || code == 429 || code == 500 || code == 502 || code == 503 || code == 504:
		return Transient
	case code >= 400 && code < 500:
		return Permanent
	}
	return Unknown
}

// NetworkClassifier classifies network failures as Transient: timeouts
// (net.Error with Timeout, context.DeadlineExceeded), connection resets,
// refusals, aborts and broken pipes, a connection closed early (io.EOF,
// io.ErrUnexpectedEOF: the peer hung up before the whole response arrived),
// and temporary DNS failures (*net.DNSError with IsTemporary or IsTimeout).
// Anything else, including a name that does not exist, is Unknown.
func NetworkClassifier(err error) Class {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return Transient
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && (dns.IsTemporary || dns.IsTimeout) {
		return Transient
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return Transient
	}
	return Unknown
}

// DefaultClassifiers is the chain used when none is configured: explicit
// marks first (always), then HTTP status codes (HTTPStatusClassifier), then
// network failures (NetworkClassifier). It knows no service's error codes:
// an AWS throttle arrives as HTTP 400 and is Permanent here; package
// awsclassify puts the AWS SDK's own knowledge in front of this chain.
var DefaultClassifiers = []Classifier{HTTPStatusClassifier, NetworkClassifier}
