package esm

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// QueueAPI is the part of the SQS client CreateQueues calls; *sqs.Client implements it.
type QueueAPI interface {
	// CreateQueue creates a queue.
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	// GetQueueAttributes reads a queue's ARN.
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// QueueConfig configures the queues CreateQueues creates.
type QueueConfig struct {
	// VisibilityTimeout is the source queue's visibility timeout, whole seconds.
	VisibilityTimeout time.Duration
	// MaxReceiveCount is the redrive policy's maxReceiveCount: the receives after which
	// the queue moves a message to the dead-letter queue (at least 1).
	MaxReceiveCount int
	// FIFO makes both queues FIFO queues, with content-based deduplication.
	FIFO bool
}

// Queues are a source queue and its dead-letter queue.
type Queues struct {
	// URL and ARN are the source queue's.
	URL, ARN string
	// DLQURL and DLQARN are the dead-letter queue's.
	DLQURL, DLQARN string
}

// CreateQueues creates the dead-letter queue name+"-dlq" and the queue name, whose redrive
// policy sends a message to the dead-letter queue after cfg.MaxReceiveCount receives. FIFO
// queue names get the ".fifo" suffix.
func CreateQueues(ctx context.Context, client QueueAPI, name string, cfg QueueConfig) (Queues, error) {
	if cfg.MaxReceiveCount < 1 || cfg.VisibilityTimeout < 0 || cfg.VisibilityTimeout%time.Second != 0 {
		return Queues{}, fmt.Errorf("esm: queue config %+v: want a maxReceiveCount of at least 1 and a visibility timeout in whole seconds", cfg)
	}
	suffix, attrs := "", map[string]string{}
	if cfg.FIFO {
		suffix = ".fifo"
		attrs[string(types.QueueAttributeNameFifoQueue)] = "true"
		attrs[string(types.QueueAttributeNameContentBasedDeduplication)] = "true"
	}
	var q Queues
	var err error
	if q.DLQURL, q.DLQARN, err = createQueue(ctx, client, name+"-dlq"+suffix, attrs); err != nil {
		return Queues{}, err
	}
	policy, err := json.Marshal(map[string]any{"deadLetterTargetArn": q.DLQARN, "maxReceiveCount": cfg.MaxReceiveCount})
	if err != nil {
		return Queues{}, err
	}
	attrs[string(types.QueueAttributeNameRedrivePolicy)] = string(policy)
	attrs[string(types.QueueAttributeNameVisibilityTimeout)] = strconv.Itoa(int(cfg.VisibilityTimeout / time.Second))
	if q.URL, q.ARN, err = createQueue(ctx, client, name+suffix, attrs); err != nil {
		return Queues{}, err
	}
	return q, nil
}

func createQueue(ctx context.Context, client QueueAPI, name string, attrs map[string]string) (url, arn string, err error) {
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", "", fmt.Errorf("esm: create queue %s: %w", name, err)
	}
	a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: out.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", "", fmt.Errorf("esm: queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), a.Attributes[string(types.QueueAttributeNameQueueArn)], nil
}

// RedriveAPI is the part of the SQS client Redrive calls; *sqs.Client implements it.
type RedriveAPI interface {
	// ReceiveMessage takes messages from the dead-letter queue.
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	// SendMessage sends one to the source queue.
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	// DeleteMessage deletes it from the dead-letter queue once sent.
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Redrive moves the messages of the dead-letter queue dlqURL to the queue queueURL, as
// StartMessageMoveTask does: each body is sent with its message attributes (and, from a FIFO
// queue, its group and deduplication ids) as a new message (a new message id, a receive count
// that starts again), then deleted from the dead-letter queue. It receives without waiting until a receive
// comes back empty (on SQS, a short poll may miss messages; moto's sees them all) and returns
// how many it moved.
func Redrive(ctx context.Context, client RedriveAPI, dlqURL, queueURL string) (int, error) {
	moved := 0
	for {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(dlqURL), MaxNumberOfMessages: 10, VisibilityTimeout: 30,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			return moved, fmt.Errorf("esm: redrive: receive from %s: %w", dlqURL, err)
		}
		if len(out.Messages) == 0 {
			return moved, nil
		}
		for _, m := range out.Messages {
			in := &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: m.Body, MessageAttributes: m.MessageAttributes}
			if g, ok := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]; ok {
				in.MessageGroupId = aws.String(g)
				in.MessageDeduplicationId = aws.String(m.Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)])
			}
			if _, err := client.SendMessage(ctx, in); err != nil {
				return moved, fmt.Errorf("esm: redrive: send to %s: %w", queueURL, err)
			}
			if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(dlqURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				return moved, fmt.Errorf("esm: redrive: delete from %s: %w", dlqURL, err)
			}
			moved++
		}
	}
}

// PeekAPI is the part of the SQS client Peek calls; *sqs.Client implements it.
type PeekAPI interface {
	// ReceiveMessage receives the messages.
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	// ChangeMessageVisibility makes each visible again at once.
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// Peek receives up to 10 messages of the queue at url with every attribute and leaves them
// visible, as `aws sqs receive-message --visibility-timeout 0` does: the SDK does not send a
// zero VisibilityTimeout, so each message is made visible again with ChangeMessageVisibility.
// Each receive counts in the messages' ApproximateReceiveCount, as on SQS.
func Peek(ctx context.Context, client PeekAPI, url string) ([]types.Message, error) {
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return nil, fmt.Errorf("esm: peek at %s: %w", url, err)
	}
	for _, m := range out.Messages {
		if _, err := client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0,
		}); err != nil {
			return nil, fmt.Errorf("esm: peek at %s: %w", url, err)
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

// ReceiveAnswer returns msgs as `aws sqs receive-message` prints them ({"Messages": [...]},
// indented by four spaces), the form `idem inspect --sqs-event` reads.
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
