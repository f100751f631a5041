package httpidem

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// log records one decision: the request, the verdict and status, and the
// outcome, with the key hashed (never the key, the header or the body).
func (m *middleware) log(ctx context.Context, level slog.Level, r *http.Request, key, decision string, status int, out idem.Outcome, err error) {
	l := m.cfg.logger
	if l == nil || !l.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("wrapper", "net/http"),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("verdict", decision),
		slog.Int("status", status),
		slog.Int("attempt", out.Attempts),
		slog.Bool("replayed", out.Replayed),
		slog.Bool("lease_taken_over", out.TookOver),
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
	l.LogAttrs(ctx, level, "httpidem", attrs...)
}
