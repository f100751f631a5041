package e2e

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Error(err)
	}
	return b
}

func eventOf(msgs ...events.SQSMessage) events.SQSEvent { return events.SQSEvent{Records: msgs} }
