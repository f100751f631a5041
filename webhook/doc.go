// Package webhook describes webhook senders as the HTTP wrappers need them
// (idemlambda.WithWebhook for API Gateway, function URLs and ALBs,
// httpidem.WithWebhook for net/http): how a sender signs a delivery, which
// id it keeps on every delivery of one event (the duplicate-detection id,
// the idempotency key), what it changes between two deliveries of one event
// (left out of the fingerprint), and for how long it may deliver one event
// again (the least retention of the runner's records).
//
// GitHub, Stripe and Shopify are presets that follow each sender's
// published contract; HMAC describes any other sender that signs the raw
// body with an HMAC-SHA256 in a header. Each takes several secrets, for
// rotation: a delivery signed with any of them is accepted. docs/webhooks.md
// gives each fact with its source, and a recipe per sender.
//
//	sender := webhook.Stripe(os.Getenv("STRIPE_WEBHOOK_SECRET"))
//	handler, err := idemlambda.FunctionURL(runner, fulfil,
//		idemlambda.WithEndpoint("fulfilment"), idemlambda.WithWebhook(sender))
//
// A wrapper with a sender verifies every request before anything is
// stored: a signature that is missing, does not match, or (Stripe) carries
// a timestamp outside the tolerance is answered 401 invalid-signature,
// logged and counted under the verdict idem.Unauthorized, and costs no
// store call. The comparison is in constant time, over the raw body (a
// base64 body decoded first).
//
// A Sender is a value: its methods return changed copies, and it is safe
// for concurrent use. The package imports the standard library and core
// only.
package webhook
