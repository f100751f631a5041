package idem

import (
	"fmt"

	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/idemgo/idem/core"
)

// Observer receives one Observation per call of Runner.Do, after the call
// has been decided and logged: the hook that metrics are fed from (see the
// emf package for CloudWatch Embedded Metric Format). Observe is called on
// the caller's goroutine and must be safe for concurrent use; it should not
// block.
type Observer interface {
	// Observe records one call.
	Observe(ctx context.Context, o Observation)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, o Observation)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, o Observation) { f(ctx, o) }

// Observation is what one call of Runner.Do did, for metrics. It carries the
// key's hash, never the key.
type Observation struct {
	// Verdict is the call's verdict (Outcome.Verdict).
	Verdict Verdict
	// KeyHash is HashKey of the call's key.
	KeyHash string
	// Attempts is the key's executions in all (Outcome.Attempts).
	Attempts int
	// TookOver reports a takeover of an expired lease.
	TookOver bool
	// Cached reports a replay answered from the local cache.
	Cached bool
	// Waited reports that the call waited for a concurrent execution of
	// its key (Outcome.Waited).
	Waited bool
	// LeaseLost reports that a completion was refused because another
	// holder had taken the key over, or, with WithLeaseRenewal, that the
	// lease could not be held while the handler ran (errors.Is(err,
	// ErrLeaseLost)).
	LeaseLost bool
	// Duration is the call's time, by the runner's clock.
	Duration time.Duration
	// StoreCalls and StoreTime are the call's store calls (the writes,
	// Acquire or Reserve, Complete, the steps' RecordStep and, with
	// WithLeaseRenewal, RenewLease, and the reads of a wait, Get) and the
	// time spent in them.
	StoreCalls int
	StoreTime  time.Duration
	// Err is the call's error (nil on success and on replays).
	Err error
}

// WithObserver sets the observer of calls (default: none).
func WithObserver(o Observer) Option {
	return func(c *config) error {
		if o == nil {
			return errors.New("idem: nil observer")
		}
		c.observer = o
		return nil
	}
}

func (c *call) observation(out Outcome, err error) Observation {
	return Observation{
		Verdict: out.Verdict, KeyHash: HashKey(c.key), Attempts: out.Attempts,
		TookOver: out.TookOver, Cached: out.Cached, Waited: out.Waited, LeaseLost: errors.Is(err, ErrLeaseLost),
		Duration: c.r.cfg.now().Sub(c.start), StoreCalls: c.storeCalls, StoreTime: c.storeTime, Err: err,
	}
}

// EnvDisabled is the environment variable that, set to a true value
// ("1", "true"), makes every Runner created afterwards run handlers
// unprotected: no key, no store, no replay. It is a switch for local
// debugging only; the runner logs a loud warning once.
const EnvDisabled = "IDEM_DISABLED"

func disabledByEnv() bool {
	v, err := strconv.ParseBool(os.Getenv(EnvDisabled))
	return err == nil && v
}

var warnDisabled sync.Once

// unprotected runs fn without idempotency (EnvDisabled).
func (r *Runner) unprotected(ctx context.Context, fn Handler) (Outcome, error) {
	warnDisabled.Do(func() {
		l := r.cfg.logger
		if l == nil {
			l = slog.Default()
		}
		l.LogAttrs(ctx, slog.LevelWarn, "idem: DISABLED by "+EnvDisabled+": handlers run unprotected, duplicates execute again; never set it in production")
	})
	if fn == nil {
		return Outcome{}, errors.New("idem: nil handler")
	}
	result, err := fn(ctx)
	switch {
	case err == nil:
	case r.classify(ctx, err) == core.Transient:
		return Outcome{Attempts: 1}, fmt.Errorf("%w after 1 attempt (unprotected): %w", ErrTransientFailure, err)
	default:
		return Outcome{Attempts: 1}, &core.FailureError{Message: err.Error(), Attempts: 1, Err: err}
	}
	return Outcome{Verdict: Executed, Result: result, Attempts: 1}, nil
}
