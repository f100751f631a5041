// Package idemlambda makes AWS Lambda handlers idempotent with an
// idem.Runner. It lives in the directory lambda/ (import path
// github.com/idemgo/idem/lambda) but is named idemlambda, so that it can be
// imported beside aws-lambda-go's own lambda package without an alias:
//
//	import (
//		"github.com/aws/aws-lambda-go/lambda"
//		idemlambda "github.com/idemgo/idem/lambda"
//	)
//
// Every constructor returns a plain typed handler that lambda.Start accepts
// as it is, and an error for a bad argument or option:
//
//   - SQS: one idempotent operation per message of an SQS batch, failures
//     reported as batchItemFailures (ReportBatchItemFailures); with
//     WithEnvelope, the message inside an SNS notification or an
//     EventBridge event.
//   - SNS: the same for an SNS topic that invokes the function, failures
//     returned as an error (*NotDoneError) for Lambda to retry.
//   - Kinesis and DynamoDBStream: one idempotent operation per record of
//     a Kinesis Data Streams or DynamoDB Streams batch, each shard in order;
//     the shard's first record that must be retried is reported as its
//     checkpoint (ReportBatchItemFailures).
//   - RESTAPI, HTTPAPI, FunctionURL and ALB: API Gateway REST APIs, HTTP
//     APIs, Lambda function URLs and Application Load Balancer target
//     groups, keyed by the Idempotency-Key header (or, for webhooks, by
//     the sender's delivery id on the endpoint: WithWebhook, which verifies
//     the sender's signature first, or WithKeyHeader, WithKeyBodyField). The
//     handler answers its event source's own response type, which is
//     stored and replayed as it was (cookies and multi-value headers
//     included). Services outside Lambda use package
//     github.com/idemgo/idem/httpidem instead.
//   - Typed: any other event type (EventBridge, Step Functions, direct
//     invocation), keyed by a function of the event.
//
// Each call's lease is taken from the invocation's deadline: the runner
// reads ctx.Deadline(), which Lambda sets to the end of the invocation, and
// adds its lease margin (idem.WithLease). A sandbox that is killed in the
// middle of a handler therefore blocks its key only until shortly after its
// own timeout; a redelivery after that takes the key over.
//
// Keys: SQS, stream and Typed users name the event's identity (a body
// field, a message attribute, the FIFO deduplication id, the message id; a
// Kinesis record's data field, partition key or sequence number; a DynamoDB
// Streams record's item keys, event id or NewImage attribute; any of them
// through a function, KeyFromFunc, or several at once, KeyFromAll); EventKey
// turns it and the action name into a stored key, hashed with
// core.DeriveKey so that no user data sits in the table's key. The HTTP
// wrappers hash the Idempotency-Key header together with the caller's
// identity (every field of the request context that tells callers apart;
// a caller an authorizer let through that cannot be identified is refused,
// ErrUnidentifiedCaller), so that one caller can neither replay nor block
// another caller's key; the method and the path are part of the
// fingerprint, so the same key on another endpoint is refused as reused
// (422). Keys are scoped further by what the platform sets and a sender
// cannot choose (ScopedKey): the invocation's tenant id (Lambda's tenant
// isolation mode, every wrapper), an SNS topic, an EventBridge account,
// and with WithMessageGroupTenant a fair queue's message group. A handler
// finds its call's stored key with StoredKey, to derive the ids it writes
// and the keys it passes downstream. docs/security.md has the whole threat
// model. A KeyConfig holds an SQS, SNS or HTTP wrapper's key configuration
// as data (a JSON file, ParseKeyConfig), which the function builds its
// wrapper from and the idem command reads, so that an operator finds the
// record of a message (KeyConfig.MessageKey) or a request (RequestKey) as
// the wrapper keyed it.
//
// The payload fingerprint covers the whole payload, or the fields that
// WithFingerprintSelection (or the runner's idem.WithFingerprintSelection)
// chooses with core.SelectFields or core.IgnoreFields; each payload is
// canonicalized once.
//
// Every message, stream record or request is logged once, through the
// runner's logger (idem.WithLogger; by default idem.DefaultLogger, which
// in Lambda writes the records of what did not succeed to standard output
// as Lambda's logging controls ask), at its verdict's level, with the key
// hashed by idem.HashKey, and observed once (idem.WithObserver): what the
// runner decided, and what a wrapper decided without it (a missing key, a
// record not started, a panic), which it reports with idem.Runner.Report.
//
// The batch wrappers report every record that did not succeed, for the
// queue's redrive policy or the stream's retry limit to take it to the
// dead-letter queue or failure destination; WithAcknowledged names the
// verdicts to acknowledge instead.
//
// What it does not promise: a handler that crashes after its side effect
// and before its outcome is recorded runs again once its lease ends. Make
// side effects idempotent downstream (idempotency keys of the APIs you
// call, conditional writes) where a repeat would hurt.
package idemlambda
