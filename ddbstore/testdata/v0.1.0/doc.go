// Package idem makes handlers safe under at-least-once delivery: every
// business event gets a stable key, the outcome of its first execution is
// recorded, and a duplicate gets the recorded outcome instead of running the
// handler again.
//
// A Runner does the work over a Store: it validates the key, fingerprints
// the payload, reserves the key atomically before the handler runs, retries
// transient errors with bounded, jittered backoff within the context's
// deadline, and records the outcome, fenced by the lease token so that a
// holder whose lease was taken over cannot overwrite its successor. The pure
// decision logic lives in package core; stores live in memstore (one
// process, for tests and demos) and ddbstore (DynamoDB); the Lambda wrappers
// live in package lambda.
//
// What idem does not promise: exactly-once execution. A crash after the
// handler's side effect but before its outcome is recorded means the key is
// taken over, and the handler run again, once its lease ends. Duplicate
// deliveries produce no duplicate side effects for side effects that are
// themselves idempotent (downstream idempotency keys) or committed with the
// record.
package idem
