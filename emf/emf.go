package emf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/idemgo/idem"
)

// DefaultNamespace is the CloudWatch namespace of the metrics.
const DefaultNamespace = "idem"

// Emitter is an idem.Observer that writes an EMF document per call. It is
// safe for concurrent use: each document is one Write of one line under a
// lock. Create it with New; the zero value is not usable.
type Emitter struct {
	mu        sync.Mutex // guards w
	w         io.Writer
	namespace string
	dimNames  []string
	dimValues []string
	now       func() time.Time
}

// Option configures an Emitter.
type Option func(*Emitter) error

// WithNamespace sets the metrics' namespace (1 to 255 characters; default
// DefaultNamespace).
func WithNamespace(ns string) Option {
	return func(e *Emitter) error {
		if ns == "" || len(ns) > 255 {
			return fmt.Errorf("emf: namespace must have 1 to 255 characters, got %d", len(ns))
		}
		e.namespace = ns
		return nil
	}
}

// WithDimension adds a dimension with a fixed value to every metric, such as
// the service or the function name. At most 8 (the verdict is the ninth, the
// specification's limit); names must not clash with the documents' members.
func WithDimension(name, value string) Option {
	return func(e *Emitter) error {
		if name == "" || len(name) > 255 || reserved[name] {
			return fmt.Errorf("emf: dimension name %q is empty, too long or reserved", name)
		}
		if len(e.dimNames) >= 8 {
			return errors.New("emf: at most 8 dimensions besides Verdict")
		}
		e.dimNames, e.dimValues = append(e.dimNames, name), append(e.dimValues, value)
		return nil
	}
}

// WithClock sets the clock of the documents' timestamps (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(e *Emitter) error {
		if now == nil {
			return errors.New("emf: nil clock")
		}
		e.now = now
		return nil
	}
}

// New returns an Emitter writing to w.
func New(w io.Writer, opts ...Option) (*Emitter, error) {
	if w == nil {
		return nil, errors.New("emf: nil writer")
	}
	e := &Emitter{w: w, namespace: DefaultNamespace, now: time.Now}
	for _, o := range opts {
		if err := o(e); err != nil {
			return nil, err
		}
	}
	return e, nil
}

var _ idem.Observer = (*Emitter)(nil)

type metric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// metrics are the document's metrics, in order, with their units.
var metrics = []metric{
	{"Calls", "Count"}, {"Executions", "Count"}, {"Replays", "Count"}, {"InProgress", "Count"},
	{"Takeovers", "Count"}, {"KeyReused", "Count"}, {"LeaseLost", "Count"}, {"OutcomesNotRecorded", "Count"},
	{"StoreCalls", "Count"}, {"Duration", "Milliseconds"}, {"StoreLatency", "Milliseconds"},
}

var reserved = map[string]bool{"_aws": true, "Verdict": true, "key_hash": true, "level": true, "timestamp": true}

func init() {
	for _, m := range metrics {
		reserved[m.Name] = true
	}
}

// Observe writes the document of one call. A write error is dropped: metrics
// must never fail the call they describe.
func (e *Emitter) Observe(_ context.Context, o idem.Observation) {
	b, err := json.Marshal(e.document(o))
	if err != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.w.Write(append(b, '\n'))
}

// document is the EMF document of one call. Its "level" and "timestamp"
// are those Lambda's log-level filtering of JSON lines reads: the level of
// the call's log record, and the time in RFC 3339, so that the document
// reaches CloudWatch whenever the record does.
func (e *Emitter) document(o idem.Observation) map[string]any {
	dims := append(append([]string(nil), e.dimNames...), "Verdict")
	now := e.now()
	doc := map[string]any{
		"timestamp": idem.LambdaTimestamp(now),
		"level":     idem.LambdaLevel(o.Level()),
		"_aws": map[string]any{
			"Timestamp": now.UnixMilli(),
			"CloudWatchMetrics": []map[string]any{{
				"Namespace": e.namespace, "Dimensions": [][]string{dims}, "Metrics": metrics,
			}},
		},
		"Verdict":             o.Verdict.String(),
		"key_hash":            o.KeyHash,
		"Calls":               1,
		"Executions":          count(o.Verdict.Ran()),
		"Replays":             count(replays[o.Verdict]),
		"InProgress":          count(o.Verdict == idem.InProgress),
		"Takeovers":           count(o.TookOver),
		"KeyReused":           count(o.Verdict == idem.KeyReused),
		"LeaseLost":           count(o.LeaseLost),
		"OutcomesNotRecorded": count(o.Verdict == idem.OutcomeNotRecorded),
		"StoreCalls":          o.StoreCalls,
		"Duration":            milliseconds(o.Duration),
		"StoreLatency":        milliseconds(o.StoreTime),
	}
	for i, n := range e.dimNames {
		doc[n] = e.dimValues[i]
	}
	return doc
}

// replays are the verdicts of a call answered from a record in the store
// without running the handler.
var replays = map[idem.Verdict]bool{idem.Replayed: true, idem.ReplayedFailure: true, idem.ReplayOmitted: true, idem.ReplayCorrupt: true}

func count(b bool) int {
	if b {
		return 1
	}
	return 0
}

func milliseconds(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
