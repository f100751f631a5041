package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// MaxPeek is the most messages Peek returns: one ReceiveMessage's worth.
const MaxPeek = 10

// waitSeconds is the long poll of every receive: an empty answer then means
// the queue has no visible message (a short poll on SQS samples only some
// of its servers and may come back empty while messages wait).
const waitSeconds = 1

// PeekAPI is the part of the SQS client Peek calls.
type PeekAPI interface {
	// ReceiveMessage receives the messages.
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	// ChangeMessageVisibility makes each visible again at once.
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// Peek receives up to n (1 to MaxPeek) messages of the queue at url with
// every attribute and leaves them visible, as `aws sqs receive-message
// --visibility-timeout 0` does: the SDK does not send a zero
// VisibilityTimeout, so each message is made visible again with
// ChangeMessageVisibility. Each receive counts in the messages'
// ApproximateReceiveCount, as on SQS.
func Peek(ctx context.Context, client PeekAPI, url string, n int) ([]types.Message, error) {
	if n < 1 || n > MaxPeek {
		return nil, fmt.Errorf("dlq: peek at most 1 to %d messages, not %d", MaxPeek, n)
	}
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: int32(n), WaitTimeSeconds: waitSeconds,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return nil, fmt.Errorf("dlq: peek at %s: %w", url, err)
	}
	for _, m := range out.Messages {
		if _, err := client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0,
		}); err != nil {
			return nil, fmt.Errorf("dlq: peek at %s: %w", url, err)
		}
	}
	return out.Messages, nil
}

// cliMessage is a message as `aws sqs receive-message` prints it.
type cliMessage struct {
	MessageID              string                  `json:"MessageId"`
	ReceiptHandle          string                  `json:"ReceiptHandle"`
	MD5OfBody              string                  `json:"MD5OfBody"`
	Body                   string                  `json:"Body"`
	Attributes             map[string]string       `json:"Attributes,omitempty"`
	MD5OfMessageAttributes string                  `json:"MD5OfMessageAttributes,omitempty"`
	MessageAttributes      map[string]cliAttribute `json:"MessageAttributes,omitempty"`
}

type cliAttribute struct {
	StringValue *string `json:"StringValue,omitempty"`
	BinaryValue []byte  `json:"BinaryValue,omitempty"`
	DataType    string  `json:"DataType"`
}

// ReceiveAnswer returns msgs as `aws sqs receive-message` prints them
// ({"Messages": [...]}, indented by four spaces), the form `idem inspect
// --sqs-event` reads.
func ReceiveAnswer(msgs []types.Message) ([]byte, error) {
	doc := struct {
		Messages []cliMessage `json:"Messages"`
	}{Messages: make([]cliMessage, 0, len(msgs))}
	for _, m := range msgs {
		c := cliMessage{
			MessageID: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			MD5OfBody: aws.ToString(m.MD5OfBody), Body: aws.ToString(m.Body), Attributes: m.Attributes,
			MD5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		}
		if len(m.MessageAttributes) > 0 {
			c.MessageAttributes = make(map[string]cliAttribute, len(m.MessageAttributes))
			for k, v := range m.MessageAttributes {
				c.MessageAttributes[k] = cliAttribute{StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType)}
			}
		}
		doc.Messages = append(doc.Messages, c)
	}
	return json.MarshalIndent(doc, "", "    ")
}

// DepthAPI is the part of the SQS client Depth calls.
type DepthAPI interface {
	// GetQueueAttributes reads the queue's message counts.
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Depth returns how many messages the queue at url holds: visible, and in flight (received
// and not yet deleted or visible again); SQS's approximate counts.
func Depth(ctx context.Context, client DepthAPI, url string) (visible, inFlight int, err error) {
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		return 0, 0, fmt.Errorf("dlq: depth of %s: %w", url, err)
	}
	visible, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	inFlight, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible, inFlight, nil
}

// SourceAPI is the part of the SQS client SourceQueue calls.
type SourceAPI interface {
	// ListDeadLetterSourceQueues lists the queues whose redrive policy
	// names a dead-letter queue.
	ListDeadLetterSourceQueues(ctx context.Context, in *sqs.ListDeadLetterSourceQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error)
}

// ErrNoSingleSource is the error, checked with errors.Is, of SourceQueue
// for a dead-letter queue that no queue, or more than one, sends to: the
// caller must name the queue to redrive to.
var ErrNoSingleSource = errors.New("dlq: not the dead-letter queue of exactly one queue")

// SourceQueue returns the URL of the one queue whose redrive policy sends
// to the dead-letter queue at dlqURL. The error wraps ErrNoSingleSource when
// there is none or more than one.
func SourceQueue(ctx context.Context, client SourceAPI, dlqURL string) (string, error) {
	var urls []string
	p := sqs.NewListDeadLetterSourceQueuesPaginator(client, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(dlqURL)})
	for p.HasMorePages() && len(urls) < 2 {
		out, err := p.NextPage(ctx)
		if err != nil {
			return "", fmt.Errorf("dlq: source queues of %s: %w", dlqURL, err)
		}
		urls = append(urls, out.QueueUrls...)
	}
	if len(urls) != 1 {
		return "", fmt.Errorf("%w: %d queue(s) send to %s", ErrNoSingleSource, len(urls), dlqURL)
	}
	return urls[0], nil
}

// RedriveAPI is the part of the SQS client Redrive calls.
type RedriveAPI interface {
	// ReceiveMessage takes messages from the dead-letter queue.
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	// SendMessage sends one to the source queue.
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	// DeleteMessage deletes it from the dead-letter queue once sent.
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Redrive moves the messages of the dead-letter queue dlqURL to the queue
// queueURL, as StartMessageMoveTask does: each body is sent with its
// message attributes (and, from a FIFO queue, its group and deduplication
// ids) as a new message (a new message id, a receive count that starts
// again), then deleted from the dead-letter queue; a message is never
// deleted before its copy is sent. It receives (with a one-second long
// poll) until a receive comes back empty, and returns how many it moved.
// After an error, the messages moved so far stay moved; one received but
// not yet sent reappears in the dead-letter queue after its visibility
// timeout of 30 s.
func Redrive(ctx context.Context, client RedriveAPI, dlqURL, queueURL string) (int, error) {
	moved := 0
	for {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(dlqURL), MaxNumberOfMessages: MaxPeek, VisibilityTimeout: 30, WaitTimeSeconds: waitSeconds,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			return moved, fmt.Errorf("dlq: redrive: receive from %s: %w", dlqURL, err)
		}
		if len(out.Messages) == 0 {
			return moved, nil
		}
		for _, m := range out.Messages {
			if err := Move(ctx, client, m, dlqURL, queueURL); err != nil {
				return moved, err
			}
			moved++
		}
	}
}

// MoveAPI is the part of the SQS client Move calls.
type MoveAPI interface {
	// SendMessage sends the message to the source queue.
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	// DeleteMessage deletes it from the dead-letter queue once sent.
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Move sends m, received from dlqURL, to queueURL as a new message (its
// body and message attributes, and from a FIFO queue its group and
// deduplication ids), then deletes it from dlqURL: never before its copy
// is sent. After an error of the delete, the message is in both queues.
func Move(ctx context.Context, client MoveAPI, m types.Message, dlqURL, queueURL string) error {
	in := &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: m.Body, MessageAttributes: m.MessageAttributes}
	if g, ok := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]; ok {
		in.MessageGroupId = aws.String(g)
		in.MessageDeduplicationId = aws.String(m.Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)])
	}
	if _, err := client.SendMessage(ctx, in); err != nil {
		return fmt.Errorf("dlq: redrive: send to %s: %w", queueURL, err)
	}
	if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(dlqURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
		return fmt.Errorf("dlq: redrive: delete from %s: %w", dlqURL, err)
	}
	return nil
}

// EventMessage returns m as a Lambda SQS event's record carries it
// (events.SQSMessage: id, receipt handle, body, system attributes and
// message attributes), for the key sources and the key configurations
// that read a message as the wrappers do.
func EventMessage(m types.Message) events.SQSMessage {
	em := events.SQSMessage{
		MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
		Md5OfBody: aws.ToString(m.MD5OfBody), Attributes: maps.Clone(m.Attributes),
	}
	if len(m.MessageAttributes) > 0 {
		em.MessageAttributes = make(map[string]events.SQSMessageAttribute, len(m.MessageAttributes))
		for name, a := range m.MessageAttributes {
			em.MessageAttributes[name] = events.SQSMessageAttribute{StringValue: a.StringValue, BinaryValue: a.BinaryValue, DataType: aws.ToString(a.DataType)}
		}
	}
	return em
}
