package esm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// ErrFunctionError reports an invocation that ended in a function error: the handler
// returned an error or panicked, or the runtime crashed. Nothing of the batch is deleted.
// Checked with errors.Is.
var ErrFunctionError = errors.New("esm: function error")

// ErrTimeout reports an invocation that did not answer within the function's timeout.
// Nothing of the batch is deleted. Checked with errors.Is.
var ErrTimeout = errors.New("esm: function timed out")

// ErrInvalidResponse reports a response that fails the whole batch under
// ReportBatchItemFailures: not JSON, or an itemIdentifier that is null, empty or not a
// message id of the batch. Nothing of the batch is deleted. Checked with errors.Is.
var ErrInvalidResponse = errors.New("esm: invalid batch response")

// RemoteGrace is how long Remote waits for an answer past the invocation's deadline: the
// emulator answers a timeout itself, a moment after the deadline, and an invoke abandoned
// earlier would overlap the next one.
const RemoteGrace = 5 * time.Second

// Function is an invocation of the function: it takes the event, as the JSON Lambda sends,
// and returns the function's response payload. A non-nil error is a failed invocation
// (ErrFunctionError, ErrTimeout, or the context's error). ctx carries the invocation's
// deadline, the function's timeout.
type Function func(ctx context.Context, event []byte) ([]byte, error)

// Handler returns a Function that runs h in this process: it decodes the event as the Lambda
// runtime for Go does (into events.SQSEvent) and encodes h's response. A returned error or a
// panic is ErrFunctionError. When ctx's deadline passes before h returns, the invocation is
// ErrTimeout and h is abandoned: it runs on, and its response is dropped.
func Handler(h func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)) Function {
	type result struct {
		resp events.SQSEventResponse
		err  error
	}
	return func(ctx context.Context, event []byte) ([]byte, error) {
		var ev events.SQSEvent
		if err := json.Unmarshal(event, &ev); err != nil {
			return nil, fmt.Errorf("%w: decoding the event: %v", ErrFunctionError, err)
		}
		done := make(chan result, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					done <- result{err: fmt.Errorf("panic: %v", p)}
				}
			}()
			resp, err := h(ctx, ev)
			done <- result{resp, err}
		}()
		select {
		case r := <-done:
			if r.err != nil {
				return nil, fmt.Errorf("%w: %v", ErrFunctionError, r.err)
			}
			return json.Marshal(r.resp)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, ErrTimeout
			}
			return nil, ctx.Err()
		}
	}
}

// Invoker invokes a function over HTTP and answers the HTTP status and body, as
// devserver.RIE.Invoke does for AWS's Lambda Runtime Interface Emulator. Invoke must
// serialize its calls where the function cannot take overlapping invokes.
type Invoker interface {
	// Invoke posts event and returns the answer's status and body; err is a failure to
	// get an answer at all.
	Invoke(ctx context.Context, event []byte) (status int, body []byte, err error)
}

// Remote returns a Function that invokes inv, reading its answers as the emulator gives them
// (it sets no X-Amz-Function-Error header, as Lambda's Invoke API does): a status other than
// 200 (a crash, a panic) or a JSON object with an errorType (a returned error) is
// ErrFunctionError; the text "Task timed out after …" is ErrTimeout. It waits for the answer
// up to RemoteGrace past ctx's deadline, and is not stopped by ctx's cancellation: the
// emulator ends a running invocation only at its own timeout.
func Remote(inv Invoker) Function {
	return func(ctx context.Context, event []byte) ([]byte, error) {
		wait := context.WithoutCancel(ctx)
		if deadline, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			wait, cancel = context.WithDeadline(wait, deadline.Add(RemoteGrace))
			defer cancel()
		}
		status, body, err := inv.Invoke(wait, event)
		if err != nil {
			return nil, fmt.Errorf("%w: no answer: %v", ErrFunctionError, err)
		}
		return remoteAnswer(status, body)
	}
}

// remoteAnswer reads an emulator's answer.
func remoteAnswer(status int, body []byte) ([]byte, error) {
	if status != http.StatusOK {
		return nil, fmt.Errorf("%w: HTTP %d: %s", ErrFunctionError, status, truncate(body))
	}
	if bytes.HasPrefix(body, []byte("Task timed out after")) {
		return nil, fmt.Errorf("%w: %s", ErrTimeout, body)
	}
	var fe struct {
		ErrorType    *string `json:"errorType"`
		ErrorMessage string  `json:"errorMessage"`
	}
	if json.Unmarshal(body, &fe) == nil && fe.ErrorType != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrFunctionError, *fe.ErrorType, fe.ErrorMessage)
	}
	return body, nil
}

func truncate(b []byte) string {
	const limit = 200
	if len(b) > limit {
		return string(b[:limit]) + "…"
	}
	return string(b)
}
