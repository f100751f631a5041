// Package idemotel feeds idem's observations to OpenTelemetry: a span per
// call of idem.Runner.Do (named "idem", child of the span in the call's
// context, with the verdict, the key's hash and the attempt as attributes)
// and metrics: the counter idem.calls by verdict, and the histograms
// idem.call.duration and idem.store.duration in seconds.
//
// It is a module of its own (github.com/idemgo/idem/otel), so that
// OpenTelemetry never enters the module graph of idem's other packages.
package idemotel
