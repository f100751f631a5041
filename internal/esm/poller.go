package esm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Defaults of the options.
const (
	// DefaultBatchSize is the number of messages a poll receives at most, Lambda's default
	// for standard queues.
	DefaultBatchSize = 10
	// DefaultWaitTime is how long a poll waits for messages (long polling). Lambda waits
	// 20 seconds; a short wait keeps Run responsive to its context.
	DefaultWaitTime = time.Second
	// DefaultFunctionTimeout is the function's timeout, Lambda's default.
	DefaultFunctionTimeout = 3 * time.Second
	// retryPause is how long Run waits after an SQS API error before it polls again.
	retryPause = time.Second
)

// ErrVisibilityTimeout reports a queue whose visibility timeout is shorter than the
// function's timeout: a batch could reappear while its invocation still runs. Lambda refuses
// such an event source mapping. Checked with errors.Is.
var ErrVisibilityTimeout = errors.New("esm: queue visibility timeout is less than the function timeout")

// API is the part of the SQS client a Poller calls; *sqs.Client implements it.
type API interface {
	// GetQueueAttributes reads the queue's ARN and visibility timeout (New).
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	// ReceiveMessage receives a batch.
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	// DeleteMessageBatch deletes the processed messages of a batch.
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// Option configures a Poller.
type Option func(*Poller) error

// WithBatchSize sets the most messages per batch, 1 to 10 (default DefaultBatchSize).
func WithBatchSize(n int) Option {
	return func(p *Poller) error {
		if n < 1 || n > 10 {
			return fmt.Errorf("esm: batch size %d: want 1 to 10", n)
		}
		p.batchSize = int32(n)
		return nil
	}
}

// WithWaitTime sets the long-polling wait of each receive, whole seconds from 0 to 20
// (default DefaultWaitTime).
func WithWaitTime(d time.Duration) Option {
	return func(p *Poller) error {
		if d < 0 || d > 20*time.Second || d%time.Second != 0 {
			return fmt.Errorf("esm: wait time %v: want whole seconds from 0 to 20", d)
		}
		p.waitTime = d
		return nil
	}
}

// WithFunctionTimeout sets the function's timeout, the deadline of each invocation's context
// (default DefaultFunctionTimeout). For a Remote function, set it to the emulator's
// AWS_LAMBDA_FUNCTION_TIMEOUT.
func WithFunctionTimeout(d time.Duration) Option {
	return func(p *Poller) error {
		if d <= 0 {
			return fmt.Errorf("esm: function timeout %v: want more than 0", d)
		}
		p.timeout = d
		return nil
	}
}

// WithReportBatchItemFailures makes the poller read batchItemFailures from the function's
// response (FunctionResponseTypes: [ReportBatchItemFailures]); without it, a successful
// invocation deletes its whole batch.
func WithReportBatchItemFailures() Option {
	return func(p *Poller) error {
		p.reportFailures = true
		return nil
	}
}

// WithObserver sets a function called with every batch PollOnce handles, empty ones too,
// and with failed polls (Batch.Err) but those cut short by the poll's context, on the
// polling goroutine.
func WithObserver(f func(Batch)) Option {
	return func(p *Poller) error {
		if f == nil {
			return errors.New("esm: nil observer")
		}
		p.observe = f
		return nil
	}
}

// Poller is one event source mapping: one queue, one function. Create it with New.
// Its methods are not safe for concurrent use.
type Poller struct {
	client         API
	fn             Function
	queueURL       string
	queueARN       string
	region         string
	batchSize      int32
	waitTime       time.Duration
	timeout        time.Duration
	reportFailures bool
	observe        func(Batch)
}

// New returns a poller of the queue at queueURL that invokes fn. It reads the queue's ARN
// (the events' eventSourceARN, whose region is their awsRegion) and visibility timeout, and
// refuses a visibility timeout shorter than the function's timeout (ErrVisibilityTimeout).
func New(ctx context.Context, client API, queueURL string, fn Function, opts ...Option) (*Poller, error) {
	if client == nil || fn == nil || queueURL == "" {
		return nil, errors.New("esm: New needs a client, a queue URL and a function")
	}
	p := &Poller{client: client, fn: fn, queueURL: queueURL, batchSize: DefaultBatchSize,
		waitTime: DefaultWaitTime, timeout: DefaultFunctionTimeout, observe: func(Batch) {}}
	for _, opt := range opts {
		if err := opt(p); err != nil {
			return nil, err
		}
	}
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn, types.QueueAttributeNameVisibilityTimeout},
	})
	if err != nil {
		return nil, fmt.Errorf("esm: reading the attributes of %s: %w", queueURL, err)
	}
	p.queueARN = out.Attributes[string(types.QueueAttributeNameQueueArn)]
	if p.region, err = regionOf(p.queueARN); err != nil {
		return nil, err
	}
	vis, err := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameVisibilityTimeout)])
	if err != nil {
		return nil, fmt.Errorf("esm: queue %s: visibility timeout %q: %w", queueURL, out.Attributes[string(types.QueueAttributeNameVisibilityTimeout)], err)
	}
	if time.Duration(vis)*time.Second < p.timeout {
		return nil, fmt.Errorf("%w: queue visibility timeout %d s, function timeout %v", ErrVisibilityTimeout, vis, p.timeout)
	}
	return p, nil
}

// QueueARN returns the ARN of the polled queue (the events' eventSourceARN).
func (p *Poller) QueueARN() string { return p.queueARN }

// Run polls until ctx is done, then returns nil. An SQS API error is passed to the observer
// (Batch.Err) and the poll is tried again a second later.
func (p *Poller) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		if _, err := p.PollOnce(ctx); err != nil && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(retryPause):
			}
		}
	}
	return nil
}
