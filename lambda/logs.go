package idemlambda

import (
	"context"
	"log/slog"
	"sync"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// LogHandler wraps h so that every record logged with an invocation's
// context carries what Lambda users look for: the request id
// (aws_request_id), the function name and version (from the runtime's
// environment), and cold_start, true for the records of the sandbox's first
// invocation. Give the logger to the runner (idem.WithLogger): the
// wrappers log through it, and their records carry the key's hash and the
// verdict, never the raw key or payload. To keep the default's format and
// level (Lambda's logging controls), wrap idem.DefaultLogger's handler:
//
//	logger := slog.New(idemlambda.LogHandler(idem.DefaultLogger().Handler()))
func LogHandler(h slog.Handler) slog.Handler {
	return &lambdaHandler{Handler: h, first: &firstInvocation{}}
}

type lambdaHandler struct {
	slog.Handler
	first *firstInvocation
}

// firstInvocation remembers the request id of the sandbox's first
// invocation. Safe for concurrent use.
type firstInvocation struct {
	mu sync.Mutex // guards id
	id string
}

func (f *firstInvocation) is(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.id == "" {
		f.id = id
	}
	return f.id == id
}

// Handle adds the invocation's attributes to r.
func (h *lambdaHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		r = r.Clone()
		r.AddAttrs(slog.String("aws_request_id", lc.AwsRequestID), slog.Bool("cold_start", h.first.is(lc.AwsRequestID)))
	}
	if lambdacontext.FunctionName != "" {
		r.AddAttrs(slog.String("function_name", lambdacontext.FunctionName), slog.String("function_version", lambdacontext.FunctionVersion))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the wrapping.
func (h *lambdaHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &lambdaHandler{Handler: h.Handler.WithAttrs(attrs), first: h.first}
}

// WithGroup keeps the wrapping.
func (h *lambdaHandler) WithGroup(name string) slog.Handler {
	return &lambdaHandler{Handler: h.Handler.WithGroup(name), first: h.first}
}
