package idemlambda_test

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	idemlambda "github.com/idemgo/idem/lambda"
)

// FuzzUnwrap checks that no body makes an envelope panic, that every
// refusal wraps ErrNotEnveloped and ErrMissingKey, and that a message put
// in a notification (SNS messages are UTF-8), and a detail in an event,
// comes out as it went in.
func FuzzUnwrap(f *testing.F) {
	for _, s := range []struct{ body, message string }{
		{`{"Type":"Notification","MessageId":"m","TopicArn":"t","Message":"hi"}`, `{"order_id":"o-1"}`},
		{`{"version":"0","id":"e","detail-type":"T","source":"s","account":"1","detail":{"a":1}}`, "plain text \xff"},
		{`{"Type":"Notification","MessageId":"m","TopicArn":"t","Message":null}`, ""},
		{`{"id":"e","detail-type":"T","source":"s","detail":[1]}`, `{"a":[1,{"b":null}]}`},
		{`[`, "\u2028<&>"},
	} {
		f.Add(s.body, s.message)
	}
	envs := []idemlambda.Envelope{idemlambda.SNSEnvelope(), idemlambda.EventBridgeEnvelope()}
	f.Fuzz(func(t *testing.T, body, message string) {
		for _, env := range envs {
			m, err := env.Unwrap(events.SQSMessage{MessageId: "m-1", Body: body})
			if err != nil && (!errors.Is(err, idemlambda.ErrNotEnveloped) || !errors.Is(err, idemlambda.ErrMissingKey)) {
				t.Fatalf("%v: err %v does not wrap ErrNotEnveloped and ErrMissingKey", env, err)
			}
			if err == nil && m.MessageId != "m-1" {
				t.Fatalf("%v: message id %q", env, m.MessageId)
			}
		}
		msg, _ := json.Marshal(message)
		n := `{"Type":"Notification","MessageId":"m","TopicArn":"t","Message":` + string(msg) + `,"Timestamp":"2030-01-02T03:04:05.000Z"}`
		m, err := idemlambda.SNSEnvelope().Unwrap(events.SQSMessage{Body: n})
		if err != nil || (utf8.ValidString(message) && m.Body != message) {
			t.Fatalf("notification of %q: body %q, %v", message, m.Body, err)
		}
		if json.Valid([]byte(message)) && len(message) > 0 && message[0] == '{' {
			ev := `{"version":"0","id":"e","detail-type":"T","source":"s","account":"123456789012","time":"2030-01-02T03:04:05Z","detail":` + message + `}`
			if m, err := idemlambda.EventBridgeEnvelope().Unwrap(events.SQSMessage{Body: ev}); err != nil || m.Body != message {
				t.Fatalf("event of detail %s: body %q, %v", message, m.Body, err)
			}
		}
	})
}
