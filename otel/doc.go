// Package idemotel feeds idem to OpenTelemetry. Its Tracer (an
// idem.Tracer) records a span per call of idem.Runner.Do, started when the
// call starts (CallSpan, a child of the span in the call's context), with
// the key's hash, the verdict, the attempts and the call's flags, and a
// child span per store call the runner makes. Its Observer (an
// idem.Observer, and a Tracer too) adds the metrics: the counter idem.calls
// by verdict, and the histograms idem.call.duration and idem.store.duration
// in seconds.
//
// It is a module of its own (github.com/idemgo/idem/otel), so that
// OpenTelemetry never enters the module graph of idem's other packages.
package idemotel
