// Package e2e holds idem's end-to-end tests: the example service's
// functions (examples/orders: orders-api, its ALB twin orders-alb, and
// orders-consumer) built as Lambda bootstraps and run under AWS's Lambda
// Runtime Interface Emulator against a DynamoDB-API server, invoked over
// HTTP with realistic SQS, API Gateway and ALB events.
//
// They need AWS_ENDPOINT_URL_DYNAMODB (the DynamoDB endpoint) and IDEM_RIE
// (the aws-lambda-rie binary), which `make test` sets through
// internal/cmd/testenv. Without them the tests fail with a message saying
// so, unless IDEM_SKIP_INTEGRATION=1, which skips them.
package e2e
