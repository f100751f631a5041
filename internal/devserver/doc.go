// Package devserver starts and stops the local servers that idem's tests, demo and benchmark
// run against: dynalite and moto (DynamoDB-API servers installed by `make deps` into
// node_modules and .cache/venv), Redis (Debian's redis-server on PATH, installed by `make
// deps` where missing) and AWS's Lambda Runtime Interface Emulator (installed into
// .cache/bin).
//
// Every server binds 127.0.0.1 on a port picked free just before it starts, runs in its own
// process group and is stopped by its PID: Stop sends SIGTERM to the group, waits a short
// grace period, then sends SIGKILL. A server is also stopped when the context passed to its
// Start function is done, and receives SIGTERM if the process that started it dies (Linux
// parent-death signal), so a test binary that panics on a timeout leaves no server behind.
// Each server's combined stdout and stderr is kept in memory (at most MaxLogBytes, the newest)
// and returned by its Log method, to be shown when a test fails.
//
// Tests that need these servers follow one convention: when IDEM_SKIP_INTEGRATION=1 they
// skip; otherwise a missing prerequisite is a failure whose message says to run `make deps`.
// The errors returned here for a missing installation say the same.
//
// Environment contract set by internal/cmd/testenv (which `make test` uses) for the commands
// it runs: AWS_ENDPOINT_URL_DYNAMODB (the server's endpoint), AWS_REGION=us-east-1,
// AWS_ACCESS_KEY_ID=test, AWS_SECRET_ACCESS_KEY=test, IDEM_DDB_SERVER (dynalite, moto or,
// under `make test-localstack`, localstack), IDEM_RIE (path of aws-lambda-rie, when
// installed), with -sqs moto, AWS_ENDPOINT_URL_SQS (moto's endpoint, for SQS) and
// IDEM_SQS_SERVER=moto, and, with -redis, IDEM_REDIS_ADDR (the Redis server's 127.0.0.1:PORT).
package devserver
