package e2e

import (
	"encoding/json"
	"strings"
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

// jsonLines decodes the JSON objects of a function's log, one a line (the
// emulator's own lines and anything else are skipped).
func jsonLines(log string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(log, "\n") {
		i := strings.IndexByte(line, '{')
		var m map[string]any
		if i < 0 || json.Unmarshal([]byte(line[i:]), &m) != nil {
			continue
		}
		out = append(out, m)
	}
	return out
}

// logRecords are idem's log records in a function's log: the records that
// name a verdict (not the EMF documents, whose dimension is "Verdict").
func logRecords(log string) []map[string]any {
	var out []map[string]any
	for _, m := range jsonLines(log) {
		if _, ok := m["verdict"].(string); ok {
			out = append(out, m)
		}
	}
	return out
}

// emfDocuments are the EMF documents in a function's log.
func emfDocuments(log string) []map[string]any {
	var out []map[string]any
	for _, m := range jsonLines(log) {
		if _, ok := m["_aws"]; ok {
			out = append(out, m)
		}
	}
	return out
}
