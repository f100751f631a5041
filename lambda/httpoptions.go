package idemlambda

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemgo/idem"
)

// responseHook is WithResponseHook's hook, with the name of the response
// type it takes for the error of a wrapper that answers another.
type responseHook struct {
	fn  any // func(context.Context, *R, idem.Verdict)
	typ string
}

// WithIdentityHeader adds the value of the request header name (looked up
// case-insensitively; several values are joined with commas) to the caller
// identity that scopes the stored keys, labelled "header:<name>", beside
// the identity the event carries. A request without the header keeps the
// event's identity alone. Use it only for a header that something trusted
// sets and clients cannot forge: behind an ALB listener rule that
// authenticates users, "x-amzn-oidc-identity" (the user's subject); behind
// API Gateway, a header set by the integration. A header the client sends
// itself only partitions its own key space. HTTP wrappers only.
func WithIdentityHeader(name string) HTTPOption {
	return httpOption(func(c *config) error {
		if name == "" || strings.ContainsAny(name, " \t\r\n:=,") {
			return fmt.Errorf("idemlambda: identity header %q is not a header name", name)
		}
		c.identityHeader = name
		return nil
	})
}

// WithResponseHook calls hook on every answer the wrapper gives in the
// handler's place, before it is returned: a replay (verdict idem.Replayed),
// the wrapper's own problems (in progress, key reused, a missing or invalid
// key, a handler error answered as a 500, a replay that cannot be answered,
// ...), each with its verdict, the one the call is logged with. The
// handler's own response on a fresh run is not given to the hook: the
// handler shapes that itself. The hook may change the response (add
// headers, log it); its changes are not stored. A replay keeps
// Idempotent-Replayed: true whatever the hook does. The hook's response
// type must be the wrapper's (events.APIGatewayV2HTTPResponse for HTTPAPI,
// and so on); another is an error of the constructor. HTTP wrappers only.
func WithResponseHook[R HTTPResponse](hook func(ctx context.Context, resp *R, verdict idem.Verdict)) HTTPOption {
	return httpOption(func(c *config) error {
		if hook == nil {
			return errors.New("idemlambda: nil response hook")
		}
		var zero R
		c.hook = &responseHook{fn: hook, typ: fmt.Sprintf("%T", zero)}
		return nil
	})
}

// WithWait makes a request that arrives while another request with its key
// is still being handled wait up to bound for that one's response, and get
// it, marked Idempotent-Replayed: true, instead of a 409 in-progress (see
// idem.WithWait: within the sandbox the duplicate waits in memory, across
// sandboxes it polls the store, one strongly consistent read each). The
// wait ends DefaultSafetyMargin before the invocation's deadline at the
// latest, and the runner's retry reserve before it (idem.WithRetryReserve);
// a request still in progress then gets the 409. A request whose first
// execution crashed takes the key over when its lease ends and runs the
// handler. 0 turns waiting off for the wrapper's requests, whatever the
// runner's idem.WithWait says; without WithWait, the runner's applies. A
// negative bound is an error. HTTP wrappers only.
func WithWait(bound time.Duration) HTTPOption {
	return httpOption(func(c *config) error {
		if bound < 0 {
			return fmt.Errorf("idemlambda: wait bound %v must not be negative", bound)
		}
		c.wait, c.waitSet = bound, true
		return nil
	})
}

// waitContext is ctx with the wait of WithWait, cut to end the safety margin
// before ctx's deadline; ctx itself without WithWait.
func (c *config) waitContext(ctx context.Context) context.Context {
	if !c.waitSet {
		return ctx
	}
	bound := c.wait
	if deadline, ok := ctx.Deadline(); ok {
		bound = min(bound, deadline.Sub(c.now())-c.safetyMargin)
	}
	return idem.ContextWithWait(ctx, bound)
}
