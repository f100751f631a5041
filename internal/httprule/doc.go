// Package httprule holds the rules of idempotent HTTP requests that the
// AWS Lambda wrappers (package idemlambda) and the net/http middleware
// (package httpidem) share, each written once: the Idempotency-Key header
// and the stored key derived from it, the request fingerprint, which
// answers are stored, the wrappers' own answers (RFC 9457 problem details,
// the HTTP status table), the stored-response envelope, and what a
// handler's context carries (the stored key; for a handler in this module,
// the request as keyed and fingerprinted, and the mark of an error that comes
// with the handler's own answer).
//
// It imports the standard library, core and the root package idem only, so
// that httpidem stays free of the AWS modules.
package httprule
