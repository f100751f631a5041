package emf_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/emf"
	"github.com/idemgo/idem/internal/lambdalog"
	"github.com/idemgo/idem/memstore"
)

// stdout replaces os.Stdout with a file for the test (idem.DefaultLogger
// writes to os.Stdout as it is at each write) and returns a function that
// returns what was written since its last call.
func stdout(t *testing.T) func() string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = f
	t.Cleanup(func() { os.Stdout = old; _ = f.Close() })
	return func() string {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(0); err != nil {
			t.Fatal(err)
		}
		_, _ = f.Seek(0, io.SeekStart)
		return string(b)
	}
}

// TestDocumentsSurviveLogFiltering: in Lambda, with the JSON log format and
// at every ApplicationLogLevel, the Emitter's document of a call reaches
// CloudWatch exactly when the default logger's record of it does, under
// Lambda's published rule for JSON log lines (internal/lambdalog: a line
// without a valid RFC 3339 "timestamp" or a valid "level" is INFO,
// https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-log-level.html),
// for every verdict and for a misconfigured store (a record at ERROR
// whatever its verdict).
func TestDocumentsSurviveLogFiltering(t *testing.T) {
	read := stdout(t)
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return t0 }
	type call struct {
		name    string
		verdict idem.Verdict
		err     error
	}
	var calls []call
	for _, v := range idem.Verdicts() {
		calls = append(calls, call{v.String(), v, errors.New("declined")})
	}
	calls = append(calls, call{"store_failed, misconfigured", idem.StoreFailed, fmt.Errorf("table keyed otherwise: %w", idem.ErrMisconfigured)})
	for _, app := range lambdalog.Levels {
		t.Run(app, func(t *testing.T) {
			t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "orders-consumer")
			t.Setenv(idem.EnvLambdaLogFormat, "JSON")
			t.Setenv(idem.EnvLambdaLogLevel, app)
			var docs bytes.Buffer
			e, err := emf.New(&docs, emf.WithDimension("FunctionName", "orders-consumer"), emf.WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			r, err := idem.New(memstore.New(), idem.WithLogger(idem.DefaultLogger()), idem.WithObserver(e), idem.WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range calls {
				docs.Reset()
				_ = read()
				r.Report(context.Background(), "evt:1:notify", idem.Outcome{Verdict: c.verdict}, c.err)
				logs := read()
				record, _ := lambdalog.KeptLines(logs, app)
				count, n := lambdalog.KeptLines(docs.String(), app)
				if n != 1 {
					t.Errorf("%s: %d EMF documents, want 1:\n%s", c.name, n, docs.String())
					continue
				}
				if count != record {
					t.Errorf("%s at ApplicationLogLevel %s: %d log records and %d documents reach CloudWatch, want the same\nrecord:   %sdocument: %s",
						c.name, app, record, count, logs, docs.String())
				}
			}
		})
	}
}
