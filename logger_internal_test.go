package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// env returns a getenv over vars.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// TestDefaultLoggerInLambda: in Lambda the default logger follows the
// function's logging controls (AWS_LAMBDA_LOG_FORMAT, AWS_LAMBDA_LOG_LEVEL)
// as a provided.al2023 function must: JSON records with the keys Lambda
// reads, at the level Lambda asks, WARN when nothing asks.
func TestDefaultLoggerInLambda(t *testing.T) {
	fn := map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "orders-consumer"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		text    bool
		written []slog.Level // of DEBUG-4, DEBUG, INFO, WARN, ERROR, ERROR+4
	}{
		{name: "JSON format, no level: WARN and above", env: fn, written: []slog.Level{slog.LevelWarn, slog.LevelError, levelFatal}},
		{name: "JSON format, INFO (Lambda's default with JSON)", env: with("AWS_LAMBDA_LOG_FORMAT", "JSON", "AWS_LAMBDA_LOG_LEVEL", "INFO"),
			written: []slog.Level{slog.LevelInfo, slog.LevelWarn, slog.LevelError, levelFatal}},
		{name: "JSON format, ERROR", env: with("AWS_LAMBDA_LOG_FORMAT", "JSON", "AWS_LAMBDA_LOG_LEVEL", "ERROR"), written: []slog.Level{slog.LevelError, levelFatal}},
		{name: "JSON format, TRACE, any case", env: with("AWS_LAMBDA_LOG_FORMAT", "json", "AWS_LAMBDA_LOG_LEVEL", "trace"),
			written: []slog.Level{levelTrace, slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError, levelFatal}},
		{name: "an unknown level: WARN", env: with("AWS_LAMBDA_LOG_FORMAT", "JSON", "AWS_LAMBDA_LOG_LEVEL", "VERBOSE"), written: []slog.Level{slog.LevelWarn, slog.LevelError, levelFatal}},
		{name: "Text format: text, WARN and above", env: with("AWS_LAMBDA_LOG_FORMAT", "Text"), text: true, written: []slog.Level{slog.LevelWarn, slog.LevelError, levelFatal}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := defaultLogger(env(tc.env), &buf)
			for _, lv := range []slog.Level{levelTrace, slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError, levelFatal} {
				l.LogAttrs(context.Background(), lv, "idem", slog.String("verdict", "v"), slog.String("key_hash", "0123"))
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(lines) != len(tc.written) {
				t.Fatalf("%d records, want %d: %s", len(lines), len(tc.written), buf.String())
			}
			for i, line := range lines {
				want := LambdaLevel(tc.written[i])
				if tc.text {
					if !strings.Contains(line, "level="+want) || !strings.Contains(line, "message=idem") || !strings.HasPrefix(line, "timestamp=") || strings.HasPrefix(line, "{") {
						t.Errorf("line %d = %q, want a text record at %s", i, line, want)
					}
					continue
				}
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("line %d is not JSON: %q", i, line)
				}
				ts, _ := rec["timestamp"].(string)
				if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || rec["level"] != want || rec["message"] != "idem" || rec["verdict"] != "v" {
					t.Errorf("record %d = %v, want timestamp (RFC 3339), level %s, message, attributes", i, rec, want)
				}
			}
		})
	}
}

// TestDefaultLoggerElsewhere: outside Lambda, the default logger hands the
// records from WARN up to slog.Default's handler.
func TestDefaultLoggerElsewhere(t *testing.T) {
	var buf bytes.Buffer
	saved := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(saved)
	var out bytes.Buffer
	l := defaultLogger(env(nil), &out)
	l.Info("idem", "verdict", "executed")
	l.With("wrapper", "sqs").Warn("idem", "verdict", "key_reused")
	if out.Len() != 0 {
		t.Errorf("wrote to standard output outside Lambda: %s", out.String())
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"verdict":"key_reused"`) || !strings.Contains(lines[0], `"wrapper":"sqs"`) {
		t.Errorf("slog.Default got %q, want the warning only", buf.String())
	}
}
