// Package idemtest helps unit-test handlers made idempotent by idem, with
// memstore and no AWS account: a fake clock that the runner and the
// wrappers read (Clock), the context of a Lambda invocation on that clock
// (Clock.Invocation), and the events the platforms send, shaped as they
// send them: SQS messages (standard and FIFO, first deliveries and
// redeliveries), SNS notifications (to a function, and in an SQS body),
// EventBridge events (to a function, and in an SQS body), Kinesis and
// DynamoDB Streams records, API Gateway HTTP API and function URL
// requests, and webhook deliveries from GitHub, Stripe and Shopify with
// their headers and signatures (Delivery, as an HTTP API or function URL
// event or as a net/http request).
//
// Every builder returns the aws-lambda-go type a handler receives (or, for
// the envelopes, the JSON body SQS carries), filled as AWS fills it: the
// fields that identify an event (message id, sequence number, delivery id)
// come from the arguments; the others are fixed, realistic values (region
// us-east-1, account 123456789012) that a test may overwrite, since every
// value returned is a plain struct. docs/testing.md shows them at work.
//
// The package imports the standard library and aws-lambda-go only (no
// testing package): it can be used from tests and from examples alike.
package idemtest
