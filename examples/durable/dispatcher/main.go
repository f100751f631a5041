// Command dispatcher is the example dispatcher of examples/durable/template.yaml:
// it starts one execution of the durable function named by DURABLE_FUNCTION_ARN
// (a qualified ARN) per order of its SQS queue, keyed by the body's order_id,
// and reports the messages it could not start for SQS to redeliver. It keeps
// no table: the execution name is the guarantee (docs/durable.md).
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/idemgo/idem"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/lambda/durable"
	"github.com/idemgo/idem/memstore"
)

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	d, err := durable.New(awslambda.NewFromConfig(cfg), os.Getenv("DURABLE_FUNCTION_ARN"))
	if err != nil {
		log.Fatal(err)
	}
	runner, err := idem.New(memstore.New())
	if err != nil {
		log.Fatal(err)
	}
	handler, err := durable.SQS(runner, "fulfil", idemlambda.KeyFromBodyField("order_id"), d)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(handler)
}
