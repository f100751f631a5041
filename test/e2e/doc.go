// Package e2e holds idem's end-to-end tests: the example service's
// functions (examples/orders, among them orders-alb, the orders API behind
// an ALB), and a Kinesis consumer built for these tests
// (testdata/kinesis-ledger), built as Lambda bootstraps and run under AWS's
// Lambda Runtime Interface Emulator against a DynamoDB-API server, invoked
// over HTTP with events shaped as AWS sends them (SQS, API Gateway, ALB in
// both header modes, Kinesis with base64 data, DynamoDB Streams with typed
// images). The SQS consumer's queue tests deliver through internal/esm, a
// stand-in for Lambda's SQS event source mapping, from a queue and its
// dead-letter queue on an SQS-API server (moto): duplicates, redeliveries
// after the visibility timeout, the redrive policy (template.yaml's, where a
// test says so: the source's limit is the limit), a release and a redrive.
// The durable functions' dispatchers (examples/durable/dispatcher, fed by
// SQS, and testdata/durable-webhook, a GitHub webhook's behind a function
// URL) invoke a local Lambda Invoke API (internal/invokeserver) through
// AWS_ENDPOINT_URL_LAMBDA.
//
// They need AWS_ENDPOINT_URL_DYNAMODB (the DynamoDB endpoint), IDEM_RIE (the
// aws-lambda-rie binary) and, for the queue tests, AWS_ENDPOINT_URL_SQS,
// which `make test` sets through internal/cmd/testenv (-sqs moto). Without
// them the tests fail with a message saying so, unless
// IDEM_SKIP_INTEGRATION=1, which skips them.
package e2e
