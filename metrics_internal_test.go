package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/core"
)

// TestDefaultObserverInLambda: with no observer configured, a Runner in
// Lambda counts every call that did not succeed as an EMF document of the
// metric Calls (dimensions FunctionName and Verdict) at the verdict's
// level, and writes nothing for a success; outside Lambda it records
// nothing.
func TestDefaultObserverInLambda(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	o := defaultObserver(env(map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "orders-consumer"}), &buf, func() time.Time { return t0 })
	for _, v := range Verdicts() {
		o.Observe(context.Background(), Observation{Verdict: v, KeyHash: "0123456789abcdef"})
	}
	var counted []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var doc struct {
			AWS struct {
				Timestamp int64
				Metrics   []struct {
					Namespace  string
					Dimensions [][]string
					Metrics    []struct{ Name, Unit string }
				} `json:"CloudWatchMetrics"`
			} `json:"_aws"`
			Level, FunctionName, Verdict, KeyHash string
			Calls                                 int
		}
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		m := doc.AWS.Metrics
		if doc.AWS.Timestamp != t0.UnixMilli() || len(m) != 1 || m[0].Namespace != DefaultMetricsNamespace ||
			len(m[0].Dimensions) != 1 || strings.Join(m[0].Dimensions[0], ",") != "FunctionName,Verdict" ||
			len(m[0].Metrics) != 1 || m[0].Metrics[0].Name != "Calls" || m[0].Metrics[0].Unit != "Count" {
			t.Errorf("line %q: not a count of Calls by FunctionName and Verdict in %q at %d", line, DefaultMetricsNamespace, t0.UnixMilli())
		}
		v := verdictNamed(doc.Verdict)
		if doc.Calls != 1 || doc.FunctionName != "orders-consumer" || doc.Level != LambdaLevel(v.Level()) {
			t.Errorf("line %q: want Calls 1, FunctionName orders-consumer, level %s", line, LambdaLevel(v.Level()))
		}
		counted = append(counted, doc.Verdict)
	}
	var want []string
	for _, v := range Verdicts() {
		if v != Executed && v != Replayed && v != Unkeyed {
			want = append(want, v.String())
		}
	}
	if strings.Join(counted, ",") != strings.Join(want, ",") {
		t.Errorf("counted %v, want every verdict but a success: %v", counted, want)
	}

	if o := defaultObserver(env(nil), &buf, time.Now); o != NoObserver {
		t.Errorf("outside Lambda: %T, want NoObserver", o)
	}
}

func verdictNamed(name string) Verdict {
	for _, v := range Verdicts() {
		if v.String() == name {
			return v
		}
	}
	return VerdictUnknown
}

// TestNewCountsByDefaultInLambda: a Runner that no option gives an observer
// counts its failures in Lambda; WithObserver(NoObserver) turns that off.
func TestNewCountsByDefaultInLambda(t *testing.T) {
	defer func(g func(string) string) { osGetenv = g }(osGetenv)
	osGetenv = env(map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "orders-consumer"})
	failing := func(context.Context) ([]byte, error) {
		return nil, core.MarkPermanent(errors.New("smtp: 550 mailbox unavailable"))
	}
	for _, tc := range []struct {
		name    string
		opts    []Option
		counted bool
	}{
		{"no observer", nil, true},
		{"NoObserver", []Option{WithObserver(NoObserver)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(oneKeyStore{}, append(tc.opts, WithLogger(slog.New(slog.DiscardHandler)))...)
			if err != nil {
				t.Fatal(err)
			}
			_, lm := r.cfg.observer.(*lambdaMetrics)
			if lm != tc.counted {
				t.Fatalf("observer %T, want the default Lambda metrics: %v", r.cfg.observer, tc.counted)
			}
			if !tc.counted {
				return
			}
			var buf bytes.Buffer
			r.cfg.observer.(*lambdaMetrics).w = &buf
			if _, err := r.Do(context.Background(), "evt:1:notify", []byte(`{}`), failing); !errors.As(err, new(*core.FailureError)) {
				t.Fatalf("Do = %v, want a permanent failure", err)
			}
			if !strings.Contains(buf.String(), `"Verdict":"failed_permanently"`) {
				t.Errorf("metrics %q, want a count of failed_permanently", buf.String())
			}
		})
	}
}

// oneKeyStore accepts every write and holds nothing: enough for one call.
type oneKeyStore struct{}

func (oneKeyStore) Reserve(context.Context, core.Record, *core.Record, time.Time) error { return nil }
func (oneKeyStore) Complete(_ context.Context, rec core.Record) (core.Record, error) {
	return rec, nil
}
func (oneKeyStore) Get(context.Context, string, time.Time) (core.Record, error) {
	return core.Record{}, ErrNotFound
}
