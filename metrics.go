package idem

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"time"
)

// The default metrics: what a Runner counts when WithObserver gives it no
// observer, so that every verdict other than a success is counted with no
// configuration.

// DefaultMetricsNamespace is the CloudWatch namespace of the default
// metrics; it is also the emf package's default namespace.
const DefaultMetricsNamespace = "idem"

// NoObserver is an Observer that records nothing. WithObserver(NoObserver)
// turns the default metrics off.
var NoObserver Observer = noObserver{}

type noObserver struct{}

func (noObserver) Observe(context.Context, Observation) {}

// DefaultObserver returns the observer of a Runner that WithObserver gives
// none.
//
// In AWS Lambda (AWS_LAMBDA_FUNCTION_NAME or AWS_LAMBDA_RUNTIME_API is set),
// it writes one CloudWatch Embedded Metric Format document to standard
// output for every call whose verdict's level (Verdict.Level) is WARN or
// above: every verdict but executed, replayed and unkeyed. CloudWatch
// turns each into a count of 1 of the metric Calls in the namespace
// DefaultMetricsNamespace, with the dimensions FunctionName and Verdict:
// the same metric, under the same dimensions, as an emf.Emitter with
// emf.WithDimension("FunctionName", ...) counts for every call. The document
// carries the level of the call's log record (Observation.Level, as
// LambdaLevel names it, in "level") and the time in RFC 3339
// (LambdaTimestamp, in "timestamp"), which Lambda's log-level filtering of
// JSON lines needs to read that level: so the count reaches CloudWatch
// whenever the call's log record does, at every ApplicationLogLevel.
// A successful call writes nothing. Each verdict that occurs is a custom
// metric of the function (CloudWatch bills custom metrics per month); set
// WithObserver(NoObserver), or an observer of your own, to write none.
//
// Elsewhere it is NoObserver: outside Lambda, the default logger's records
// are what is left of the calls that did not succeed.
//
// The environment is read when DefaultObserver is called (by New).
func DefaultObserver() Observer {
	return defaultObserver(osGetenv, stdout{}, time.Now)
}

func defaultObserver(getenv func(string) string, w io.Writer, now func() time.Time) Observer {
	if !inLambda(getenv) {
		return NoObserver
	}
	return &lambdaMetrics{w: w, function: getenv("AWS_LAMBDA_FUNCTION_NAME"), now: now}
}

// lambdaMetrics is DefaultObserver in Lambda. Safe for concurrent use: each
// document is one Write of one line under mu.
type lambdaMetrics struct {
	mu       sync.Mutex // guards w
	w        io.Writer
	function string
	now      func() time.Time
}

// emfCount is the EMF document of one count of Calls.
type emfCount struct {
	AWS struct {
		Timestamp int64       `json:"Timestamp"`
		Metrics   []emfMetric `json:"CloudWatchMetrics"`
	} `json:"_aws"`
	Time     string `json:"timestamp"`
	Level    string `json:"level"`
	Function string `json:"FunctionName"`
	Verdict  string `json:"Verdict"`
	KeyHash  string `json:"key_hash,omitempty"`
	Calls    int    `json:"Calls"`
}

type emfMetric struct {
	Namespace  string              `json:"Namespace"`
	Dimensions [][]string          `json:"Dimensions"`
	Metrics    []map[string]string `json:"Metrics"`
}

var callsMetric = []emfMetric{{
	Namespace:  DefaultMetricsNamespace,
	Dimensions: [][]string{{"FunctionName", "Verdict"}},
	Metrics:    []map[string]string{{"Name": "Calls", "Unit": "Count"}},
}}

// Observe writes the count of a call that did not succeed. A write error is
// dropped: metrics never fail the call they describe.
func (m *lambdaMetrics) Observe(_ context.Context, o Observation) {
	level := o.Level()
	if level < slog.LevelWarn {
		return
	}
	now := m.now()
	doc := emfCount{Time: LambdaTimestamp(now), Level: LambdaLevel(level), Function: m.function, Verdict: o.Verdict.String(), KeyHash: o.KeyHash, Calls: 1}
	doc.AWS.Timestamp, doc.AWS.Metrics = now.UnixMilli(), callsMetric
	b, err := json.Marshal(doc)
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _ = m.w.Write(append(b, '\n'))
}
