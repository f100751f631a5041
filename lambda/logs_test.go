package idemlambda_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemgo/idem"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/memstore"
)

func TestLogHandlerAddsTheInvocation(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(idemlambda.LogHandler(slog.NewJSONHandler(&buf, nil)))
	r, err := idem.New(memstore.New(), idem.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"req-1", "req-2"} {
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: id})
		if _, err := r.Do(ctx, "evt:l1:notify", []byte(`{"email":"jane@example.com"}`), func(context.Context) ([]byte, error) { return []byte(`1`), nil }); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d records, want 2: %s", len(lines), buf.String())
	}
	for i, want := range []struct {
		id      string
		cold    bool
		verdict string
	}{{"req-1", true, "executed"}, {"req-2", false, "replayed"}} {
		var rec map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["aws_request_id"] != want.id || rec["cold_start"] != want.cold || rec["verdict"] != want.verdict || rec["key_hash"] != idem.HashKey("evt:l1:notify") {
			t.Errorf("record %d = %s, want request %s cold %v verdict %s and the key's hash", i, lines[i], want.id, want.cold, want.verdict)
		}
	}
	if strings.Contains(buf.String(), "evt:l1") || strings.Contains(buf.String(), "jane") {
		t.Errorf("records carry the raw key or payload: %s", buf.String())
	}
}
