// Package httpidem makes net/http handlers idempotent with an idem.Runner,
// for services outside AWS Lambda: Middleware wraps any http.Handler (the
// standard mux, chi, gorilla/mux) so that a request retried with the same
// Idempotency-Key header (IETF draft-ietf-httpapi-idempotency-key-header)
// gets the first response back, marked Idempotent-Replayed, instead of
// running the handler again. For webhooks, WithWebhook verifies a sender's
// signature (package github.com/idemgo/idem/webhook: GitHub, Stripe,
// Shopify, any HMAC signer) before anything is stored, and keys by its
// delivery id on the endpoint (WithEndpoint); WithKeyHeader and
// WithKeyBodyField take a key from another header or body field.
//
//	runner, err := idem.New(store)
//	...
//	idempotent, err := httpidem.Middleware(runner, httpidem.WithIdentity(userID))
//	...
//	mux.Handle("POST /orders", idempotent(http.HandlerFunc(placeOrder)))
//
// It follows the rules of the Lambda wrappers (package
// github.com/idemgo/idem/lambda): the same key derivation (the header
// hashed with the caller's identity), the same fingerprint (method, path
// and body), the same answers (400, 409 with Retry-After, 422, RFC 9457
// problem details) and the same treatment of 5xx, 408 and 429 answers,
// which are not recorded. What differs is the edge: there is no invocation
// deadline, so the middleware sets one (WithTimeout) and the runner's lease
// on a key ends at that deadline plus its lease margin; the request body is
// read under a limit (WithMaxBodyBytes); the response is recorded as the
// handler writes it, under a limit (WithMaxResponseBytes), and a streamed
// response is not recorded. Records are not shared with the Lambda
// wrappers: a key stored by one is not replayed by the other.
//
// The package imports neither aws-lambda-go nor the AWS SDK; the store is
// the caller's choice (memstore, ddbstore, redisstore, or another idem.Store).
//
// What it does not promise: a handler that crashes (the process dies) after
// its side effect and before its outcome is recorded runs again once its
// lease ends. Make side effects idempotent downstream where a repeat would
// hurt; StoredKey gives the handler its stored key to derive ids and
// downstream keys from.
package httpidem
