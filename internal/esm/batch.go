package esm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Batch is what one poll did.
type Batch struct {
	// Messages are the messages received, in the event's order (none: the queue had
	// nothing visible during the wait).
	Messages []Message
	// Deleted are the ids of the messages deleted after the invocation.
	Deleted []string
	// Reported are the ids the response listed in batchItemFailures: left in the queue, to
	// reappear after the visibility timeout.
	Reported []string
	// InvokeErr is why the invocation failed as a whole (ErrFunctionError, ErrTimeout,
	// ErrInvalidResponse, or the context's error): nothing was deleted.
	InvokeErr error
	// Err is an SQS API error: a failed receive (nothing was invoked) or delete.
	Err error
}

// Message is a received message, as the function saw it.
type Message struct {
	// ID is the message id (the record's messageId).
	ID string
	// ReceiveCount is its ApproximateReceiveCount at this receive (1 on the first).
	ReceiveCount int
	// GroupID is its MessageGroupId (FIFO queues; "" otherwise).
	GroupID string
	// Body is the message body.
	Body string
}

// PollOnce receives one batch, waiting up to the wait time for messages, invokes the
// function with it when it is not empty, and deletes what the response says succeeded.
// The returned error is Batch.Err; a failed invocation is not an error here but
// Batch.InvokeErr.
// A poll cut short by ctx (an error once ctx is done) is not passed to the observer.
func (p *Poller) PollOnce(ctx context.Context) (Batch, error) {
	b, err := p.poll(ctx)
	if err != nil {
		b.Err = err
		if ctx.Err() != nil {
			return b, err
		}
	}
	p.observe(b)
	return b, err
}

func (p *Poller) poll(ctx context.Context) (Batch, error) {
	out, err := p.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(p.queueURL),
		MaxNumberOfMessages:         p.batchSize,
		WaitTimeSeconds:             int32(p.waitTime.Seconds()),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return Batch{}, fmt.Errorf("esm: receive from %s: %w", p.queueURL, err)
	}
	var b Batch
	if len(out.Messages) == 0 {
		return b, nil
	}
	for _, m := range out.Messages {
		n, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		b.Messages = append(b.Messages, Message{ID: aws.ToString(m.MessageId), ReceiveCount: n,
			GroupID: m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)], Body: aws.ToString(m.Body)})
	}
	event, err := json.Marshal(newEvent(out.Messages, p.queueARN, p.region))
	if err != nil {
		return b, fmt.Errorf("esm: encoding the event: %w", err)
	}
	invokeCtx, cancel := context.WithTimeout(ctx, p.timeout)
	resp, err := p.fn(invokeCtx, event)
	cancel()
	if err != nil {
		b.InvokeErr = err
		return b, nil
	}
	ids := make([]string, len(b.Messages))
	for i, m := range b.Messages {
		ids[i] = m.ID
	}
	if b.Reported, err = reported(resp, ids, p.reportFailures); err != nil {
		b.InvokeErr = err
		return b, nil
	}
	return b, p.delete(ctx, out.Messages, &b)
}

// reported returns the message ids a response leaves in the queue: with
// ReportBatchItemFailures, those listed in batchItemFailures; the error (wrapping
// ErrInvalidResponse) fails the whole batch.
func reported(resp []byte, ids []string, reportFailures bool) ([]string, error) {
	if !reportFailures || len(strings.TrimSpace(string(resp))) == 0 {
		return nil, nil
	}
	var r *struct {
		BatchItemFailures []struct {
			ItemIdentifier *string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		return nil, fmt.Errorf("%w: %v: %s", ErrInvalidResponse, err, truncate(resp))
	}
	if r == nil {
		return nil, nil
	}
	in := make(map[string]bool, len(ids))
	for _, id := range ids {
		in[id] = true
	}
	var out []string
	for _, f := range r.BatchItemFailures {
		switch {
		case f.ItemIdentifier == nil || *f.ItemIdentifier == "":
			return nil, fmt.Errorf("%w: a batch item failure without an itemIdentifier", ErrInvalidResponse)
		case !in[*f.ItemIdentifier]:
			return nil, fmt.Errorf("%w: itemIdentifier %q is not a message of the batch", ErrInvalidResponse, *f.ItemIdentifier)
		}
		out = append(out, *f.ItemIdentifier)
	}
	return out, nil
}

// delete deletes the messages of b that were not reported, recording them in b.Deleted.
func (p *Poller) delete(ctx context.Context, msgs []types.Message, b *Batch) error {
	skip := make(map[string]bool, len(b.Reported))
	for _, id := range b.Reported {
		skip[id] = true
	}
	var entries []types.DeleteMessageBatchRequestEntry
	for i, m := range msgs {
		if !skip[aws.ToString(m.MessageId)] {
			entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
	}
	if len(entries) == 0 {
		return nil
	}
	out, err := p.client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.queueURL), Entries: entries})
	if err != nil {
		return fmt.Errorf("esm: delete from %s: %w", p.queueURL, err)
	}
	ok := make(map[string]bool, len(out.Successful))
	for _, s := range out.Successful {
		ok[aws.ToString(s.Id)] = true
	}
	for i, m := range msgs {
		if ok[strconv.Itoa(i)] {
			b.Deleted = append(b.Deleted, aws.ToString(m.MessageId))
		}
	}
	if len(out.Failed) > 0 {
		var errs []error
		for _, f := range out.Failed {
			errs = append(errs, fmt.Errorf("entry %s: %s: %s", aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message)))
		}
		return fmt.Errorf("esm: delete from %s: %w", p.queueURL, errors.Join(errs...))
	}
	return nil
}
