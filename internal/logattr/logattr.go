// Package logattr holds the log attributes every wrapper (the Lambda
// wrappers, the net/http middleware) records for a call, so that their log
// records share one shape and one vocabulary.
package logattr

import (
	"errors"
	"log/slog"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// Outcome appends to attrs the attributes of a call: the attempt, whether it
// was replayed or took a lease over (and whether it waited, when it did:
// idem.WithWait), the hashed key (never the key itself),
// when to retry an in-progress key, and the error.
func Outcome(attrs []slog.Attr, key string, out idem.Outcome, err error) []slog.Attr {
	attrs = append(attrs,
		slog.Int("attempt", out.Attempts),
		slog.Bool("replayed", out.Replayed),
		slog.Bool("lease_taken_over", out.TookOver),
	)
	if out.Waited {
		attrs = append(attrs, slog.Bool("waited", true))
	}
	if key != "" {
		attrs = append(attrs, slog.String("key_hash", idem.HashKey(key)))
	}
	var ipe *core.InProgressError
	if errors.As(err, &ipe) {
		attrs = append(attrs, slog.Time("retry_at", ipe.RetryAt))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	return attrs
}
