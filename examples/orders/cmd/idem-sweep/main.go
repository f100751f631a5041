// Command idem-sweep is the example's scheduled sweeper of the idempotency
// table, built as a Lambda bootstrap:
//
//	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -tags lambda.norpc -o bootstrap ./examples/orders/cmd/idem-sweep
//
// It deletes the records past retention of a table whose Time to Live
// deletes nothing (a global table in multi-Region strong consistency).
// template.yaml deploys it when its SweepSchedule parameter is set. See
// orders.Sweeper for what it does and the environment variables it reads.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemgo/idem/examples/orders"
)

func main() {
	handler, err := orders.SweepFromEnv(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "idem-sweep:", err)
		os.Exit(1)
	}
	lambda.Start(handler)
}
