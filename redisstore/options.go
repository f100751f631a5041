package redisstore

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemgo/idem/internal/fit"
)

// Defaults and limits of the store's options.
const (
	// DefaultPrefix is the start of every record's key name:
	// "idem:{<key>}".
	DefaultPrefix = "idem:"
	// DefaultCompressionThreshold is the result size, in bytes, above which
	// a result is stored gzip-compressed (when that makes it smaller); the
	// same as ddbstore's.
	DefaultCompressionThreshold = 4 << 10
	// DefaultMaxRecordSize is the size, as the store counts it (the key
	// name plus every field's name and value), that a stored record may
	// reach: 400,000 bytes, ddbstore's default item limit, so that both
	// stores keep and omit the same results.
	DefaultMaxRecordSize = 400_000
	// MinRecordSize is the smallest record size WithMaxRecordSize accepts.
	MinRecordSize = 4096
	// MaxRecordSize is the largest record size WithMaxRecordSize accepts:
	// 512 MiB, Redis's limit on one value (proto-max-bulk-len).
	MaxRecordSize = 512 << 20
	// DefaultExpiryMargin is added to a record's end (the later of its
	// retention's end and its lease's end) to give the server-side expiry:
	// an allowance for the difference between the callers' clocks and the
	// server's. Reads never depend on it (see the package documentation).
	DefaultExpiryMargin = time.Minute
	// NoCompression, given to WithCompressionThreshold, turns compression off.
	NoCompression = -1
	// MaxKeySize is the longest key, in bytes, the store accepts: the same
	// limit as ddbstore's (DynamoDB's partition key limit), so that a key
	// one store takes the other takes too.
	MaxKeySize = 2048
)

// Option configures a Store; see New.
type Option func(*options) error

type options struct {
	prefix        string
	compressAbove int
	maxRecord     int
	expiryMargin  time.Duration
	waitReplicas  int
	waitTimeout   time.Duration
}

func defaultOptions() options {
	return options{
		prefix:        DefaultPrefix,
		compressAbove: DefaultCompressionThreshold,
		maxRecord:     DefaultMaxRecordSize,
		expiryMargin:  DefaultExpiryMargin,
	}
}

// WithPrefix sets the start of every record's key name (default
// DefaultPrefix); a record of key k is stored at prefix + "{" + k + "}". The
// prefix may be empty; it must not contain "{" or "}", which would change
// the key's hash slot on Redis Cluster, and must be at most 256 bytes.
func WithPrefix(prefix string) Option {
	return func(o *options) error {
		if strings.ContainsAny(prefix, "{}") || len(prefix) > 256 {
			return fmt.Errorf("redisstore: prefix %q must have no braces and at most 256 bytes", prefix)
		}
		o.prefix = prefix
		return nil
	}
}

// WithCompressionThreshold stores results of more than n bytes
// gzip-compressed, when that makes them smaller (default
// DefaultCompressionThreshold). n must be at least 0, or NoCompression.
func WithCompressionThreshold(n int) Option {
	return func(o *options) error {
		if err := fit.CheckThreshold(n); err != nil {
			return fmt.Errorf("redisstore: %w", err)
		}
		o.compressAbove = n
		return nil
	}
}

// WithMaxRecordSize sets the largest record, as the store counts it, that
// the store writes (default DefaultMaxRecordSize; from MinRecordSize to
// MaxRecordSize). A completion whose record would be larger is stored
// without its result.
func WithMaxRecordSize(n int) Option {
	return func(o *options) error {
		if n < MinRecordSize || n > MaxRecordSize {
			return fmt.Errorf("redisstore: max record size %d must be from %d to %d", n, MinRecordSize, MaxRecordSize)
		}
		o.maxRecord = n
		return nil
	}
}

// WithExpiryMargin sets how long after its end the server deletes a record
// (default DefaultExpiryMargin; 0 or more). Reads and scripts treat a record
// as absent from its end on, whatever the margin; the margin only keeps a
// record whose lease is live from being deleted when the server's clock runs
// ahead of the callers'.
func WithExpiryMargin(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("redisstore: expiry margin %v must not be negative", d)
		}
		o.expiryMargin = d
		return nil
	}
}

// WithWait makes every write wait, with Redis's WAIT, until at least
// replicas replicas have acknowledged it, for at most timeout. A write that
// is applied on the primary but not acknowledged in time fails with an error
// wrapping ErrNotReplicated (transient; a retry recognises its own write and
// waits again). replicas must be at least 1 and timeout from 1 ms to less
// than the client's ReadTimeout (the write and the WAIT are pipelined on one
// connection, which is what WAIT needs). A refused write (a conflict) wrote
// nothing, but its WAIT still runs: while replicas lag, it too can take up
// to timeout. It needs a *redis.Client (also as a redis.UniversalClient or
// from a FailoverClient) or a *redis.ClusterClient.
func WithWait(replicas int, timeout time.Duration) Option {
	return func(o *options) error {
		if replicas < 1 || timeout < time.Millisecond {
			return errors.New("redisstore: WithWait needs at least 1 replica and a timeout of at least 1 ms")
		}
		o.waitReplicas, o.waitTimeout = replicas, timeout
		return nil
	}
}

func buildOptions(opts []Option) (options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return options{}, err
		}
	}
	return o, nil
}
