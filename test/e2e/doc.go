// Package e2e holds idem's end-to-end tests: the example service's
// functions (examples/orders), and a Kinesis consumer built for these tests
// (testdata/kinesis-ledger), built as Lambda bootstraps and run under AWS's
// Lambda Runtime Interface Emulator against a DynamoDB-API server, invoked
// over HTTP with events shaped as AWS sends them (SQS, API Gateway, Kinesis
// with base64 data, DynamoDB Streams with typed images).
//
// They need AWS_ENDPOINT_URL_DYNAMODB (the DynamoDB endpoint) and IDEM_RIE
// (the aws-lambda-rie binary), which `make test` sets through
// internal/cmd/testenv. Without them the tests fail with a message saying
// so, unless IDEM_SKIP_INTEGRATION=1, which skips them.
package e2e
