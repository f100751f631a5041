// Command durable-webhook is a Lambda function for the end-to-end tests: a
// dispatcher behind a function URL that starts one execution of the durable
// function named by DURABLE_FUNCTION_ARN (a qualified ARN) per GitHub
// delivery, its signature checked with GITHUB_WEBHOOK_SECRET first, the
// event type (X-GitHub-Event) forwarded to the function. It is the recipe of
// docs/durable.md ("HTTP requests and webhooks"), with no table: a runner
// over memory that keeps what it answered for GitHub's window.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/idemgo/idem"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/lambda/durable"
	"github.com/idemgo/idem/memstore"
	"github.com/idemgo/idem/webhook"
)

func main() {
	handler, err := newHandler(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "durable-webhook:", err)
		os.Exit(1)
	}
	lambda.Start(handler)
}

func newHandler(ctx context.Context) (idemlambda.FunctionURLHandler, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, err
	}
	d, err := durable.New(awslambda.NewFromConfig(cfg), os.Getenv("DURABLE_FUNCTION_ARN"),
		durable.WithForwardedHeaders("X-GitHub-Event"))
	if err != nil {
		return nil, err
	}
	runner, err := idem.New(memstore.New(), idem.WithRetention(72*time.Hour))
	if err != nil {
		return nil, err
	}
	return durable.FunctionURL(runner, d,
		idemlambda.WithEndpoint("github-builds"),
		idemlambda.WithWebhook(webhook.GitHub(os.Getenv("GITHUB_WEBHOOK_SECRET"))))
}
