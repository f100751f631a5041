package idemlambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/httprule"
	"github.com/idemgo/idem/webhook"
)

// Problem types of a key taken from WithKeyHeader or WithKeyBodyField.
const (
	// ProblemMissingKeySource: 400, the request lacks a header or a body
	// field the key is taken from (WithKeyHeader, WithKeyBodyField), or
	// its body is not JSON where a field is asked for.
	ProblemMissingKeySource = httprule.MissingKeySource
	// ProblemInvalidKeySource: 400, such a header is repeated, empty,
	// longer than MaxHeaderKeyLen or not visible ASCII (or has a comma), or
	// such a body field is empty or not a string or a number.
	ProblemInvalidKeySource = httprule.InvalidKeySource
)

// WithKeyHeader takes the request's idempotency key from the header name
// (looked up case-insensitively) instead of Idempotency-Key: a webhook
// sender's delivery id, which it keeps on every retry of one delivery
// (GitHub's X-GitHub-Delivery, Shopify's X-Shopify-Event-Id; WithWebhook
// does this and verifies the sender's signature). The value must be one
// header of 1 to MaxHeaderKeyLen visible ASCII characters other than a
// comma. Given several times, or with WithKeyBodyField, the key is made of
// all the sources, in the order given (a composite key); each must be
// present. A request without one is answered 400 missing-key-source (or,
// with WithOptionalKey, runs unkeyed); an unusable value is 400
// invalid-key-source. The wrapper needs WithEndpoint: the key is hashed
// with the endpoint name, the caller identity and the sources' names, so
// one id reaching two endpoints runs once on each, and keys of different
// sources never meet. WithKeyHeader("Idempotency-Key") alone is the
// default (and takes no endpoint). HTTP wrappers only.
func WithKeyHeader(name string) HTTPOption {
	return httpOption(func(c *config) error {
		p, err := httprule.HeaderPart(name)
		if err != nil {
			return fmt.Errorf("idemlambda: WithKeyHeader: %w", err)
		}
		c.keyParts = append(c.keyParts, p)
		return nil
	})
}

// WithKeyBodyField takes the request's idempotency key from a field of its
// JSON body (decoded from base64 first, if the event says so): a field name
// or a dotted path into nested objects, such as "id" for a Stripe event,
// whose id is the same on every retry of its delivery. The value must be a
// non-empty string or a number (its literal text). A body that is not
// JSON, or lacks the field, is answered 400 missing-key-source; a value of
// another type is 400 invalid-key-source. It combines with WithKeyHeader,
// and needs WithEndpoint, as described there. HTTP wrappers only.
func WithKeyBodyField(path string) HTTPOption {
	return httpOption(func(c *config) error {
		p, err := httprule.FieldPart(path)
		if err != nil {
			return fmt.Errorf("idemlambda: WithKeyBodyField: %w", err)
		}
		c.keyParts = append(c.keyParts, p)
		return nil
	})
}

// WithEndpoint names the endpoint whose keys a sender's delivery id makes
// (WithKeyHeader, WithKeyBodyField, WithWebhook), as SQS takes an action:
// the stored key is hashed with it, so that the same id sent to two
// endpoints (Stripe sends an event's id to every endpoint subscribed to
// it; GitHub one delivery's to every app and hook) runs once on each, on
// one table. Give each endpoint its own name, the same in every deployment
// of it (its route, or its function's purpose): 1 to 128 bytes without
// control characters. A wrapper keyed by a header or a body field needs
// one; one keyed by the Idempotency-Key header takes none (the same key
// sent to another endpoint is refused 422, as the IETF draft says). HTTP
// wrappers only.
func WithEndpoint(name string) HTTPOption {
	return httpOption(func(c *config) error {
		if name == "" {
			return errors.New("idemlambda: WithEndpoint: empty endpoint name")
		}
		c.endpoint = name
		return nil
	})
}

// WithWebhook makes the wrapper receive a webhook sender's deliveries (see
// package webhook: webhook.GitHub, webhook.Stripe, webhook.Shopify,
// webhook.HMAC): every request's signature is verified, in constant time,
// over its raw body (decoded from base64 first), before anything is read
// from the store or written to it; a signature missing or invalid (or, for
// Stripe, a timestamp outside the tolerance of WithClock's clock) is
// answered 401 invalid-signature, logged and counted under idem.Unauthorized,
// at no store call. The key is the sender's duplicate-detection id (with
// WithEndpoint, which it needs; not with WithKeyHeader or
// WithKeyBodyField), and the fingerprint leaves out what the sender changes
// between deliveries of one event (unless WithFingerprintSelection is
// given). A runner whose retention (idem.WithRetention) is shorter than
// the sender's window is refused by the constructor: the sender's
// WithWindow accepts a shorter window knowingly. HTTP wrappers only.
func WithWebhook(sender webhook.Sender) HTTPOption {
	return httpOption(func(c *config) error {
		if err := sender.Err(); err != nil {
			return fmt.Errorf("idemlambda: WithWebhook: %w", err)
		}
		c.sender = &sender
		return nil
	})
}

// RequestKey returns the stored key of an HTTP request event, given as
// Lambda sends it (JSON), as the HTTP wrapper of its type Req (RESTAPI for
// events.APIGatewayProxyRequest, HTTPAPI, FunctionURL, ALB) built with kc's
// options (KeyConfig.HTTPOptions) computes it in an invocation whose
// context is ctx: the key sources' values (by default the Idempotency-Key
// header; with kc.Webhook, the sender's delivery id), hashed with the
// endpoint and the caller identity the request carries (and kc's identity
// header), and scoped by the invocation's tenant id (ctx's lambdacontext,
// if any). Operators' tools use it to find a request's record; no
// signature is verified. A request without its key's source is an error
// wrapping ErrMissingKey (the wrapper answered 400, or ran it unkeyed with
// WithOptionalKey); an unusable source wraps core.ErrInvalidKey, a body a
// body field cannot be read from core.ErrInvalidPayload, and a caller an
// authorizer let through that the request does not identify
// ErrUnidentifiedCaller: the wrapper stored nothing for any of them.
func RequestKey[Req HTTPRequest](ctx context.Context, kc KeyConfig, event []byte) (string, error) {
	cfg, err := kc.requestConfig()
	if err != nil {
		return "", err
	}
	var req Req
	if err := json.Unmarshal(event, &req); err != nil {
		return "", fmt.Errorf("idemlambda: the event is not a %T: %w", req, err)
	}
	var r httpRequest
	switch v := any(req).(type) {
	case events.APIGatewayProxyRequest:
		r = restRequest(ctx, v)
	case events.APIGatewayV2HTTPRequest:
		r = httpAPIRequest(ctx, v)
	case events.LambdaFunctionURLRequest:
		r = functionURLRequest(context.WithValue(ctx, urlIAMKey{}, readURLIAM(event)), v)
	case events.ALBTargetGroupRequest:
		r = albRequest(ctx, v)
	}
	r = cfg.withIdentityHeader(r)
	var body []byte
	if httprule.NeedsBody(cfg.keyParts) {
		if body, err = DecodeBody(r.body, r.base64); err != nil {
			return "", fmt.Errorf("%w: %w", core.ErrInvalidPayload, err)
		}
	}
	key, err := cfg.requestKey(ctx, r, body)
	if errors.Is(err, httprule.ErrNoKey) {
		return "", fmt.Errorf("%w: %w", ErrMissingKey, err)
	}
	return key, err
}
