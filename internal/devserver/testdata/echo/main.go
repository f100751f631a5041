// Command echo is a Lambda function for devserver's tests: it answers with the event it was
// given, whether its context has a deadline, and the value of $ECHO_MARK (to show that the
// emulator passes its environment on).
package main

import (
	"context"
	"encoding/json"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
)

type answer struct {
	Event       json.RawMessage `json:"event"`
	HasDeadline bool            `json:"hasDeadline"`
	Mark        string          `json:"mark"`
}

func main() {
	lambda.Start(func(ctx context.Context, event json.RawMessage) (answer, error) {
		_, ok := ctx.Deadline()
		return answer{Event: event, HasDeadline: ok, Mark: os.Getenv("ECHO_MARK")}, nil
	})
}
