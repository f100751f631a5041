// Command idem is the operator's tool for idem's DynamoDB store (ddbstore):
// it finds the record of a key, of an SQS message or of an API request,
// lists and counts records by status, and releases (deletes) a key's record
// so that the key runs again.
//
//	go install github.com/idemgo/idem/cmd/idem@latest
//
//	idem inspect --table T --key KEY
//	idem inspect --table T --sqs-event FILE --key-source body:FIELD|attribute:NAME|dedup|message-id --action NAME [--message N]
//	idem inspect --table T --http-event FILE --kind rest|httpapi|url
//	idem list    --table T [--status STATE] [--limit N] [--next TOKEN] [--max-rcu N]
//	idem release --table T (key flags as for inspect) [--fence F] [--yes] [--force] [--cache-ttl D]
//	idem stats   --table T [--next TOKEN] [--max-rcu N]
//
// Every command takes --table (or IDEM_TABLE); the flags of the table's
// layout, which must be the store's: --key-attr and --ttl-attr
// (WithKeyAttribute, WithTTLAttribute), --sort-key and --sort-key-value
// (WithSortKey; a value with {key} in it stands for a WithSortKeyFunc that
// puts the key there), --key-prefix (WithKeyPrefix; keys are given without
// it) and --attr default=name, repeated (WithAttributeNames); --profile,
// --region and --endpoint-url; and --json for output to scripts instead of
// tables.
// AWS configuration is the SDK's own (config.LoadDefaultConfig): profiles,
// AWS_REGION, credentials, AWS_ENDPOINT_URL_DYNAMODB.
//
// inspect computes a key exactly as the Lambda wrappers do (idemlambda.SQSKey
// for SQS messages, the Idempotency-Key header hashed with the caller's
// identity for API requests) and shows its record: status, attempts, lease
// end, retention end, error, result size, fingerprint prefix, what the next
// call with the same payload would get (core.Decide), and the record's fence.
// Keys are shown only as idem.HashKey hashes, never in the raw.
//
// release deletes a key's record with ddbstore's Release: a conditional
// DeleteItem that deletes it only if it is still the record that was read
// (lease token, status and attempt), by release itself or, with --fence, by
// an earlier inspect. It asks for confirmation unless --yes, and refuses an
// in-progress record whose lease is live unless --force. Releasing a success
// says until when warm processes whose runner caches outcomes
// (idem.WithCache) may still replay it from memory: now plus their cache TTL
// (--cache-ttl, default idem.DefaultCacheTTL).
//
// A record's state is its stored status, refined: in_progress (lease live),
// stuck (in progress, lease ended: the next delivery takes it over),
// succeeded, failed-retryable, failed-permanent, and expired (past
// retention). list --status takes a state, or in_progress for live and stuck
// records alike, or failed for both kinds of failure.
//
// list and stats scan the table (eventually consistent reads) and stop at
// --max-rcu read capacity units, printing a token to continue with --next. A
// progress line is written to stderr while they scan, when it is a
// terminal. Records past retention that DynamoDB has not deleted yet count
// as absent: list leaves them out, stats counts them apart.
//
// Exit codes: 0 success; 1 another error; 2 usage or input error; 3 no live
// record for the key; 4 release refused, the record changed since it was
// read; 5 release refused, not confirmed or lease live; 6 table not found;
// 7 table key schema mismatch; 8 access denied; 9 no AWS credentials or
// region; 10 DynamoDB throttled or unavailable (retry); 130 interrupted.
//
// docs/operations.md walks from a dead-letter queue message to its record,
// its cause and a released key.
package main
