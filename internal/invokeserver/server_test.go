package invokeserver_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"

	"github.com/idemgo/idem/internal/invokeserver"
)

const fn = "arn:aws:lambda:us-east-1:123456789012:function:fulfil:live"

// The behaviour table of Lambda's durable execution names, row by row,
// through the SDK's client: what it sends, and what it decodes from the
// answers.
func TestBehaviourTable(t *testing.T) {
	srv := invokeserver.Start()
	defer srv.Close()
	client := lambda.New(lambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	invoke := func(function, name, payload string, typ types.InvocationType) (*lambda.InvokeOutput, error) {
		in := &lambda.InvokeInput{FunctionName: aws.String(function), InvocationType: typ, Payload: []byte(payload)}
		if name != "" {
			in.DurableExecutionName = aws.String(name)
		}
		return client.Invoke(context.Background(), in)
	}
	var first string
	steps := []struct {
		name, exec, payload string
		before              func()
		wantCode            string // the exception, or "" for 202
		wantARN             string // "first": the first execution's; "new": another
	}{
		{"never existed: started", "e-1", `{"a":1}`, nil, "", "new"},
		{"running, same payload: the existing execution", "e-1", `{"a":1}`, nil, "", "first"},
		{"running, another payload: refused", "e-1", `{"a":2}`, nil, "DurableExecutionAlreadyStartedException", ""},
		{"closed within retention, same payload: the existing execution", "e-1", `{"a":1}`, func() { srv.CloseExecution("e-1") }, "", "first"},
		{"closed within retention, another payload: refused", "e-1", `{"a":2}`, func() { srv.Advance(invokeserver.DefaultRetention - 1) }, "DurableExecutionAlreadyStartedException", ""},
		{"closed past retention: started again", "e-1", `{"a":2}`, func() { srv.Advance(1) }, "", "new"},
		{"no name: a new execution every time", "", `{"a":1}`, nil, "", "new"},
		{"name too long", strings.Repeat("a", 65), `{}`, nil, "InvalidParameterValueException", ""},
		{"name with a colon", "evt:o-1", `{}`, nil, "InvalidParameterValueException", ""},
		{"not JSON", "e-2", `order`, nil, "InvalidRequestContentException", ""},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		out, err := invoke(fn, s.exec, s.payload, types.InvocationTypeEvent)
		if s.wantCode != "" {
			var api smithy.APIError
			if !errors.As(err, &api) || api.ErrorCode() != s.wantCode {
				t.Errorf("%s: error %v, want %s", s.name, err, s.wantCode)
			}
			continue
		}
		if err != nil || out.StatusCode != 202 || out.DurableExecutionArn == nil {
			t.Fatalf("%s: %+v, %v; want 202 with an execution ARN", s.name, out, err)
		}
		arn := *out.DurableExecutionArn
		switch {
		case first == "":
			first = arn
		case s.wantARN == "first" && arn != first, s.wantARN == "new" && arn == first:
			t.Errorf("%s: ARN %s (first %s), want %s", s.name, arn, first, s.wantARN)
		}
	}
	var started *types.DurableExecutionAlreadyStartedException
	if _, err := invoke(fn, "e-1", `{"a":3}`, types.InvocationTypeEvent); !errors.As(err, &started) {
		t.Errorf("another payload: %v, want *types.DurableExecutionAlreadyStartedException", err)
	}
	if got := srv.Started(); got != 3 {
		t.Errorf("executions started = %d, want 3", got)
	}
}

// Faults and refusals decode as the SDK's typed exceptions.
func TestErrors(t *testing.T) {
	srv := invokeserver.Start()
	defer srv.Close()
	client := lambda.New(lambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	invoke := func(function string, typ types.InvocationType, payload []byte) error {
		_, err := client.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String(function),
			InvocationType: typ, DurableExecutionName: aws.String("e-1"), Payload: payload})
		return err
	}
	var throttled *types.TooManyRequestsException
	srv.Fail(invokeserver.Throttle)
	if err := invoke(fn, types.InvocationTypeEvent, []byte(`{}`)); !errors.As(err, &throttled) || aws.ToString(throttled.RetryAfterSeconds) != "1" {
		t.Errorf("throttled: %v, want *types.TooManyRequestsException with Retry-After 1", err)
	}
	var service *types.ServiceException
	srv.Fail(invokeserver.ServiceError)
	if err := invoke(fn, types.InvocationTypeEvent, []byte(`{}`)); !errors.As(err, &service) {
		t.Errorf("5xx: %v, want *types.ServiceException", err)
	}
	var tooLarge *types.RequestTooLargeException
	if err := invoke(fn, types.InvocationTypeEvent, make([]byte, invokeserver.DefaultMaxPayload+1)); !errors.As(err, &tooLarge) {
		t.Errorf("too large: %v, want *types.RequestTooLargeException", err)
	}
	var invalid *types.InvalidParameterValueException
	if err := invoke("arn:aws:lambda:us-east-1:123456789012:function:fulfil", types.InvocationTypeEvent, []byte(`{}`)); !errors.As(err, &invalid) {
		t.Errorf("unqualified: %v, want *types.InvalidParameterValueException", err)
	}
	if err := invoke(fn, types.InvocationTypeRequestResponse, []byte(`{}`)); !errors.As(err, &invalid) {
		t.Errorf("synchronous: %v, want *types.InvalidParameterValueException", err)
	}
	if got := srv.Started(); got != 0 {
		t.Errorf("executions started = %d, want 0", got)
	}
	if inv := srv.Invocations(); len(inv) != 5 || inv[0].Status != 429 || inv[1].Status != 500 || inv[2].Status != 413 {
		t.Errorf("invocations %+v", inv)
	}
}
