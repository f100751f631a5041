// Package ddbstore is an idem.Store on a DynamoDB table: the store to use when
// more than one process (Lambda sandboxes, containers) handles the same keys.
// Every write is one conditional write (an UpdateItem to reserve, a PutItem
// to complete), which DynamoDB applies atomically, so of any number of
// concurrent callers in any number of processes, one reserves a key.
//
//	cfg, _ := config.LoadDefaultConfig(ctx, config.WithRetryMaxAttempts(5))
//	store, err := ddbstore.New(dynamodb.NewFromConfig(cfg), "idem")
//	runner, err := idem.New(store)
//
// # Table
//
// One item per key. By default, in a table of its own with a string
// partition key and no sort key (CreateTable makes one; so do the SAM
// template and the LocalStack init script). Attributes, under their default
// names:
//
//	pk              S     the key (name: WithKeyAttribute; value: WithKeyPrefix's prefix and the key)
//	status          S     in_progress, succeeded or failed
//	fingerprint     S     hex SHA-256 of the canonical payload
//	lease_token     S     fencing token of the lease that wrote the record; kept after completion
//	lease_until_ms  N     in_progress only: end of the lease, epoch milliseconds, rounded up
//	attempts        N     executions started for the key, across deliveries
//	attempts_carried N    in_progress and retryable failures only: equals attempts; the count Acquire continues
//	expires_at      N     end of retention, epoch SECONDS, rounded up; the TTL attribute (name: WithTTLAttribute)
//	updated_at_ms   N     time of the write, epoch milliseconds
//	retryable       BOOL  failed only: a later delivery may execute again
//	error           S     failed only: the handler error's message (shortened if it would not fit)
//	result          B     succeeded only: the result, raw or gzip-compressed; absent if empty or omitted
//	result_encoding S     "gzip" when result is compressed; absent when raw
//	result_omitted  BOOL  present (true) when the result was too large to keep
//	result_ref      S     WithLargeResults: the blob store object that holds the result
//	result_sha256   S     WithLargeResults: the object's hex SHA-256
//	result_size     N     WithLargeResults: the object's size in bytes
//	steps           L     in_progress and retryable failures: the completed steps (idem.Step) in order, maps of n (S) and r (B)
//	step_names      SS    the steps' names (the condition that records a name once)
//	steps_size      N     the steps' budgeted size (the condition that keeps the item within its limit)
//
// A team with a single-table design keeps the records in its own table
// instead: WithSortKey (a fixed value such as "idempotency#") or
// WithSortKeyFunc (a value computed from the key) for a table with a string
// sort key; WithKeyPrefix to give each service or action a prefix of its
// own in the partition key; WithAttributeNames (and WithKeyAttribute,
// WithTTLAttribute) to name every attribute as the table's conventions want.
// Every read, write, condition and operator call then addresses an item by
// its partition and sort key, and every attribute is named through
// ExpressionAttributeNames, so DynamoDB's reserved words are valid names.
// Stores with different prefixes or sort key values share a table without
// seeing each other's records.
//
// # Time
//
// The store converts times only here, at the edge: retention in epoch
// seconds (DynamoDB's TTL ignores anything else), leases in milliseconds.
// Ends are rounded up when written (ExpiresAt to the next second, LeaseUntil
// to the next millisecond) and the current time is truncated when compared
// (`expires_at <= :now_s`, `lease_until_ms <= :now_ms`), so a record or lease
// is never treated as ended before its true end; it may outlive it by less
// than a second (retention) or a millisecond (lease). Records read back carry
// the rounded times, so core.Decide on them agrees with the store's
// conditions exactly. DynamoDB deletes expired items lazily (often days
// later); every read and every condition treats an item whose expires_at is
// at or before now as absent, whether or not it is still there.
//
// # Calls
//
// Acquire (idem.Acquirer, which idem.Runner uses) is one UpdateItem with
// the condition
//
//	attribute_not_exists(pk)
//	OR (expires_at <= :now_s AND status <> in_progress AND attribute_not_exists(attempts_carried))
//	OR (status = in_progress AND lease_until_ms <= :now_ms AND expires_at > :now_s
//	    AND fingerprint = :fp AND attempts_carried < :max_attempts)
//	OR (status = failed AND retryable = true AND expires_at > :now_s
//	    AND fingerprint = :fp AND attempts_carried < :max_attempts)
//
// (core.Acquirable) that sets attempts to attempts_carried + 1, or to 1
// where the item has no attempts_carried, with ReturnValues ALL_OLD (the
// record replaced: a takeover or a retry) and
// ReturnValuesOnConditionCheckFailure ALL_OLD. Reserve is one PutItem with
// the condition
//
//	attribute_not_exists(pk) OR expires_at <= :now_s
//	OR (lease_token = :prev_token AND status = :prev_status AND size(step_names) = :prev_steps AND
//	    ((status = in_progress AND lease_until_ms <= :now_ms) OR (status = failed AND retryable = true)))
//
// (the last clause only when the caller's decision was made on a record;
// attribute_not_exists(step_names) instead of its size when prev has no
// steps) and
// ReturnValuesOnConditionCheckFailure=ALL_OLD, so the blocking record comes
// back with the refusal. Where the server does not return it (dynalite), one
// consistent GetItem reads it; if that finds no live record (it expired or
// was deleted in between), the put is tried once more. Complete is one
// PutItem conditioned on `status = in_progress AND lease_token = :token`.
// Get is one consistent GetItem. Through an idem.Runner, on DynamoDB (and on
// servers that return ALL_OLD):
//
//	first run                           1 UpdateItem + 1 PutItem
//	duplicate of a completed key        1 UpdateItem
//	in progress elsewhere               1 UpdateItem
//	takeover of an expired lease        1 UpdateItem + 1 PutItem
//	retry of a retryable failure        1 UpdateItem + 1 PutItem
//
// and one GetItem more on each refused reservation where the server does not
// return ALL_OLD. Each step of a handler (idem.Step) is one UpdateItem more
// (RecordStep), conditioned on the lease, billed by the item's size. A
// crash or a retryable failure older than the retention, and a record
// written before attempts_carried existed, cost one PutItem more (see
// Store.Acquire).
//
// # Large results
//
// A result of more than 4 KB (WithCompressionThreshold) is stored
// gzip-compressed when that makes it smaller. If the item would still pass
// the item size limit (DefaultMaxItemSize, DynamoDB's 400 KB less a margin,
// counted as DynamoDB does: attribute names plus values; see ItemSize), the
// succeeded outcome is stored without its result and with result_omitted: a
// duplicate is answered "succeeded" (idem.Outcome.ResultOmitted) and the
// handler does not run again. With WithLargeResults, such a result is kept
// in a blob store (S3, through package s3blob) instead: the object is
// written first, then the record that holds its name, size and SHA-256, and
// a replay reads the object with one Get and checks it (ErrLargeResult,
// with blob.ErrNotFound or blob.ErrMismatch, when it is missing or
// different). A completion never fails for size. A
// reservation that cannot fit (a key over 2048 bytes, an enormous token) is
// refused before any call with a permanent error wrapping ErrKeyTooLarge or
// ErrItemTooLarge.
//
// # Errors
//
// AWS errors are translated once, here, by type and error code, never by
// message text, into an *Error{Op, Table, Err} wrapping a sentinel and the
// SDK's error, marked for core.Classify:
//
//	ConditionalCheckFailedException               *idem.ConflictError (Reserve, Acquire), idem.ErrLeaseLost (Complete)
//	ProvisionedThroughputExceededException,
//	  RequestLimitExceeded, ThrottlingException,
//	  TransactionConflictException, HTTP 429      ErrThrottled, transient
//	InternalServerError, HTTP 5xx, timeouts,
//	  connection resets, refused connections,
//	  unreadable responses                        ErrUnavailable, transient
//	ResourceNotFoundException, HTTP 404           ErrTableNotFound, permanent
//	ValidationException, SerializationException   ErrInvalidRequest, permanent
//	AccessDeniedException,
//	  UnrecognizedClientException, HTTP 403       ErrAccessDenied, permanent
//	an item that does not decode                  ErrCorruptRecord, permanent
//	other 4xx, unknown errors, context.Canceled   no sentinel, permanent
//
// A store write is retryable only where retrying it cannot do harm. A
// throttled request certainly did not happen. A timeout, a reset or a 5xx may
// have: the write may have been applied and only its answer lost. Every
// write is conditional and carries the lease token, so a retry recognises
// its own earlier write: a reservation that finds an in-progress record with
// its own token (and, for Reserve, its attempt), or a completion that finds
// its own outcome (same token, status and attempt), reports success. That is
// why these failures are marked transient, why the SDK's own retries are
// safe, and why the runner retries a completion. After such a failure Reserve
// and Acquire also make one consistent GetItem to look for their own
// reservation before reporting
// the error, so an applied reservation is not left orphaned; if the check
// fails too, the orphan holds the key until its lease ends and is then taken
// over: the handler has not run, and nothing runs twice.
//
// # Retries
//
// The store sets no retries of its own: configure the SDK client (for
// example config.WithRetryMaxAttempts, or RetryMaxAttempts in
// dynamodb.Options) to retry throttling and transport failures within a
// call; the idem.Runner retries completions within the invocation's
// deadline.
//
// # Operator methods
//
// Beyond idem.Store, the store has the methods of the operator's command
// (cmd/idem), which need a client that also implements AdminAPI (DeleteItem
// and Scan; a *dynamodb.Client does): Release (idem.Releaser) deletes a
// key's record with one DeleteItem conditioned on
// `lease_token = :token AND status = :status AND attempts = :attempts`, so
// only the record the operator inspected is deleted; List reads one page of
// a Scan, decoded, with the read capacity it consumed; CheckTable checks a
// table's key schema with one DescribeTable.
//
// # Transactional completion
//
// A handler may stage its own DynamoDB writes (Stage, with a client that
// implements TransactAPI; a *dynamodb.Client does): the store commits them
// with the handler's success in one TransactWriteItems, the record's Put,
// conditioned as Complete's, first (CompleteStaged, idem.StagedCompleter).
// Both land or neither does; a staged item's failed condition is the
// handler's failure (*idem.StagedWriteError). At most MaxTransactItems-1
// items are staged, and MaxTransactSize bytes in all with the record. A
// transactional write costs two write capacity units per KB of each item.
// docs/effectively-once.md has the guarantees and the costs.
//
// # Lease renewal
//
// RenewLease (idem.LeaseRenewer, for idem.WithLeaseRenewal) extends a
// holder's live lease with one UpdateItem (1 WCU) of lease_until_ms, the TTL
// attribute and updated_at_ms, conditioned on
// `status = in_progress AND lease_token = :token AND lease_until_ms > :now_ms
// AND lease_until_ms < :until_ms` (core.Renewable, and not core.Renewed). It
// needs a client that also implements UpdateAPI (UpdateItem; a
// *dynamodb.Client does).
//
// # What it does not promise
//
// Exactly once. A process that dies after its handler's side effect but
// before the completion is written leaves the key in progress; after the
// lease ends, a later delivery runs the handler again (side effects that
// are staged DynamoDB writes are the exception: they are committed with
// the completion or not at all). A completion that the store could not
// confirm (idem.ErrOutcomeNotRecorded) may nevertheless have been written:
// a duplicate then replays it. The store does not delete expired items (TTL
// does, lazily; dynalite and moto never do), uses transactions only for
// staged writes, and keeps times at the resolutions above.
package ddbstore
