package idemlambda

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/httprule"
	"github.com/idemgo/idem/internal/logattr"
)

// Defaults of the wrappers' options.
const (
	// DefaultConcurrency is how many messages of a standard queue's batch
	// (or how many message groups of a FIFO queue's batch, or shards of a
	// stream's batch) run at once.
	DefaultConcurrency = 10
	// DefaultSafetyMargin is the least time before the invocation's
	// deadline that a batch wrapper needs to start another message or
	// record; below it, the remaining ones are reported for redelivery
	// unstarted.
	DefaultSafetyMargin = 2 * time.Second
)

// Option configures every wrapper: WithLogger, WithClock and
// WithFingerprintSelection. It is also a BatchOption and an HTTPOption, so
// it can be given to any constructor.
type Option func(*config) error

// BatchOption configures the batch wrappers (SQS, SNS, Kinesis,
// DynamoDBStream): an Option, or one of WithConcurrency, WithSafetyMargin,
// WithPermanentFailuresToDLQ and WithEnvelope (SQS and SNS only). Giving a
// batch option to another wrapper does not compile.
type BatchOption interface {
	applyBatch(*config) error
}

// HTTPOption configures the HTTP wrappers (RESTAPI, HTTPAPI, FunctionURL,
// ALB): an Option, or one of WithOptionalKey, WithIdentityHeader,
// WithKeyHeader, WithKeyBodyField, WithResponseHook and WithWait. Giving it
// to another wrapper does not compile.
type HTTPOption interface {
	applyHTTP(*config) error
}

func (o Option) applyBatch(c *config) error { return o(c) }
func (o Option) applyHTTP(c *config) error  { return o(c) }

type batchOption func(*config) error

func (o batchOption) applyBatch(c *config) error { return o(c) }

type httpOption func(*config) error

func (o httpOption) applyHTTP(c *config) error { return o(c) }

type config struct {
	logger       *slog.Logger
	now          func() time.Time
	concurrency  int
	safetyMargin time.Duration
	toDLQ        bool
	optionalKey  bool
	// HTTP wrappers: WithIdentityHeader, WithResponseHook, WithWait.
	identityHeader string
	hook           *responseHook
	wait           time.Duration
	waitSet        bool
	// WithFingerprintSelection, WithEnvelope, and for the HTTP wrappers
	// WithKeyHeader and WithKeyBodyField.
	selection    core.Selection
	selectionSet bool
	envelopes    []Envelope
	keyParts     []httprule.KeyPart
}

func defaultConfig() config {
	return config{now: time.Now, concurrency: DefaultConcurrency, safetyMargin: DefaultSafetyMargin}
}

// configure applies opts, each through apply, skipping nil ones.
func configure[O any](opts []O, apply func(O, *config) error) (config, error) {
	c := defaultConfig()
	for _, o := range opts {
		if any(o) == nil {
			continue
		}
		if err := apply(o, &c); err != nil {
			return config{}, err
		}
	}
	return c, nil
}

// WithLogger sets the logger of the wrapper's decisions, one record per
// message or request, with the key hashed (default: none). Give the runner
// the same logger (idem.WithLogger) to see its own decisions too. Applies to
// every wrapper.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		c.logger = l
		return nil
	}
}

// WithClock sets the clock the wrapper reads for its own decisions: the
// time left before the deadline (batch wrappers) and the Retry-After of a
// 409 (HTTP). Default time.Now; give the runner the same clock. Applies to
// every wrapper.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("idemlambda: nil clock")
		}
		c.now = now
		return nil
	}
}

// WithConcurrency bounds how many messages of a standard queue's batch, or
// how many message groups of a FIFO queue's batch or shards of a stream's
// batch, are processed at once (at least 1; default DefaultConcurrency).
// Batch wrappers only.
func WithConcurrency(n int) BatchOption {
	return batchOption(func(c *config) error {
		if n < 1 {
			return fmt.Errorf("idemlambda: concurrency %d must be at least 1", n)
		}
		c.concurrency = n
		return nil
	})
}

// WithSafetyMargin sets the least time left before the invocation's
// deadline for a batch wrapper to start another message or record (not
// negative; default DefaultSafetyMargin). Messages not started for lack of
// time are reported for redelivery; in a stream, the first record not
// started is its shard's checkpoint. Set it to about the longest time one
// message takes. Batch wrappers only.
func WithSafetyMargin(d time.Duration) BatchOption {
	return batchOption(func(c *config) error {
		if d < 0 {
			return fmt.Errorf("idemlambda: safety margin %v must not be negative", d)
		}
		c.safetyMargin = d
		return nil
	})
}

// WithPermanentFailuresToDLQ reports permanent failures (a handler's
// permanent error, new or replayed, a key reused with another body, retries
// exhausted, a message whose key cannot be derived) as batch item failures,
// so that SQS redelivers them until the queue's redrive policy moves them to
// its dead-letter queue. Without it they are acknowledged (deleted) and only
// logged. Use it only on a queue that has a redrive policy, or the message
// is redelivered until its retention ends. In a stream (Kinesis,
// DynamoDBStream), a reported permanent failure is its shard's checkpoint:
// the shard waits on it (each retry replays the stored failure) until the
// event source mapping's MaximumRetryAttempts or MaximumRecordAgeInSeconds
// gives up and its on-failure destination receives the batch's position;
// set both, or the shard waits until the record expires. Batch wrappers
// only.
func WithPermanentFailuresToDLQ() BatchOption {
	return batchOption(func(c *config) error {
		c.toDLQ = true
		return nil
	})
}

// WithOptionalKey lets requests without an Idempotency-Key header (or
// without a source of WithKeyHeader or WithKeyBodyField) through to the
// handler unkeyed (not idempotent) instead of answering 400. An invalid key
// is still refused. HTTP wrappers only.
func WithOptionalKey() HTTPOption {
	return httpOption(func(c *config) error {
		c.optionalKey = true
		return nil
	})
}

// outcomeAttrs appends the log attributes every wrapper records for a call
// (see logattr.Outcome).
func outcomeAttrs(attrs []slog.Attr, key string, out idem.Outcome, err error) []slog.Attr {
	return logattr.Outcome(attrs, key, out, err)
}
