// Command idem is the operator's tool for idem's DynamoDB store (ddbstore):
// it finds the record of a key, of an SQS message, of an API request or of a
// log line, lists and counts records by status or key prefix, releases
// (deletes) records so that their keys run again, one at a time or in bulk,
// peeks at a dead-letter queue and brings its messages back after an outage
// in one command, and creates the table a store needs.
//
// From a clone of the repository, `go install ./cmd/idem` puts it in
// $(go env GOBIN), or $(go env GOPATH)/bin when GOBIN is unset; once the
// module is published, `go install github.com/idemgo/idem/cmd/idem@VERSION`
// does the same from anywhere.
//
//	idem inspect --table T --key KEY
//	idem inspect --table T --sqs-event FILE (--key-config FILE | --key-source SRC... --action NAME [--envelope E]...) [--message N]
//	idem inspect --table T --http-event FILE --kind rest|httpapi|url|alb [--key-config FILE | --key-source SRC... [--identity-header H]]
//	idem list    --table T [--status STATE] [--prefix P] [--action A] [--limit N] [--next TOKEN] [--max-rcu N]
//	idem release --table T (key flags as for inspect) [--fence F] [--yes] [--force] [--cache-ttl D]
//	idem release --table T (--status STATE | --verdict V) [--since T] [--until T] [--dry-run] [--rate N] [--max N] [--yes]
//	idem stats   --table T [--next TOKEN] [--max-rcu N]
//	idem dlq peek    --queue-url URL [--max N] > dlq.json
//	idem dlq redrive --queue-url URL [--to URL] (--table T key-configuration flags | --no-release) [--dry-run] [--rate N] [--max N]
//	idem create-table --table T
//	idem --version
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
// inspect computes a key exactly as the Lambda wrappers do, from the
// function's key configuration (idemlambda.KeyConfig: a file given with
// --key-config, or the same as flags: key sources, envelopes, action,
// identity header, store key prefix; KeyConfig.MessageKey for SQS messages,
// idemlambda.RequestKey for API requests), or takes it verbatim, as a log
// record's key field shows it, and shows its record: status, attempts, lease
// end, retention end, error, result size, fingerprint prefix, what the next
// call with the same payload would get (core.Decide), and the record's fence.
// Records are shown under their idem.HashKey hash, the logs' key_hash; a key
// given verbatim is never printed, a derived key (core.IsDerivedKey, a hash
// itself) is printed as the logs' key field shows it.
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
// --max-rcu read capacity units, printing a token to continue with --next.
// Once a scan has run for a second, its progress goes to stderr: on a
// terminal one line rewritten after each page, elsewhere a line at most
// every five seconds; --json turns it off. Records past retention that
// DynamoDB has not deleted yet count as absent: list leaves them out, stats
// counts them apart. list --prefix keeps the records whose key, as the
// store holds it (after --key-prefix's prefix), begins with the prefix: the
// way to find one function's records in a table that several share, when
// each function's store has its own ddbstore.WithKeyPrefix. list --action
// keeps the records whose key names the action, as keys given verbatim in
// the scheme evt:<event-id>:<action> do; the wrappers' keys hash the action
// with the event id (idemlambda.EventKey), so list counts those apart and
// says so.
//
// release --status or --verdict releases, in bulk, every record of a state
// (stuck, failed, failed-retryable, failed-permanent) or of the verdicts no
// delivery runs again (failed_permanently, replayed_failure,
// retries_exhausted), last written in a window (--since, --until), each
// fenced as the scan read it; --dry-run lists them.
//
// dlq peek writes up to --max (10) messages of a dead-letter queue to
// stdout as `aws sqs receive-message` prints them, the file inspect
// --sqs-event reads, and leaves them in the queue. dlq redrive pages through
// every message of the dead-letter queue (each once, hidden for
// --visibility-timeout while it runs) and for each computes its key with the
// key configuration, reads its record, releases it (fenced) when no delivery
// would run it again, sends the message to --to (by default the one queue
// whose redrive policy names the dead-letter queue) as a new message, and
// deletes it from the dead-letter queue; it leaves a message without a key,
// with another payload's record, or whose record changed since it was read.
// --dry-run says what it would do; --rate bounds the messages moved a
// second; progress goes to stderr; exit code 11 says it left messages.
// --no-release moves every message without reading the table. They use the
// SQS endpoint of the SDK's configuration (AWS_ENDPOINT_URL_SQS) or
// --endpoint-url (for redrive, DynamoDB's too).
//
// create-table creates the table with ddbstore.CreateTable (on demand, the
// store's key schema as the layout flags describe it, TTL on the TTL
// attribute), or checks an existing one; production tables are better
// made by the deployment's own template.
//
// --version prints the module version the go command stamped: a release's
// version for `go install ...@VERSION`; for a build from a clone, a
// pseudo-version and the checkout's commit (with "uncommitted changes"
// when there were some); "(devel)" where the go command had no version
// control information (a copy without .git, a git worktree, or
// -buildvcs=false).
//
// Errors say what to check: a key with no record names the flags that made
// it (--action, --key-source, --kind, --key-prefix); a table not found
// names the table; a connection refused or an unknown host names the
// address and the endpoint settings.
//
// Exit codes: 0 success; 1 another error; 2 usage or input error; 3 no live
// record for the key; 4 release refused, the record changed since it was
// read; 5 release refused, not confirmed or lease live; 6 table not found;
// 7 table key schema mismatch; 8 access denied; 9 AWS configuration: no
// credentials or region, a bad profile, or an endpoint that cannot be
// reached; 10 DynamoDB throttled or unavailable (retry); 11 left behind: a
// redrive or a bulk release did not do everything (its report says what and
// why); 130 interrupted.
//
// docs/operations.md draws the life of a message with the commands at each
// state, recovers a dead-letter queue after an outage, and walks from a
// dead-letter queue message to its record, its cause and a released key.
package main
