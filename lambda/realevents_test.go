package idemlambda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
)

// The shapes below are the ones AWS sends, field for field (names, case,
// layout); only the values are made up. SNS writes the notification it
// delivers to a queue without raw message delivery pretty-printed, with
// " : " between names and values, and SigningCertURL / UnsubscribeURL in
// upper case; the same notification delivered to a function has
// SigningCertUrl / UnsubscribeUrl and a nullable Subject.

const (
	topicARN = "arn:aws:sns:eu-west-1:123456789012:order-events"
	subARN   = topicARN + ":2f0c8c57-43b4-4c9f-8c2e-2bd3b7c6f1a9"
)

// snsPublish is one publish of a message to the topic: what differs between
// two publishes of the same event is everything but Message and its
// attributes.
type snsPublish struct {
	messageID, timestamp, signature string
	message                         string
	attrs                           map[string]string // String attributes
}

// sqsBody is the body SNS delivers to a subscribed queue without raw
// message delivery.
func (p snsPublish) sqsBody() string {
	msg, _ := json.Marshal(p.message)
	var attrs []string
	for name, v := range p.attrs {
		attrs = append(attrs, fmt.Sprintf(`    %q : {"Type":"String","Value":%q}`, name, v))
	}
	b := "{\n" +
		"  \"Type\" : \"Notification\",\n" +
		"  \"MessageId\" : \"" + p.messageID + "\",\n" +
		"  \"TopicArn\" : \"" + topicARN + "\",\n" +
		"  \"Message\" : " + string(msg) + ",\n" +
		"  \"Timestamp\" : \"" + p.timestamp + "\",\n" +
		"  \"SignatureVersion\" : \"1\",\n" +
		"  \"Signature\" : \"" + p.signature + "\",\n" +
		"  \"SigningCertURL\" : \"https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-9c6465fa7f48f5cacd23014631ec1136.pem\",\n" +
		"  \"UnsubscribeURL\" : \"https://sns.eu-west-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=" + subARN + "\""
	if len(attrs) > 0 {
		b += ",\n  \"MessageAttributes\" : {\n" + strings.Join(attrs, ",\n") + "\n  }"
	}
	return b + "\n}"
}

// lambdaRecord is the record SNS sends when it invokes a function,
// decoded by aws-lambda-go as lambda.Start would.
func (p snsPublish) lambdaEvent(t testing.TB) events.SNSEvent {
	t.Helper()
	msg, _ := json.Marshal(p.message)
	attrs := []string{}
	for name, v := range p.attrs {
		attrs = append(attrs, fmt.Sprintf(`%q: {"Type": "String", "Value": %q}`, name, v))
	}
	raw := `{"Records": [{
		"EventSource": "aws:sns",
		"EventVersion": "1.0",
		"EventSubscriptionArn": "` + subARN + `",
		"Sns": {
			"Type": "Notification",
			"MessageId": "` + p.messageID + `",
			"TopicArn": "` + topicARN + `",
			"Subject": null,
			"Message": ` + string(msg) + `,
			"Timestamp": "` + p.timestamp + `",
			"SignatureVersion": "1",
			"Signature": "` + p.signature + `",
			"SigningCertUrl": "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-9c6465fa7f48f5cacd23014631ec1136.pem",
			"UnsubscribeUrl": "https://sns.eu-west-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=` + subARN + `",
			"MessageAttributes": {` + strings.Join(attrs, ", ") + `}
		}
	}]}`
	var ev events.SNSEvent
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		t.Fatalf("SNS event: %v", err)
	}
	return ev
}

// ebEvent is an EventBridge event as a rule delivers it to a target
// without an input transformer.
func ebEvent(id, time, detailType, detail string) string {
	return `{"version":"0","id":"` + id + `","detail-type":"` + detailType + `","source":"com.example.orders",` +
		`"account":"123456789012","time":"` + time + `","region":"eu-west-1",` +
		`"resources":["arn:aws:dynamodb:eu-west-1:123456789012:table/orders"],"detail":` + detail + `}`
}

// verdictLog records the runner's verdicts, in order; safe for concurrent
// use.
type verdictLog struct{ rec observed }

func (v *verdictLog) Observe(ctx context.Context, o idem.Observation) { v.rec.Observe(ctx, o) }

// take returns the verdicts recorded since the last take.
func (v *verdictLog) take() []idem.Verdict {
	var got []idem.Verdict
	for _, o := range v.rec.take() {
		got = append(got, o.Verdict)
	}
	return got
}

// observedEnv returns an env whose runner reports its verdicts to the
// returned recorder.
func observedEnv(t testing.TB, opts ...idem.Option) (*env, *verdictLog) {
	v := &verdictLog{}
	return newEnv(t, append([]idem.Option{idem.WithObserver(v)}, opts...)...), v
}
