package httpidem

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/logattr"
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
	}
	attrs = logattr.Outcome(attrs, key, out, err)
	l.LogAttrs(ctx, level, "httpidem", attrs...)
}
