package idemlambda

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/httprule"
	"github.com/idemgo/idem/webhook"
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

// Option configures every wrapper: WithClock and WithFingerprintSelection.
// It is also a BatchOption and an HTTPOption, so it can be given to any
// constructor. The wrappers log through their runner's logger
// (idem.WithLogger).
type Option func(*config) error

// BatchOption configures the batch wrappers (SQS, SNS, Kinesis,
// DynamoDBStream): an Option, or one of WithConcurrency, WithSafetyMargin,
// WithAcknowledged, WithEnvelope (SQS and SNS only) and
// WithMessageGroupTenant (SQS only). Giving a batch option to another
// wrapper does not compile.
type BatchOption interface {
	applyBatch(*config) error
}

// HTTPOption configures the HTTP wrappers (RESTAPI, HTTPAPI, FunctionURL,
// ALB): an Option, or one of WithOptionalKey, WithIdentityHeader,
// WithKeyHeader, WithKeyBodyField, WithEndpoint, WithWebhook,
// WithResponseHook and WithWait. Giving it to another wrapper does not
// compile.
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
	now          func() time.Time
	concurrency  int
	safetyMargin time.Duration
	ack          acknowledged // batch wrappers: WithAcknowledged
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
	groupTenant  bool            // WithMessageGroupTenant
	endpoint     string          // WithEndpoint
	sender       *webhook.Sender // WithWebhook
}

func defaultConfig() config {
	return config{now: time.Now, concurrency: DefaultConcurrency, safetyMargin: DefaultSafetyMargin, ack: acknowledged{}}
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

// WithAcknowledged makes a batch wrapper acknowledge the records whose
// verdict is one of verdicts instead of reporting them: SQS deletes such a
// message, and a stream goes past such a record. Each is still logged (with
// reported false) and observed. By default every record that did not
// succeed is reported, so that SQS redelivers it until the queue's redrive
// policy moves it to the dead-letter queue, and a stream retries from it
// until the event source mapping's retry limit sends its position to the
// on-failure destination. What acknowledging costs: the record never
// reaches the dead-letter queue or the failure destination; its log record
// is all that is left of it.
//
// Only the verdicts of a record that no redelivery can make succeed may be
// acknowledged: idem.FailedPermanently, idem.ReplayedFailure,
// idem.RetriesExhausted, idem.KeyReused, idem.MissingKey, idem.InvalidKey
// and idem.InvalidPayload; any other is an error. A success
// (idem.Executed, idem.Replayed, and idem.OutcomeNotRecorded, whose handler
// succeeded) is always acknowledged. Batch wrappers only.
func WithAcknowledged(verdicts ...idem.Verdict) BatchOption {
	return batchOption(func(c *config) error {
		if len(verdicts) == 0 {
			return errors.New("idemlambda: WithAcknowledged needs at least one verdict")
		}
		for _, v := range verdicts {
			if !slices.Contains(acknowledgeable, v) {
				return fmt.Errorf("idemlambda: verdict %s cannot be acknowledged: a redelivery may still make it succeed (acknowledgeable: %v)", v, acknowledgeable)
			}
			c.ack[v] = true
		}
		return nil
	})
}

// WithPermanentFailuresToDLQ does nothing: reporting permanent failures, so
// that the queue's redrive policy moves them to the dead-letter queue (or a
// stream's retry limit to its failure destination), is what every batch
// wrapper does by default.
//
// Deprecated: reporting is the default; to acknowledge instead, use
// WithAcknowledged.
func WithPermanentFailuresToDLQ() BatchOption {
	return batchOption(func(*config) error { return nil })
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
