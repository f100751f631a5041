package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgo/idem/internal/lambdalog"
)

// TestDefaultMetricsSurviveLogFiltering: in Lambda, with the JSON log format
// and at every ApplicationLogLevel, the default observer's EMF document of a
// call reaches CloudWatch exactly when the default logger's record of it
// does, under Lambda's published rule for JSON log lines (internal/lambdalog:
// a line without a valid RFC 3339 "timestamp" or a valid "level" is INFO,
// https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-log-level.html).
// Every verdict the observer counts (all but a success) is checked, and a
// misconfigured store, whose record is ERROR whatever its verdict.
func TestDefaultMetricsSurviveLogFiltering(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return t0 }
	type call struct {
		name    string
		verdict Verdict
		err     error
	}
	var calls []call
	for _, v := range Verdicts() {
		if v.Level() >= DefaultLogLevel {
			calls = append(calls, call{v.String(), v, errors.New("declined")})
		}
	}
	calls = append(calls, call{"store_failed, misconfigured", StoreFailed, fmt.Errorf("table keyed otherwise: %w", ErrMisconfigured)})
	for _, app := range lambdalog.Levels {
		t.Run(app, func(t *testing.T) {
			getenv := env(map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "orders-consumer", EnvLambdaLogFormat: "JSON", EnvLambdaLogLevel: app})
			var logs, metrics bytes.Buffer
			r, err := New(oneKeyStore{}, WithLogger(defaultLogger(getenv, &logs)), WithObserver(defaultObserver(getenv, &metrics, clock)), WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range calls {
				logs.Reset()
				metrics.Reset()
				r.Report(context.Background(), "evt:1:notify", Outcome{Verdict: c.verdict}, c.err)
				record, _ := lambdalog.KeptLines(logs.String(), app)
				count, docs := lambdalog.KeptLines(metrics.String(), app)
				if docs != 1 {
					t.Errorf("%s: %d EMF documents, want 1:\n%s", c.name, docs, metrics.String())
					continue
				}
				if count != record {
					t.Errorf("%s at ApplicationLogLevel %s: %d log records and %d counts reach CloudWatch, want the same\nrecord: %scount:  %s",
						c.name, app, record, count, logs.String(), metrics.String())
				}
			}
		})
	}
}
