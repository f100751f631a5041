// Package emf turns idem's observations into CloudWatch metrics through the
// Embedded Metric Format: an idem.Observer that writes one JSON document per
// call (and per verdict a wrapper reports without a call:
// idem.Runner.Report), on one line, to a writer (standard output in Lambda,
// which ships it to CloudWatch Logs, where the metrics are extracted without
// an API call).
//
// Each document carries the call's verdict (idem.Verdict's name) as a
// dimension (beside the dimensions given with WithDimension, such as the
// service or function name), so that Calls by Verdict counts every verdict,
// and these metrics, named after idem's one vocabulary: Calls, Executions
// (the handler ran), Replays (answered from the store), InProgress,
// Takeovers, KeyReused, LeaseLost, OutcomesNotRecorded, StoreCalls (Count)
// and Duration and StoreLatency (Milliseconds). The key's hash is a property, never a
// dimension (it would create a metric per key) and never the key itself.
//
// Each document also carries the level of the call's log record
// (idem.Observation.Level, named as Lambda names levels: "level") and the
// time in RFC 3339 ("timestamp"): with Lambda's JSON log format, a line
// without both counts as INFO and is dropped below the function's
// ApplicationLogLevel. So a document reaches CloudWatch whenever the call's
// log record does, at every ApplicationLogLevel: at WARN, the documents of
// successes (INFO) are dropped with their records, and those of every other
// verdict are kept.
//
// The package imports the standard library and idem only.
package emf
