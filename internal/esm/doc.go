// Package esm is a local stand-in for AWS Lambda's SQS event source mapping, for idem's demo
// and end-to-end tests: a Poller receives batches from a queue that speaks the SQS API (moto's
// server on 127.0.0.1, LocalStack, or SQS itself), invokes a function with each batch as the
// SQS event Lambda sends, and deletes the messages the function processed. What it leaves
// undeleted reappears after the queue's visibility timeout, and the queue's own RedrivePolicy
// moves a message to the dead-letter queue once it has been received maxReceiveCount times:
// the poller never moves a message itself, as Lambda does not.
//
// As Lambda's event source mapping does, a poll:
//
//   - receives up to the batch size (1 to 10) with ReceiveMessage, long polling, asking for
//     every system attribute and every message attribute, with the queue's own visibility
//     timeout;
//   - invokes the function once with the batch as an SQS event: per record messageId,
//     receiptHandle, body, attributes (ApproximateReceiveCount, SentTimestamp, SenderId,
//     ApproximateFirstReceiveTimestamp and, where the queue sets them, MessageGroupId,
//     MessageDeduplicationId, SequenceNumber, AWSTraceHeader), messageAttributes (stringValue
//     or binaryValue, empty stringListValues and binaryListValues, dataType), md5OfBody,
//     md5OfMessageAttributes (when the message has attributes), eventSource "aws:sqs",
//     eventSourceARN and awsRegion;
//   - with ReportBatchItemFailures (FunctionResponseTypes), deletes every message of the batch
//     except those the response lists in batchItemFailures; an empty or null list, an empty
//     or null response is success; a response that is not JSON, or an itemIdentifier that is
//     null, empty or not a message id of the batch, fails the whole batch; without it, any
//     successful response deletes the whole batch;
//   - deletes nothing when the invocation fails: a function error, a crash, a timeout.
//
// New refuses a queue whose visibility timeout is shorter than the function's timeout, as
// CreateEventSourceMapping does.
//
// Where it departs from Lambda: one poller invokes one batch at a time (Lambda runs several
// pollers and concurrent invocations: start several Pollers, each over its own function
// instance, for that); no batching window (MaximumBatchingWindowInSeconds), no batch sizes
// above 10, no maximum concurrency, no backoff between failed batches; a failed
// DeleteMessageBatch entry is reported, not retried. An in-process function (Handler) that
// outlives its timeout is abandoned, not stopped: it keeps running while the poller goes on,
// where Lambda would stop the sandbox.
//
// CreateQueues creates a queue and its dead-letter queue with a redrive policy; what an
// operator does with the dead-letter queue (peek at it, redrive it) is package
// internal/dlq's, which cmd/idem's dlq command runs.
//
// moto 5.2.5, measured: visibility timeouts expire as on SQS (whole seconds; a long poll
// notices a message made visible again only at its next receive, so a redelivery comes up to
// one wait time late); the redrive policy moves a message when a receive finds it visible
// after maxReceiveCount receives, as SQS does; a message in the dead-letter queue keeps its
// id, body, attributes and receive count, but lacks the DeadLetterQueueSourceArn attribute
// SQS adds. Received messages carry ApproximateReceiveCount, SentTimestamp, SenderId,
// ApproximateFirstReceiveTimestamp and, on FIFO queues, MessageGroupId,
// MessageDeduplicationId and SequenceNumber, with MD5 digests the SDK verifies.
//
// A Poller's methods are not safe for concurrent use: run one Run or PollOnce at a time.
package esm
