// Package orders is idem's example service: Lambda functions that use the
// wrappers of github.com/idemgo/idem/lambda over the DynamoDB store.
//
//   - orders-api (cmd/orders-api): POST /orders behind an API Gateway HTTP
//     API. It creates an order (one item in the orders table, under an
//     order id derived from the request's stored idempotency key: the
//     execution's downstream key for "order", idem.DownstreamKey; OrderID)
//     and sends an OrderPlaced message to the orders queue. Keyed by the
//     Idempotency-Key header: a retried request gets the first response
//     back, marked Idempotent-Replayed. A request that failed after its
//     order was written (the message could not be sent) runs again on the
//     client's retry and writes the same order, not a second one.
//   - orders-alb (cmd/orders-alb): the same POST /orders behind an
//     Application Load Balancer target group (idemlambda.ALB), answering in
//     the request's header mode, with keys scoped by the user the ALB
//     authenticated (ALBIdentityHeader). template.yaml does not deploy it;
//     the end-to-end tests run it.
//   - orders-consumer (cmd/orders-consumer): consumes the orders queue and
//     appends one ledger entry per OrderPlaced event (a new random entry id
//     per real execution), keyed by the event's event_id. Every message
//     that does not succeed is reported for redelivery (the wrapper's
//     default), so that the queue's redrive policy moves it to its
//     dead-letter queue.
//   - orders-stream (cmd/orders-stream): consumes the orders table's
//     DynamoDB stream and writes one audit entry per order placed (an INSERT
//     record; a new random audit id per real execution), keyed by the
//     order's item keys and the action AuditAction. A permanent failure is
//     its shard's checkpoint: the event source mapping retries from it,
//     bisects the batch and, past MaximumRetryAttempts, sends the batch's
//     position to its on-failure destination (an SQS queue).
//   - idem-sweep (cmd/idem-sweep): a scheduled function, deployed by
//     template.yaml only with its SweepSchedule parameter, that deletes the
//     idempotency table's records past retention (Sweeper), for a table
//     whose Time to Live deletes nothing (a global table in multi-Region
//     strong consistency).
//
// A duplicate execution would show as an extra OrderPlaced message (the
// API), an extra ledger entry (the consumer, which writes each under a new
// random id) or an extra audit entry (orders-stream, likewise): the
// end-to-end tests (test/e2e) and the demo (cmd/demo) count them to prove
// there is none.
//
// The functions read their configuration from the environment variables
// named by the Env* constants (APIEnv, ConsumerEnv, StreamEnv and SweepEnv list which
// function reads which); template.yaml at the repository root sets them.
//
// # Test hooks
//
// When ORDERS_TEST_HOOKS=1 (never set by template.yaml), the functions obey
// these hooks, which exist only so that tests can provoke failures:
//
//   - orders-api and orders-alb, request header X-Test-Fail: 503 (or
//     another 5xx status): answer that status without creating anything;
//   - orders-api and orders-alb, request header X-Test-Hold-File: PATH: wait
//     until a file exists at PATH (or the deadline) before creating the order,
//     so that a test holds the key in progress for as long as it needs,
//     whatever the machine's speed;
//   - orders-consumer, body field "fail": "transient_once" fails
//     transiently while the message's ApproximateReceiveCount is 1 (so the
//     first delivery is reported and the redelivery succeeds), "transient"
//     always fails transiently, "poison" fails permanently (marked so),
//     "error" returns an ordinary error that no classifier knows (not
//     retried in the call; the next receive runs it again);
//   - orders-consumer, body field "outage_receives": N: the warehouse
//     answers 503 (transient, by its status) while the message's
//     ApproximateReceiveCount is N or less, so that a test sets how long an
//     outage lasts in receives, whatever the machine's speed;
//   - orders-consumer, body field "sleep_ms": N sleeps N milliseconds before
//     writing the ledger entry, ignoring the deadline, while the message's
//     ApproximateReceiveCount is 1 (so that a first delivery is killed by
//     the timeout in the middle of the handler and a redelivery is not);
//   - orders-stream, NewImage attribute test_fail (S): "poison" fails
//     permanently, "transient" transiently;
//   - orders-stream, NewImage attribute test_hold_file (S): waits until a file
//     exists at that path, ignoring the deadline, before writing the audit
//     entry (so that an invocation is killed by its timeout in the middle of
//     the handler, and one after the test has created the file is not).
package orders
