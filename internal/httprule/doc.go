// Package httprule holds the rules of idempotent HTTP requests that the
// AWS Lambda wrappers (package idemlambda) and the net/http middleware
// (package httpidem) share, each written once: the Idempotency-Key header
// and the stored key derived from it, the request fingerprint, which
// answers are stored, the wrappers' own answers (RFC 9457 problem details,
// the HTTP status table), the stored-response envelope and the stored key
// in a handler's context.
//
// It imports the standard library, core and the root package idem only, so
// that httpidem stays free of the AWS modules.
package httprule
