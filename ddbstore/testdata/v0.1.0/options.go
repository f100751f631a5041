package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemgo/idem/core"
)

// Defaults of the runner's options.
const (
	// DefaultRetention is how long a record is kept after its last write.
	DefaultRetention = 24 * time.Hour
	// DefaultLeaseMargin is added to the invocation's deadline to give the
	// lease end: a holder is presumed dead only after its deadline passed.
	DefaultLeaseMargin = 5 * time.Second
	// DefaultLease is the lease used when the context has no deadline.
	DefaultLease = 15 * time.Minute
	// DefaultMaxAttempts bounds the executions of one key across all
	// deliveries.
	DefaultMaxAttempts = 5
	// DefaultAttemptsPerCall bounds the in-process executions of one call.
	DefaultAttemptsPerCall = 3
	// DefaultBackoffBase is the first retry's full backoff.
	DefaultBackoffBase = 100 * time.Millisecond
	// DefaultBackoffMax caps a retry's backoff.
	DefaultBackoffMax = 2 * time.Second
	// DefaultRetryReserve is the least time an in-process retry needs left
	// before the invocation's deadline (or, without one, before its lease
	// ends less the lease margin) to start; a retry also needs the longest
	// try of the call so far, if that is longer.
	DefaultRetryReserve = time.Second
	// DefaultCompleteAttempts bounds the writes of one outcome when the
	// store fails transiently.
	DefaultCompleteAttempts = 4
)

// Option configures a Runner; see New.
type Option func(*config) error

type config struct {
	retention       time.Duration
	leaseMargin     time.Duration
	defaultLease    time.Duration
	maxAttempts     int
	attemptsPerCall int
	base, max       time.Duration
	completeTries   int
	retryReserve    time.Duration
	backoff         core.BackoffFunc
	observer        Observer
	disabled        bool
	classifiers     []core.Classifier
	now             func() time.Time
	sleep           func(ctx context.Context, d time.Duration) error
	rand            func() float64
	token           func() string
	logger          *slog.Logger
	cacheSize       int
	wait            time.Duration
	renewEvery      time.Duration // WithLeaseRenewal; 0: off
}

// WithRetention sets how long records are kept (positive).
func WithRetention(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("idem: retention %v must be positive", d)
		}
		c.retention = d
		return nil
	}
}

// WithLease sets the margin added to the context's deadline to make the lease
// end, and the lease used when the context has no deadline (both positive,
// margin may be zero). With WithLeaseRenewal, every lease lasts
// 2·interval + margin instead (never past the deadline plus the margin).
func WithLease(margin, withoutDeadline time.Duration) Option {
	return func(c *config) error {
		if margin < 0 || withoutDeadline <= 0 {
			return fmt.Errorf("idem: lease margin %v must not be negative and lease %v must be positive", margin, withoutDeadline)
		}
		c.leaseMargin, c.defaultLease = margin, withoutDeadline
		return nil
	}
}

// WithMaxAttempts bounds the executions of one key across deliveries (at
// least 1). Once transient failures have used them up, the key is rejected
// with core.ErrRetriesExhausted.
func WithMaxAttempts(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("idem: max attempts %d must be at least 1", n)
		}
		c.maxAttempts = n
		return nil
	}
}

// WithRetry sets in-process retries of transient handler errors: at most
// attemptsPerCall executions per call (1 disables retries), with full-jitter
// backoff from base, capped at max, and never past the context's deadline.
func WithRetry(attemptsPerCall int, base, max time.Duration) Option {
	return func(c *config) error {
		if attemptsPerCall < 1 || base < 0 || max < base {
			return fmt.Errorf("idem: retry needs attempts >= 1 and 0 <= base <= max, got %d, %v, %v", attemptsPerCall, base, max)
		}
		c.attemptsPerCall, c.base, c.max = attemptsPerCall, base, max
		return nil
	}
}

// WithClassifiers replaces the chain that classifies handler errors not
// explicitly marked with core.MarkTransient or core.MarkPermanent (default
// core.DefaultClassifiers). Errors no classifier knows are permanent. A store
// that is an ErrorClassifier (ddbstore) is asked before this chain, so what
// its platform says is retryable stays transient; over another store, add
// such a classifier here (awsclassify.Classifiers for AWS errors).
func WithClassifiers(chain ...core.Classifier) Option {
	return func(c *config) error {
		c.classifiers = append([]core.Classifier(nil), chain...)
		return nil
	}
}

// WithBackoff replaces the full-jitter backoff of in-process retries and
// completion retries with policy (see core.BackoffFunc); WithRetry's base and
// max then apply only to the default policy. A server's Retry-After still
// raises the delay, and no retry starts past the deadline.
func WithBackoff(policy core.BackoffFunc) Option {
	return func(c *config) error {
		if policy == nil {
			return errors.New("idem: nil backoff policy")
		}
		c.backoff = policy
		return nil
	}
}

// WithCompletionAttempts bounds the writes of one outcome when the store
// fails transiently (at least 1; default DefaultCompleteAttempts). Each
// retry waits the backoff and none starts past the deadline.
func WithCompletionAttempts(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("idem: completion attempts %d must be at least 1", n)
		}
		c.completeTries = n
		return nil
	}
}

// WithRetryReserve sets the least time an in-process retry needs left to
// start (default DefaultRetryReserve; not negative): after its backoff, a
// retry starts only if at least this much, or the longest try of the call so
// far if that is longer, is left before the invocation's deadline or, without
// one, before the lease ends less the lease margin. Otherwise the failure is
// recorded as retryable and left to a later delivery.
func WithRetryReserve(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("idem: retry reserve %v must not be negative", d)
		}
		c.retryReserve = d
		return nil
	}
}

// WithClock sets the clock (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("idem: nil clock")
		}
		c.now = now
		return nil
	}
}

// WithSleep sets how the runner waits between retries (default: a timer that
// gives up with ctx's error when ctx is done). A fake clock's sleep advances
// the clock instead.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *config) error {
		if sleep == nil {
			return errors.New("idem: nil sleep")
		}
		c.sleep = sleep
		return nil
	}
}

// WithRand sets the source of backoff jitter draws in [0, 1) (default
// math/rand/v2's Float64).
func WithRand(r func() float64) Option {
	return func(c *config) error {
		if r == nil {
			return errors.New("idem: nil random source")
		}
		c.rand = r
		return nil
	}
}

// WithTokens sets the source of lease tokens (default: 128 random bits from
// crypto/rand, hex). Tokens must be unique per reservation.
func WithTokens(next func() string) Option {
	return func(c *config) error {
		if next == nil {
			return errors.New("idem: nil token source")
		}
		c.token = next
		return nil
	}
}

// WithLogger sets the logger of decisions (default: none). Keys are logged
// hashed.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		c.logger = l
		return nil
	}
}
