// Command orders-stream is the example's DynamoDB Streams consumer of the
// orders table, built as a Lambda bootstrap:
//
//	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -tags lambda.norpc -o bootstrap ./examples/orders/cmd/orders-stream
//
// Its event source mapping must report batch item failures
// (FunctionResponseTypes: [ReportBatchItemFailures]). See package
// github.com/idemgo/idem/examples/orders for what it does and the
// environment variables it reads.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemgo/idem/examples/orders"
)

func main() {
	handler, err := orders.StreamFromEnv(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "orders-stream:", err)
		os.Exit(1)
	}
	lambda.Start(handler)
}
