// Command orders-alb is the example's POST /orders served behind an
// Application Load Balancer target group (with or without multi-value
// headers), built as a Lambda bootstrap:
//
//	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -tags lambda.norpc -o bootstrap ./examples/orders/cmd/orders-alb
//
// It reads the environment orders-api reads (orders.APIEnv) and scopes
// idempotency keys by the user the ALB authenticated
// (orders.ALBIdentityHeader). template.yaml does not deploy it (an ALB
// needs a VPC and a listener); the end-to-end tests run it under the Lambda
// runtime emulator. See package github.com/idemgo/idem/examples/orders.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemgo/idem/examples/orders"
)

func main() {
	handler, err := orders.ALBFromEnv(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "orders-alb:", err)
		os.Exit(1)
	}
	lambda.Start(handler)
}
