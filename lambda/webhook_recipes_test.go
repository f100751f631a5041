package idemlambda_test

import (
	"github.com/idemgo/idem"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/webhook"
)

// refusedVerdict is the verdict of a request refused for its credentials.
var refusedVerdict = idem.Unauthorized

// The recipes of docs/webhooks.md, as the webhook tests build them: each
// sender's preset, on the endpoint named, with the wrapper reading the
// env's clock (Stripe's timestamp tolerance).

func stripeRecipe(e *env, endpoint string, secrets ...string) []idemlambda.HTTPOption {
	return []idemlambda.HTTPOption{idemlambda.WithClock(e.clock.Now), idemlambda.WithEndpoint(endpoint), idemlambda.WithWebhook(webhook.Stripe(secrets...))}
}

func githubRecipe(e *env, endpoint string, secrets ...string) []idemlambda.HTTPOption {
	return []idemlambda.HTTPOption{idemlambda.WithClock(e.clock.Now), idemlambda.WithEndpoint(endpoint), idemlambda.WithWebhook(webhook.GitHub(secrets...))}
}

func shopifyRecipe(e *env, endpoint string, secrets ...string) []idemlambda.HTTPOption {
	return []idemlambda.HTTPOption{idemlambda.WithClock(e.clock.Now), idemlambda.WithEndpoint(endpoint), idemlambda.WithWebhook(webhook.Shopify(secrets...))}
}

// keyHeaderRecipe keys an endpoint by a sender's delivery id in a header,
// without a preset.
func keyHeaderRecipe(endpoint, header string) []idemlambda.HTTPOption {
	return []idemlambda.HTTPOption{idemlambda.WithEndpoint(endpoint), idemlambda.WithKeyHeader(header)}
}
