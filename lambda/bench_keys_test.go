package idemlambda_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
)

// BenchmarkSQSMessageChosen measures what the keys and fingerprints users
// choose cost on top of BenchmarkSQSMessage/json: a fingerprint selection,
// an SNS envelope, an EventBridge envelope (one canonicalization of the
// payload each, as without them).
func BenchmarkSQSMessageChosen(b *testing.B) {
	b.Run("selection", func(b *testing.B) {
		benchSQS(b, idemlambda.KeyFromBodyField("event_id"), benchBody,
			idemlambda.WithFingerprintSelection(core.IgnoreFields("published_at", "trace")))
	})
	b.Run("sns", func(b *testing.B) {
		benchSQS(b, idemlambda.KeyFromBodyField("event_id"), func(i int) string {
			msg, _ := json.Marshal(benchBody(i))
			return fmt.Sprintf(`{"Type":"Notification","MessageId":"sns-%d","TopicArn":"arn:aws:sns:eu-west-1:123456789012:orders",`+
				`"Message":%s,"Timestamp":"2030-01-02T03:04:05.000Z","SignatureVersion":"1","Signature":"c2ln"}`, i, msg)
		}, idemlambda.WithEnvelope(idemlambda.SNSEnvelope()))
	})
	b.Run("eventbridge", func(b *testing.B) {
		benchSQS(b, idemlambda.KeyFromBodyField("event_id"), func(i int) string {
			return fmt.Sprintf(`{"version":"0","id":"eb-%d","detail-type":"OrderPlaced","source":"com.example.orders","account":"123456789012",`+
				`"time":"2030-01-02T03:04:05Z","region":"eu-west-1","resources":[],"detail":%s}`, i, benchBody(i))
		}, idemlambda.WithEnvelope(idemlambda.EventBridgeEnvelope()))
	})
}
