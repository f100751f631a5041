package idemtest

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Where the events come from: the region and account of every ARN the
// builders write.
const (
	// Region is the AWS region of the events' ARNs.
	Region = "us-east-1"
	// Account is the AWS account of the events' ARNs.
	Account = "123456789012"
)

// QueueARN is the queue of the SQS messages the builders make.
const QueueARN = "arn:aws:sqs:" + Region + ":" + Account + ":orders"

// SentAt is when the builders' messages, records and events were sent (a
// fixed instant, so that events built twice are equal).
var SentAt = time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)

// SQSMessage returns a message of a standard queue as Lambda's SQS event
// source delivers it the first time: messageId id, the body, the
// attributes Lambda passes (ApproximateReceiveCount 1, SentTimestamp,
// SenderId, ApproximateFirstReceiveTimestamp), eventSource aws:sqs and the
// queue's ARN (QueueARN). Pass it to Redelivered for a later delivery of
// the same message.
func SQSMessage(id, body string) events.SQSMessage {
	sent := strconv.FormatInt(SentAt.UnixMilli(), 10)
	return events.SQSMessage{
		MessageId:     id,
		ReceiptHandle: "AQEB" + id + "-1",
		Body:          body,
		Attributes: map[string]string{
			"ApproximateReceiveCount":          "1",
			"SentTimestamp":                    sent,
			"SenderId":                         "AROAEXAMPLEROLEID:orders-api",
			"ApproximateFirstReceiveTimestamp": sent,
		},
		MessageAttributes: map[string]events.SQSMessageAttribute{},
		EventSource:       "aws:sqs",
		EventSourceARN:    QueueARN,
		AWSRegion:         Region,
	}
}

// SQSFIFOMessage returns a message of a FIFO queue (QueueARN with .fifo)
// as Lambda delivers it the first time: SQSMessage's fields, and the
// message group id, the deduplication id and a sequence number among its
// attributes.
func SQSFIFOMessage(id, body, groupID, deduplicationID string) events.SQSMessage {
	m := SQSMessage(id, body)
	m.EventSourceARN = QueueARN + ".fifo"
	m.Attributes["MessageGroupId"] = groupID
	m.Attributes["MessageDeduplicationId"] = deduplicationID
	m.Attributes["SequenceNumber"] = "18849496460467696128"
	return m
}

// Redelivered returns msg as SQS delivers it for the receive-th time (2
// for the first redelivery, after a visibility timeout): the same message
// id and body, ApproximateReceiveCount receive and a new receipt handle.
// The attributes are copied; msg is left as it was.
func Redelivered(msg events.SQSMessage, receive int) events.SQSMessage {
	attrs := make(map[string]string, len(msg.Attributes))
	for k, v := range msg.Attributes {
		attrs[k] = v
	}
	attrs["ApproximateReceiveCount"] = strconv.Itoa(receive)
	msg.Attributes = attrs
	msg.ReceiptHandle = "AQEB" + msg.MessageId + "-" + strconv.Itoa(receive)
	return msg
}

// SQSEvent returns the event of one invocation of Lambda's SQS event
// source: a batch of msgs, in order.
func SQSEvent(msgs ...events.SQSMessage) events.SQSEvent {
	return events.SQSEvent{Records: msgs}
}

// TopicARN is the SNS topic of the builders' notifications.
const TopicARN = "arn:aws:sns:" + Region + ":" + Account + ":order-events"

// subscriptionARN is the subscription that delivers them.
const subscriptionARN = TopicARN + ":2f0c8c57-43b4-4c9f-8c2e-2bd3b7c6f1a9"

const (
	signingCertURL = "https://sns." + Region + ".amazonaws.com/SimpleNotificationService-9c6465fa7f48f5cacd23014631ec1136.pem"
	unsubscribeURL = "https://sns." + Region + ".amazonaws.com/?Action=Unsubscribe&SubscriptionArn=" + subscriptionARN
)

// SNSRecord returns the record SNS sends when it invokes a function for
// the publish messageID of message to TopicARN (for idemlambda.SNS).
func SNSRecord(messageID, message string) events.SNSEventRecord {
	return events.SNSEventRecord{
		EventVersion:         "1.0",
		EventSubscriptionArn: subscriptionARN,
		EventSource:          "aws:sns",
		SNS: events.SNSEntity{
			Type: "Notification", MessageID: messageID, TopicArn: TopicARN, Message: message,
			Timestamp: SentAt, SignatureVersion: "1", Signature: "EXAMPLEpH+" + messageID,
			SigningCertURL: signingCertURL, UnsubscribeURL: unsubscribeURL,
			MessageAttributes: map[string]any{},
		},
	}
}

// SNSEvent returns the event of one invocation by SNS (one record per
// invocation, as SNS sends them).
func SNSEvent(rec events.SNSEventRecord) events.SNSEvent {
	return events.SNSEvent{Records: []events.SNSEventRecord{rec}}
}

// SNSEnvelope returns the body SNS gives an SQS queue subscribed to
// TopicARN without raw message delivery, for the publish messageID of
// message: the notification as JSON, pretty-printed with " : " as SNS
// writes it (for idemlambda.WithEnvelope(idemlambda.SNSEnvelope())).
func SNSEnvelope(messageID, message string) string {
	msg, _ := json.Marshal(message) // a string always marshals
	return "{\n" +
		"  \"Type\" : \"Notification\",\n" +
		"  \"MessageId\" : \"" + messageID + "\",\n" +
		"  \"TopicArn\" : \"" + TopicARN + "\",\n" +
		"  \"Message\" : " + string(msg) + ",\n" +
		"  \"Timestamp\" : \"" + SentAt.Format("2006-01-02T15:04:05.000Z") + "\",\n" +
		"  \"SignatureVersion\" : \"1\",\n" +
		"  \"Signature\" : \"EXAMPLEpH+" + messageID + "\",\n" +
		"  \"SigningCertURL\" : \"" + signingCertURL + "\",\n" +
		"  \"UnsubscribeURL\" : \"" + unsubscribeURL + "\"\n" +
		"}"
}

// EventBridgeEvent returns an event as an EventBridge rule delivers it to a
// function (for idemlambda.Typed): its id, source, detail-type and detail
// (JSON), the account, region and time of SentAt.
func EventBridgeEvent(id, source, detailType, detail string) events.EventBridgeEvent {
	return events.EventBridgeEvent{
		Version: "0", ID: id, DetailType: detailType, Source: source, AccountID: Account,
		Time: SentAt, Region: Region, Resources: []string{}, Detail: json.RawMessage(detail),
	}
}

// EventBridgeEnvelope returns the body an EventBridge rule gives an SQS
// queue target without an input transformer (for
// idemlambda.WithEnvelope(idemlambda.EventBridgeEnvelope())): the event's
// JSON with detail as given, so that a test can send a detail that is not
// JSON.
func EventBridgeEnvelope(id, source, detailType, detail string) string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) } // a string always marshals
	return `{"version":"0","id":` + q(id) + `,"detail-type":` + q(detailType) + `,"source":` + q(source) +
		`,"account":"` + Account + `","time":"` + SentAt.Format(time.RFC3339) + `","region":"` + Region +
		`","resources":[],"detail":` + detail + `}`
}
