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
