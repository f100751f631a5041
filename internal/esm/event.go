package esm

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// sqsEvent is the event Lambda sends for a batch, field for field (aws-lambda-go's
// events.SQSEvent decodes it).
type sqsEvent struct {
	Records []sqsRecord `json:"Records"`
}

type sqsRecord struct {
	MessageID              string                  `json:"messageId"`
	ReceiptHandle          string                  `json:"receiptHandle"`
	Body                   string                  `json:"body"`
	Attributes             map[string]string       `json:"attributes"`
	MessageAttributes      map[string]sqsAttribute `json:"messageAttributes"`
	MD5OfMessageAttributes string                  `json:"md5OfMessageAttributes,omitempty"`
	MD5OfBody              string                  `json:"md5OfBody"`
	EventSource            string                  `json:"eventSource"`
	EventSourceARN         string                  `json:"eventSourceARN"`
	AWSRegion              string                  `json:"awsRegion"`
}

type sqsAttribute struct {
	StringValue      *string  `json:"stringValue,omitempty"`
	BinaryValue      []byte   `json:"binaryValue,omitempty"`
	StringListValues []string `json:"stringListValues"`
	BinaryListValues [][]byte `json:"binaryListValues"`
	DataType         string   `json:"dataType"`
}

// newEvent returns the event of the received msgs of the queue queueARN in region.
func newEvent(msgs []types.Message, queueARN, region string) sqsEvent {
	ev := sqsEvent{Records: make([]sqsRecord, 0, len(msgs))}
	for _, m := range msgs {
		attrs := make(map[string]string, len(m.Attributes))
		for k, v := range m.Attributes {
			attrs[k] = v
		}
		mattrs := make(map[string]sqsAttribute, len(m.MessageAttributes))
		for k, v := range m.MessageAttributes {
			mattrs[k] = sqsAttribute{
				StringValue:      v.StringValue,
				BinaryValue:      v.BinaryValue,
				StringListValues: append([]string{}, v.StringListValues...),
				BinaryListValues: append([][]byte{}, v.BinaryListValues...),
				DataType:         aws.ToString(v.DataType),
			}
		}
		ev.Records = append(ev.Records, sqsRecord{
			MessageID:              aws.ToString(m.MessageId),
			ReceiptHandle:          aws.ToString(m.ReceiptHandle),
			Body:                   aws.ToString(m.Body),
			Attributes:             attrs,
			MessageAttributes:      mattrs,
			MD5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
			MD5OfBody:              aws.ToString(m.MD5OfBody),
			EventSource:            "aws:sqs",
			EventSourceARN:         queueARN,
			AWSRegion:              region,
		})
	}
	return ev
}

// regionOf returns the region of an SQS queue ARN (arn:aws:sqs:REGION:ACCOUNT:NAME).
func regionOf(arn string) (string, error) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[3] == "" {
		return "", fmt.Errorf("esm: %q is not an SQS queue ARN", arn)
	}
	return parts[3], nil
}
