package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"
)

type statusErr int

func (e statusErr) Error() string       { return fmt.Sprintf("status %d", int(e)) }
func (e statusErr) HTTPStatusCode() int { return int(e) }

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var _ net.Error = timeoutErr{}

func TestClassify(t *testing.T) {
	plain := errors.New("boom")
	tests := []struct {
		name  string
		err   error
		chain []Classifier
		want  Class
	}{
		{"nil", nil, nil, Unknown},
		{"an ordinary error is unclassified", plain, DefaultClassifiers, Unclassified},
		{"marked transient", MarkTransient(plain), nil, Transient},
		{"marked transient, wrapped", fmt.Errorf("ctx: %w", MarkTransient(plain)), nil, Transient},
		{"marked permanent beats classifier", MarkPermanent(statusErr(503)), DefaultClassifiers, Permanent},
		{"429", statusErr(429), DefaultClassifiers, Transient},
		{"503 wrapped", fmt.Errorf("call: %w", statusErr(503)), DefaultClassifiers, Transient},
		{"404", statusErr(404), DefaultClassifiers, Permanent},
		{"403", statusErr(403), DefaultClassifiers, Permanent},
		{"301 unclassified", statusErr(301), DefaultClassifiers, Unclassified},
		{"connection reset", &net.OpError{Op: "read", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}, DefaultClassifiers, Transient},
		{"refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), DefaultClassifiers, Transient},
		{"net timeout", timeoutErr{}, DefaultClassifiers, Transient},
		{"deadline exceeded", context.DeadlineExceeded, DefaultClassifiers, Transient},
		{"canceled is unclassified (the runner rules on cancellation first)", context.Canceled, DefaultClassifiers, Unclassified},
		{"EOF", io.EOF, DefaultClassifiers, Transient},
		{"EOF in a url error", &url.Error{Op: "Post", URL: "http://127.0.0.1:1/", Err: io.EOF}, DefaultClassifiers, Transient},
		{"unexpected EOF wrapped", fmt.Errorf("read body: %w", io.ErrUnexpectedEOF), DefaultClassifiers, Transient},
		{"DNS temporary", &net.DNSError{Err: "server misbehaving", Name: "dynamodb.us-east-1.amazonaws.com", IsTemporary: true}, DefaultClassifiers, Transient},
		{"DNS timeout", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "i/o timeout", Name: "sqs.us-east-1.amazonaws.com", IsTimeout: true}}, DefaultClassifiers, Transient},
		{"DNS not found is unclassified", &net.DNSError{Err: "no such host", Name: "nope.invalid", IsNotFound: true}, DefaultClassifiers, Unclassified},
		{"DNS neither temporary nor timeout is unclassified", &net.DNSError{Err: "bad name", Name: "x"}, DefaultClassifiers, Unclassified},
		// A reply whose body was cut short carries its status and the read
		// error: transient whatever the status, since its error was never
		// read whole.
		{"400 cut short", fmt.Errorf("status 400: failed to copy error response body: %w", errors.Join(statusErr(400), io.ErrUnexpectedEOF)), DefaultClassifiers, Transient},
		{"403 reset mid-body", errors.Join(statusErr(403), &net.OpError{Op: "read", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}), DefaultClassifiers, Transient},
		{"network alone: EOF", io.EOF, []Classifier{NetworkClassifier}, Transient},
		{"status alone: EOF unclassified", io.EOF, []Classifier{HTTPStatusClassifier}, Unclassified},
		{"no chain: unclassified", plain, nil, Unclassified},
		{"a classifier that answers unclassified ends the chain", statusErr(503), []Classifier{func(error) Class { return Unclassified }, HTTPStatusClassifier}, Unclassified},
		{"custom chain first answer wins", plain, []Classifier{nil, func(error) Class { return Unknown }, func(error) Class { return Transient }}, Transient},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Classify(tc.err, tc.chain...); got != tc.want {
				t.Fatalf("Classify(%v) = %v want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestMarks(t *testing.T) {
	if MarkTransient(nil) != nil || MarkPermanent(nil) != nil || MarkTransientAfter(nil, time.Second) != nil {
		t.Fatal("marking nil must give nil")
	}
	base := errors.New("slow down")
	m := MarkTransientAfter(base, 3*time.Second)
	if !errors.Is(m, base) || m.Error() != "slow down" {
		t.Fatalf("mark hides the error: %v", m)
	}
	if got := RetryAfter(fmt.Errorf("x: %w", m)); got != 3*time.Second {
		t.Fatalf("RetryAfter = %v", got)
	}
	if got := RetryAfter(base); got != 0 {
		t.Fatalf("RetryAfter of unmarked = %v", got)
	}
	if got := (&MarkedError{Class: Transient}).Error(); got != "transient error" {
		t.Fatalf("Error() = %q", got)
	}
	for c, want := range map[Class]string{Transient: "transient", Permanent: "permanent", Unknown: "unknown", Unclassified: "unclassified"} {
		if c.String() != want {
			t.Errorf("%d.String() = %q", int(c), c.String())
		}
	}
}
