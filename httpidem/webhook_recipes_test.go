package httpidem_test

import (
	"github.com/idemgo/idem/httpidem"
	"github.com/idemgo/idem/webhook"
)

// The net/http recipes of docs/webhooks.md, as the webhook tests build
// them (env.serve adds the env's clock).

func stripeRecipe(endpoint string, secrets ...string) []httpidem.Option {
	return []httpidem.Option{httpidem.WithEndpoint(endpoint), httpidem.WithWebhook(webhook.Stripe(secrets...))}
}

func githubRecipe(endpoint string, secrets ...string) []httpidem.Option {
	return []httpidem.Option{httpidem.WithEndpoint(endpoint), httpidem.WithWebhook(webhook.GitHub(secrets...))}
}

// keyHeaderRecipe keys an endpoint by a sender's delivery id in a header,
// without a preset.
func keyHeaderRecipe(endpoint, header string) []httpidem.Option {
	return []httpidem.Option{httpidem.WithEndpoint(endpoint), httpidem.WithKeyHeader(header)}
}
