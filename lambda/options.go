package idemlambda

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemgo/idem"
)

// Defaults of the wrappers' options.
const (
	// DefaultConcurrency is how many messages of a standard queue's batch
	// (or how many message groups of a FIFO queue's batch) run at once.
	DefaultConcurrency = 10
	// DefaultSafetyMargin is the least time before the invocation's
	// deadline that the SQS wrapper needs to start another message; below
	// it, the remaining messages are reported for redelivery unstarted.
	DefaultSafetyMargin = 2 * time.Second
)

// Option configures a wrapper. Options that do not apply to the wrapper
// they are given to (WithConcurrency given to HTTPAPI, say) make the
// constructor return an error.
type Option func(*config) error

type kind int

const (
	kindSQS kind = iota + 1
	kindHTTP
	kindTyped
)

// String names the wrapper kind, for option errors.
func (k kind) String() string {
	switch k {
	case kindSQS:
		return "SQS"
	case kindHTTP:
		return "the HTTP wrappers"
	case kindTyped:
		return "Typed"
	}
	return "unknown"
}

type config struct {
	kind         kind
	logger       *slog.Logger
	now          func() time.Time
	concurrency  int
	safetyMargin time.Duration
	toDLQ        bool
	optionalKey  bool
}

func newConfig(k kind, opts []Option) (config, error) {
	c := config{
		kind:         k,
		now:          time.Now,
		concurrency:  DefaultConcurrency,
		safetyMargin: DefaultSafetyMargin,
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&c); err != nil {
			return config{}, err
		}
	}
	return c, nil
}

func (c *config) only(option string, kinds ...kind) error {
	for _, k := range kinds {
		if c.kind == k {
			return nil
		}
	}
	return fmt.Errorf("idemlambda: option %s does not apply to %s", option, c.kind)
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
// time left before the deadline (SQS) and the Retry-After of a 409 (HTTP).
// Default time.Now; give the runner the same clock. Applies to every
// wrapper.
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
// how many message groups of a FIFO queue's batch, are processed at once
// (at least 1; default DefaultConcurrency). SQS only.
func WithConcurrency(n int) Option {
	return func(c *config) error {
		if err := c.only("WithConcurrency", kindSQS); err != nil {
			return err
		}
		if n < 1 {
			return fmt.Errorf("idemlambda: concurrency %d must be at least 1", n)
		}
		c.concurrency = n
		return nil
	}
}

// WithSafetyMargin sets the least time left before the invocation's
// deadline for the SQS wrapper to start another message (not negative;
// default DefaultSafetyMargin). Messages not started for lack of time are
// reported for redelivery. Set it to about the longest time one message
// takes. SQS only.
func WithSafetyMargin(d time.Duration) Option {
	return func(c *config) error {
		if err := c.only("WithSafetyMargin", kindSQS); err != nil {
			return err
		}
		if d < 0 {
			return fmt.Errorf("idemlambda: safety margin %v must not be negative", d)
		}
		c.safetyMargin = d
		return nil
	}
}

// WithPermanentFailuresToDLQ reports permanent failures (a handler's
// permanent error, new or replayed, a key reused with another body, retries
// exhausted, a message whose key cannot be derived) as batch item failures,
// so that SQS redelivers them until the queue's redrive policy moves them to
// its dead-letter queue. Without it they are acknowledged (deleted) and only
// logged. Use it only on a queue that has a redrive policy, or the message
// is redelivered until its retention ends. SQS only.
func WithPermanentFailuresToDLQ() Option {
	return func(c *config) error {
		if err := c.only("WithPermanentFailuresToDLQ", kindSQS); err != nil {
			return err
		}
		c.toDLQ = true
		return nil
	}
}

// WithOptionalKey lets requests without an Idempotency-Key header through to
// the handler unkeyed (not idempotent) instead of answering 400. An invalid
// header is still refused. RESTAPI, HTTPAPI and FunctionURL only.
func WithOptionalKey() Option {
	return func(c *config) error {
		if err := c.only("WithOptionalKey", kindHTTP); err != nil {
			return err
		}
		c.optionalKey = true
		return nil
	}
}

// outcomeAttrs appends the log attributes every wrapper records for a call:
// the attempt, whether it was replayed or took a lease over, the hashed key
// (never the key itself), when to retry an in-progress key, and the error.
func outcomeAttrs(attrs []slog.Attr, key string, out idem.Outcome, err error) []slog.Attr {
	attrs = append(attrs,
		slog.Int("attempt", out.Attempts),
		slog.Bool("replayed", out.Replayed),
		slog.Bool("lease_taken_over", out.TookOver),
	)
	if key != "" {
		attrs = append(attrs, slog.String("key_hash", idem.HashKey(key)))
	}
	var ipe *idem.InProgressError
	if errors.As(err, &ipe) {
		attrs = append(attrs, slog.Time("retry_at", ipe.RetryAt))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	return attrs
}
