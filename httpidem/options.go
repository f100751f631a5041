package httpidem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/httprule"
	"github.com/idemgo/idem/webhook"
)

// Defaults of the middleware's options.
const (
	// DefaultMaxBodyBytes is the largest request body a keyed request may
	// have (WithMaxBodyBytes): 1 MiB.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxResponseBytes is the largest response body recorded for
	// replay (WithMaxResponseBytes): 256 KiB.
	DefaultMaxResponseBytes = 256 << 10
	// DefaultTimeout is the time a keyed request's handler gets
	// (WithTimeout): 30 seconds.
	DefaultTimeout = 30 * time.Second
)

// Option configures Middleware. A bad option is an error of Middleware.
type Option func(*config) error

type config struct {
	required    map[string]bool
	identity    func(*http.Request) string
	maxBody     int64
	maxResponse int
	timeout     time.Duration
	now         func() time.Time
	hook        func(context.Context, *Response, idem.Verdict)
	wait        time.Duration
	waitSet     bool
	keyParts    []httprule.KeyPart
	selection   core.Selection
	selSet      bool
	endpoint    string          // WithEndpoint
	sender      *webhook.Sender // WithWebhook
}

func defaultConfig() config {
	return config{
		required:    map[string]bool{http.MethodPost: true, http.MethodPatch: true},
		maxBody:     DefaultMaxBodyBytes,
		maxResponse: DefaultMaxResponseBytes,
		timeout:     DefaultTimeout,
		now:         time.Now,
	}
}

// WithRequiredMethods sets the methods whose requests must carry an
// Idempotency-Key header (400 missing-idempotency-key without one; default
// POST and PATCH, the methods the IETF draft names). With no methods, a key
// is never required. A request of another method that carries a key is
// made idempotent too, except for the safe methods GET, HEAD, OPTIONS and
// TRACE, whose key is ignored unless they are listed here.
func WithRequiredMethods(methods ...string) Option {
	return func(c *config) error {
		set := map[string]bool{}
		for _, m := range methods {
			if m == "" || strings.ContainsAny(m, " \t\r\n") {
				return fmt.Errorf("httpidem: %q is not a method", m)
			}
			set[m] = true
		}
		c.required = set
		return nil
	}
}

// WithIdentity sets the function that names the caller of a request (a
// user id, a tenant, an API client: from your authentication middleware's
// context, never from what the client may choose freely). The stored key
// hashes the Idempotency-Key header with it, so one caller can neither
// replay nor block another's key. An empty identity, and the default
// (none), is anonymous: all anonymous callers share one key space, so their
// keys should be random (UUIDs).
func WithIdentity(identity func(r *http.Request) string) Option {
	return func(c *config) error {
		if identity == nil {
			return errors.New("httpidem: nil identity function")
		}
		c.identity = identity
		return nil
	}
}

// WithMaxBodyBytes bounds the body of a keyed request, which the middleware
// reads whole to fingerprint it (at least 1; default DefaultMaxBodyBytes).
// A larger body is answered 413 body-too-large before the handler runs.
func WithMaxBodyBytes(n int64) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("httpidem: body limit %d must be at least 1", n)
		}
		c.maxBody = n
		return nil
	}
}

// WithMaxResponseBytes bounds the response body recorded for replay (at
// least 0; default DefaultMaxResponseBytes). A response with a larger body
// is sent to the client as the handler writes it, but not recorded: its
// key is recorded as a success that cannot be replayed (see Middleware).
func WithMaxResponseBytes(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("httpidem: response limit %d must not be negative", n)
		}
		c.maxResponse = n
		return nil
	}
}

// WithTimeout sets the time a keyed request's handler gets (more than 0;
// default DefaultTimeout): the middleware gives the handler a context with
// the deadline now + d (or the request's own deadline, if earlier), and
// the runner's lease on the key ends at that deadline plus its lease margin
// (idem.WithLease). Set it above the longest time the handler takes: a
// retry that arrives after the lease ends takes the key over and runs the
// handler again. A runner with idem.WithLeaseRenewal makes the lease short
// and renews it while the handler runs, up to that deadline: a long timeout
// then no longer holds a crashed server's keys for the whole timeout, only
// for one lease term (2·interval + margin) after its last renewal.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("httpidem: timeout %v must be positive", d)
		}
		c.timeout = d
		return nil
	}
}

// WithClock sets the clock the middleware reads for the handler's deadline
// and the Retry-After of a 409 (default time.Now). Give the runner the same
// clock.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("httpidem: nil clock")
		}
		c.now = now
		return nil
	}
}

// WithResponseHook calls hook on every answer the middleware writes in the
// handler's place, before it is written: a replay (verdict idem.Replayed),
// and the middleware's own problems (in progress, key reused, missing or
// invalid key, body too large, ...), each with its verdict. The handler's
// own response is not given to the hook: the handler writes it itself. The
// hook may change the response (add headers, log it); its changes are not
// stored. A replay keeps Idempotent-Replayed: true whatever the hook does.
func WithResponseHook(hook func(ctx context.Context, resp *Response, verdict idem.Verdict)) Option {
	return func(c *config) error {
		if hook == nil {
			return errors.New("httpidem: nil response hook")
		}
		c.hook = hook
		return nil
	}
}

// WithWait makes a request that arrives while another request with its key
// is still being handled wait up to bound for that one's answer, and get it
// (replayed, with Idempotent-Replayed: true), instead of a 409 in-progress.
// Within one runner the duplicate waits in memory; across servers it polls
// the store, one strongly consistent read each (see idem.WithWait). The
// wait ends at the latest the runner's retry reserve
// (idem.WithRetryReserve) before the request's deadline (WithTimeout); a
// request still in progress then gets the 409. 0 turns waiting off for the
// middleware's requests, whatever the runner's idem.WithWait says; without
// WithWait, the runner's applies. A negative bound is an error.
func WithWait(bound time.Duration) Option {
	return func(c *config) error {
		if bound < 0 {
			return fmt.Errorf("httpidem: wait bound %v must not be negative", bound)
		}
		c.wait, c.waitSet = bound, true
		return nil
	}
}

// waitContext is ctx with the wait of WithWait; ctx itself without it.
func (c *config) waitContext(ctx context.Context) context.Context {
	if !c.waitSet {
		return ctx
	}
	return idem.ContextWithWait(ctx, c.wait)
}

// WithKeyHeader takes a request's idempotency key from the header name
// (any case) instead of Idempotency-Key: a webhook sender's delivery id,
// which it keeps on every retry of one delivery (GitHub's
// X-GitHub-Delivery, Shopify's X-Shopify-Event-Id; WithWebhook does this
// and verifies the sender's signature). The value must be one header of 1
// to MaxKeyLen visible ASCII characters other than a comma. Given several
// times, or with WithKeyBodyField, the key is made of all the sources in
// the order given (a composite key); each must be present. A request of a
// required method (WithRequiredMethods) without one is answered 400
// missing-key-source; one of another method passes through unkeyed; an
// unusable value is 400 invalid-key-source. The middleware needs
// WithEndpoint: the key is hashed with the endpoint name, the caller
// (WithIdentity) and the sources' names, so one id reaching two endpoints
// runs once on each, and keys of different sources never meet.
// WithKeyHeader("Idempotency-Key") alone is the default (and takes no
// endpoint).
func WithKeyHeader(name string) Option {
	return func(c *config) error {
		p, err := httprule.HeaderPart(name)
		if err != nil {
			return fmt.Errorf("httpidem: WithKeyHeader: %w", err)
		}
		c.keyParts = append(c.keyParts, p)
		return nil
	}
}

// WithKeyBodyField takes a request's idempotency key from a field of its
// JSON body: a field name or a dotted path into nested objects, such as
// "id" for a Stripe event, whose id is the same on every retry of its
// delivery. The value must be a non-empty string or a number (its literal
// text). A body that is not JSON, or lacks the field, is answered 400
// missing-key-source (a request of a method that is not required passes
// through); a value of another type is 400 invalid-key-source. The body is
// read (under WithMaxBodyBytes) before the key is known, and given to the
// handler again. It combines with WithKeyHeader, and needs WithEndpoint, as
// described there.
func WithKeyBodyField(path string) Option {
	return func(c *config) error {
		p, err := httprule.FieldPart(path)
		if err != nil {
			return fmt.Errorf("httpidem: WithKeyBodyField: %w", err)
		}
		c.keyParts = append(c.keyParts, p)
		return nil
	}
}

// WithFingerprintSelection makes the middleware fingerprint only the part
// of each request's JSON body that sel covers (core.SelectFields,
// core.IgnoreFields; see core.Selection for what a path names and what an
// absent field does); the method and the path are always covered. A resent
// webhook whose body differs only in a left-out field (a delivery
// timestamp or counter) then replays instead of being refused 422. A body
// that is not JSON is covered whole; a JSON body without a selected field
// is answered 400 invalid-body. Without this option the runner's
// idem.WithFingerprintSelection applies (default: the whole body). A
// Selection built from a bad path is an error of Middleware.
func WithFingerprintSelection(sel core.Selection) Option {
	return func(c *config) error {
		if err := sel.Err(); err != nil {
			return err
		}
		c.selection, c.selSet = sel, true
		return nil
	}
}

// WithEndpoint names the endpoint whose keys a sender's delivery id makes
// (WithKeyHeader, WithKeyBodyField, WithWebhook): the stored key is hashed
// with it, so that the same id sent to two endpoints (Stripe sends an
// event's id to every endpoint subscribed to it) runs once on each, on one
// store. Give each endpoint its own name, the same on every server (its
// route, say): 1 to 128 bytes without control characters. A middleware
// keyed by a header or a body field needs one; one keyed by the
// Idempotency-Key header takes none (the same key sent to another endpoint
// is refused 422, as the IETF draft says).
func WithEndpoint(name string) Option {
	return func(c *config) error {
		if name == "" {
			return errors.New("httpidem: WithEndpoint: empty endpoint name")
		}
		c.endpoint = name
		return nil
	}
}

// WithWebhook makes the middleware receive a webhook sender's deliveries
// (see package webhook: webhook.GitHub, webhook.Stripe, webhook.Shopify,
// webhook.HMAC): every request it does not pass through (any method but
// GET, HEAD, OPTIONS and TRACE, unless WithRequiredMethods lists them) is
// read (under WithMaxBodyBytes) and its signature verified, in constant
// time, over the raw body, before anything is read from the store or
// written to it; a signature missing or invalid (or, for Stripe, a
// timestamp outside the tolerance of WithClock's clock) is answered 401
// invalid-signature, logged and counted under idem.Unauthorized, at no
// store call. The key is the sender's duplicate-detection id (with
// WithEndpoint, which it needs; not with WithKeyHeader or
// WithKeyBodyField), and the fingerprint leaves out what the sender changes
// between deliveries of one event (unless WithFingerprintSelection is
// given). Middleware refuses a runner whose retention
// (idem.WithRetention) is shorter than the sender's window: the sender's
// WithWindow accepts a shorter window knowingly.
func WithWebhook(sender webhook.Sender) Option {
	return func(c *config) error {
		if err := sender.Err(); err != nil {
			return fmt.Errorf("httpidem: WithWebhook: %w", err)
		}
		c.sender = &sender
		return nil
	}
}
