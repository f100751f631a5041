package idemlambda_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/fakeaws"
	idemlambda "github.com/idemgo/idem/lambda"
)

// sendVia returns a handler that forwards each message with a real SQS
// client to server and returns the SDK's error as it is, as a consumer that
// publishes downstream does.
func sendVia(server *fakeaws.Server) func(context.Context, events.SQSMessage) ([]byte, error) {
	client := sqs.NewFromConfig(aws.Config{
		Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
		BaseEndpoint: aws.String(server.URL), RetryMaxAttempts: 1,
	})
	return func(ctx context.Context, m events.SQSMessage) ([]byte, error) {
		_, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(server.URL + "/000000000000/next"), MessageBody: aws.String(m.Body)})
		return nil, err
	}
}

// AWS throttling is HTTP 400 with a code: by default the SQS wrapper must
// report the message for redelivery, never acknowledge (and so lose) it;
// and a permanent AWS error is reported too, once, for the redrive policy
// (acknowledged only when WithAcknowledged names it).
func TestSQSReportsAWSThrottlingByDefault(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer fakeaws.Response
		report bool
		opts   []idemlambda.BatchOption
	}{
		{"SQS throttling (HTTP 400)", fakeaws.SQSError(400, "ThrottlingException", "ThrottlingException", "slow down"), true, nil},
		{"SQS request throttled (HTTP 403)", fakeaws.SQSError(403, "RequestThrottled", "RequestThrottled", "throttled"), true, nil},
		{"SQS internal error (HTTP 500)", fakeaws.SQSError(500, "InternalError", "InternalError", "oops"), true, nil},
		{"SQS invalid parameter (HTTP 400)", fakeaws.SQSError(400, "InvalidParameterValue", "InvalidParameterValue", "bad"), true, nil},
		{"SQS invalid parameter (HTTP 400), acknowledged", fakeaws.SQSError(400, "InvalidParameterValue", "InvalidParameterValue", "bad"), false,
			[]idemlambda.BatchOption{idemlambda.WithAcknowledged(idem.FailedPermanently)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			server := fakeaws.New(t, nil)
			server.Queue(tc.answer, tc.answer, tc.answer) // the default in-process tries
			h, err := idemlambda.SQS(e.runner, "forward", idemlambda.KeyFromMessageID(), sendVia(server), tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			resp, _ := h(e.ctx(t, time.Minute), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: `{"n":1}`}}})
			if got := len(resp.BatchItemFailures) == 1; got != tc.report {
				t.Fatalf("batchItemFailures = %v, want reported %v", resp.BatchItemFailures, tc.report)
			}
		})
	}
}

// The typed wrapper passes the runner's answer on: an AWS throttle is a
// transient failure the invoker's retry policy sees as such.
func TestTypedRecordsAWSThrottlingAsRetryable(t *testing.T) {
	e := newEnv(t, idem.WithRetry(1, time.Millisecond, time.Millisecond))
	server := fakeaws.New(t, nil)
	server.Queue(fakeaws.SQSError(400, "ThrottlingException", "ThrottlingException", "slow down"))
	send := sendVia(server)
	h, err := idemlambda.Typed(e.runner, func(in string) (string, error) { return "evt:typed-1:forward", nil },
		func(ctx context.Context, in string) (string, error) {
			_, err := send(ctx, events.SQSMessage{Body: in})
			return "", err
		})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h(e.ctx(t, time.Minute), `{"n":1}`); !errors.Is(err, idem.ErrTransientFailure) {
		t.Fatalf("Typed = %v, want ErrTransientFailure", err)
	}
}
