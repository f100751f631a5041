package idemlambda

import (
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/httprule"
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
// (GitHub's X-GitHub-Delivery, Shopify's X-Shopify-Webhook-Id). The value
// must be one header of 1 to MaxHeaderKeyLen visible ASCII characters
// other than a comma. Given several times, or with WithKeyBodyField, the
// key is made of all the sources, in the order given (a composite key,
// such as a shop's domain and a webhook id); each must be present. A
// request without one is answered 400 missing-key-source (or, with
// WithOptionalKey, runs unkeyed); an unusable value is 400
// invalid-key-source. The key is hashed with the caller identity and the
// sources' names, as the Idempotency-Key header is, so keys of different
// sources never meet. WithKeyHeader("Idempotency-Key") alone is the
// default. HTTP wrappers only.
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
// another type is 400 invalid-key-source. It combines with WithKeyHeader as
// described there. HTTP wrappers only.
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

// RequestKey returns the stored key of req as the HTTP wrapper of its type
// (RESTAPI, HTTPAPI, FunctionURL, ALB) given opts computes it: the key
// sources of WithKeyHeader and WithKeyBodyField (by default the
// Idempotency-Key header), hashed with the caller identity the request
// carries (and WithIdentityHeader's), so that operators' tools find the
// record of a request (KeyConfig.HTTPOptions gives the options of a key
// configuration). Options other than those are accepted and do not change
// the key. A request without its key's source is an error wrapping
// ErrMissingKey (the wrapper answered 400, or ran it unkeyed with
// WithOptionalKey); an unusable source wraps core.ErrInvalidKey, and a body
// that a body field cannot be read from, core.ErrInvalidPayload: the
// wrapper stored nothing for either.
func RequestKey[Req HTTPRequest](req Req, opts ...HTTPOption) (string, error) {
	cfg, err := configure(opts, HTTPOption.applyHTTP)
	if err != nil {
		return "", err
	}
	var r httpRequest
	switch v := any(req).(type) {
	case events.APIGatewayProxyRequest:
		r = restRequest(v)
	case events.APIGatewayV2HTTPRequest:
		r = httpAPIRequest(v)
	case events.LambdaFunctionURLRequest:
		r = functionURLRequest(v)
	case events.ALBTargetGroupRequest:
		r = albRequest(v)
	}
	key, _, bodyErr, err := cfg.requestKey(cfg.withIdentityHeader(r))
	switch {
	case bodyErr != nil:
		return "", fmt.Errorf("%w: %w", core.ErrInvalidPayload, bodyErr)
	case errors.Is(err, httprule.ErrNoKey):
		return "", fmt.Errorf("%w: %w", ErrMissingKey, err)
	}
	return key, err
}
