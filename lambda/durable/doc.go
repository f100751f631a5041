// Package durable starts one AWS Lambda durable execution per business event:
// a dispatcher, a regular function behind an event source (SQS, SNS, Kinesis,
// DynamoDB Streams, an EventBridge rule, a direct invocation, an HTTP request
// such as a webhook delivery), that invokes a durable function asynchronously
// with the event's own execution name.
//
// An event source mapping starts a new durable execution on every delivery,
// retries included. Lambda deduplicates starts by execution name instead: an
// invocation with a name it knows and the same payload returns the existing
// execution, with another payload it is refused
// (DurableExecutionAlreadyStartedException), while the execution runs and for
// the function's retention after it closes (1 to 90 days, 14 by default). The
// dispatcher gives every delivery of an event the same name, ExecutionName of
// the event's stored key, and the same payload, so every redelivery,
// duplicate in a batch or event published again reaches the one execution.
//
// The wrappers (SQS, SNS, Kinesis, DynamoDBStream, Typed) take the same
// arguments as package idemlambda's, the dispatcher in the handler's place,
// and are those wrappers: the key sources, SNS and EventBridge envelopes,
// fingerprints, the batch engine and its reporting rules, the logs and
// metrics are theirs. Each event's call of the runner starts the execution:
//
//	d, err := durable.New(lambda.NewFromConfig(cfg), os.Getenv("DURABLE_FUNCTION_ARN"))
//	handler, err := durable.SQS(runner, "fulfil", idemlambda.KeyFromBodyField("order_id"), d)
//
// The durable function receives the payload the wrapper fingerprints, as
// canonical JSON (see docs/durable.md): so Lambda's "same payload" is idem's.
//
// The runner needs no table: the execution name is the guarantee. A runner
// over memstore answers, from memory, duplicates within a batch and
// redeliveries to the same sandbox without an Invoke; Lambda answers the
// rest. A DynamoDB table (ddbstore) helps where the name cannot: remembering
// events longer than the function's retention, replaying every redelivery
// without an Invoke, and a fingerprint selection (a re-published event whose
// timestamp changed is the same event; Lambda compares payloads whole).
//
// HTTPAPI, RESTAPI, FunctionURL and ALB are idemlambda's HTTP wrappers in the
// same way: with idemlambda.WithWebhook and idemlambda.WithEndpoint, a
// sender's signature is verified before anything and its delivery id is the
// key; without, the Idempotency-Key header, scoped by the caller.
//
//	d, err := durable.New(client, arn, durable.WithForwardedHeaders("X-GitHub-Event"))
//	handler, err := durable.FunctionURL(runner, d,
//		idemlambda.WithEndpoint("github-builds"), idemlambda.WithWebhook(webhook.GitHub(secret)))
//
// The durable function receives a JSON object: "request", the request as
// fingerprinted (method, path, and the body under the wrapper's selection, as
// "json", "text" or "base64"); "key", the values the key is made of (the
// endpoint and the sender's delivery id, or the Idempotency-Key); "caller",
// the caller identity that scopes the key, if any; and "headers", those of
// WithForwardedHeaders. A start is answered 202 Accepted with Started as
// JSON, recorded, and replayed to a duplicate marked Idempotent-Replayed:
// true. A start that failed is answered in the handler's place and leaves
// no record, so that Lambda stays the judge of the next delivery: another
// payload under the name 422 (key_reused), a payload over MaxPayload 413
// (invalid_payload), throttling and 5xx 503 with Retry-After, any other
// Lambda error 500 (both failed_transiently, for the sender to retry).
//
// Verdicts: a start Lambda accepts is executed (for a redelivery the runner
// has no memory of, Lambda's answer does not say whether it started the
// execution or returned the existing one); a duplicate the runner remembers
// is replayed; another payload is key_reused, by the runner's fingerprint or
// by Lambda (ErrAlreadyStarted); an event over MaxPayload is invalid_payload
// (ErrPayloadTooLarge), not sent; throttling and 5xx are failed_transiently.
// The batch wrappers report every record that did not succeed, for the
// queue's redrive policy or the stream's retry limit.
package durable
