package httpidem

import (
	"log/slog"
	"net/http"

	"github.com/idemgo/idem"
)

// annotation names the request and the status answered in the record of
// its call.
func (m *middleware) annotation(r *http.Request, status int) func(idem.Outcome, error) idem.Annotation {
	return func(idem.Outcome, error) idem.Annotation { return idem.Annotation{Attrs: m.attrs(r, status)} }
}

// attrs name the request (its method and path, never the key, the header
// or the body) and the status answered (0: not known, not logged).
func (m *middleware) attrs(r *http.Request, status int) []slog.Attr {
	attrs := []slog.Attr{
		slog.String("wrapper", "net/http"),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
	}
	if status != 0 {
		attrs = append(attrs, slog.Int("status", status))
	}
	return attrs
}
