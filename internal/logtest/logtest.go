// Package logtest reads log output in tests: the JSON records a slog
// JSON handler writes, one a line.
package logtest

import (
	"encoding/json"
	"strings"
	"testing"
)

// JSONLines decodes each non-empty line of out as a JSON object, in order;
// a line that is not one fails the test.
func JSONLines(t testing.TB, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %v: %q", err, line)
		}
		recs = append(recs, m)
	}
	return recs
}
