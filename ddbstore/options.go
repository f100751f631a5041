package ddbstore

import (
	"fmt"

	"github.com/idemgo/idem/blob"
	"github.com/idemgo/idem/internal/fit"
)

// Defaults of the store's options.
const (
	// DefaultKeyAttribute is the name of the table's partition key, a string.
	DefaultKeyAttribute = "pk"
	// DefaultTTLAttribute is the name of the TTL attribute: the end of a
	// record's retention in epoch seconds, which DynamoDB's Time to Live
	// uses to delete expired items.
	DefaultTTLAttribute = "expires_at"
	// DefaultCompressionThreshold is the result size, in bytes, above which
	// a result is stored gzip-compressed (when that makes it smaller).
	DefaultCompressionThreshold = 4 << 10
	// DefaultMaxItemSize is the size, as ItemSize counts it, that a stored
	// item may reach: DynamoDB's limit of 400 KB (409,600 bytes) less a
	// safety margin of 9,600 bytes.
	DefaultMaxItemSize = 400_000
	// MaxItemSize is DynamoDB's item size limit, the largest value
	// WithMaxItemSize accepts.
	MaxItemSize = 400 << 10
	// NoCompression, given to WithCompressionThreshold, turns compression off.
	NoCompression = -1
)

// Option configures a Store (New) or the table made for it (CreateTable).
type Option func(*options) error

type options struct {
	layout
	compressAbove int
	maxItem       int
	large         blob.Store // WithLargeResults; nil: results too large are omitted
}

func defaultOptions() options {
	return options{
		layout:        layout{keyAttr: DefaultKeyAttribute, ttlAttr: DefaultTTLAttribute},
		compressAbove: DefaultCompressionThreshold,
		maxItem:       DefaultMaxItemSize,
	}
}

// WithKeyAttribute sets the name of the table's partition key attribute, a
// string (default DefaultKeyAttribute). It must differ from the record's
// other attribute names (see WithAttributeNames).
func WithKeyAttribute(name string) Option {
	return func(o *options) error {
		if err := checkAttrName("key", name); err != nil {
			return err
		}
		o.keyAttr = name
		return nil
	}
}

// WithTTLAttribute sets the name of the TTL attribute, a number of epoch
// seconds (default DefaultTTLAttribute). It must differ from the record's
// other attribute names. A table has one TTL attribute: a table shared with
// other items (a single-table design) names the store's after it.
func WithTTLAttribute(name string) Option {
	return func(o *options) error {
		if err := checkAttrName("TTL", name); err != nil {
			return err
		}
		o.ttlAttr = name
		return nil
	}
}

// WithCompressionThreshold stores results of more than n bytes
// gzip-compressed, when that makes them smaller (default
// DefaultCompressionThreshold). n must be at least 0, or NoCompression.
func WithCompressionThreshold(n int) Option {
	return func(o *options) error {
		if err := fit.CheckThreshold(n); err != nil {
			return fmt.Errorf("ddbstore: %w", err)
		}
		o.compressAbove = n
		return nil
	}
}

// WithMaxItemSize sets the largest item, as ItemSize counts it, the store
// writes (default DefaultMaxItemSize; from 4096 to MaxItemSize). A
// completion whose item would be larger is stored without its result.
func WithMaxItemSize(n int) Option {
	return func(o *options) error {
		if n < 4096 || n > MaxItemSize {
			return fmt.Errorf("ddbstore: max item size %d must be from 4096 to %d", n, MaxItemSize)
		}
		o.maxItem = n
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
	if err := o.checkLayout(); err != nil {
		return options{}, err
	}
	return o, nil
}
