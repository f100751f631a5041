package idemlambda

import (
	"context"

	"github.com/idemgo/idem/internal/httprule"
)

// withStoredKey returns ctx carrying key for the handler (see StoredKey).
func withStoredKey(ctx context.Context, key string) context.Context {
	return httprule.WithStoredKey(ctx, key)
}

// withCall returns ctx carrying the call's stored key (StoredKey) and the
// payload the wrapper gave the runner, for a handler in this module that
// needs what was fingerprinted (package github.com/idemgo/idem/lambda/durable
// sends it to the durable function it starts).
func withCall(ctx context.Context, key string, payload []byte) context.Context {
	return httprule.WithCallPayload(withStoredKey(ctx, key), payload)
}

// StoredKey returns the stored key of the call whose handler was given ctx
// (by SQS, Kinesis, DynamoDBStream, RESTAPI, HTTPAPI, FunctionURL, ALB or
// Typed): ok is false outside such a handler, and in an HTTP handler run
// unkeyed (WithOptionalKey). The key is the same on every run of one
// request or event, so a handler can derive from it the ids of what it
// creates and the idempotency keys it passes downstream: a run repeated
// after a failure then writes the same items instead of new ones. Hash it
// before use (it is a key, not an id to show).
func StoredKey(ctx context.Context) (key string, ok bool) {
	return httprule.StoredKey(ctx)
}
