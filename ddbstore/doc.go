// Package ddbstore is an idem.Store on a DynamoDB table: the store to use when
// more than one process (Lambda sandboxes, containers) handles the same keys.
// Every write is one conditional write, which DynamoDB applies atomically,
// so of any number of concurrent callers in any number of processes, one
// reserves a key.
//
//	cfg, _ := config.LoadDefaultConfig(ctx, config.WithRetryMaxAttempts(5))
//	store, err := ddbstore.New(dynamodb.NewFromConfig(cfg), "idem")
//	runner, err := idem.New(store)
//
// The reference is docs/dynamodb.md: the table's layout, the path of each
// operation (its requests in order, their conditions and the IAM actions
// they need, held by a test against the requests the store sends), the
// errors, and the records of earlier versions.
//
// # Reading the code
//
// One file per operation, in the order a call meets them: acquire.go (the
// one-write reservation idem.Runner makes), store.go (the Store, Reserve,
// Get, its options, and the reads every operation shares), complete.go, steps.go and
// stepitems.go (idem.Step: a step is an item of its own, referenced from
// the record), renew.go, tx.go (a success with staged writes), admin.go
// (Release, and the operator's List). requests.go holds the parts the
// requests share (the replacement of a record, the conditions on prev and
// on the steps), codec.go the encoding of a record, legacy.go the reading
// of earlier versions' records, errors.go the translation of AWS errors,
// resultitems.go results kept in an item of their own, large.go results
// kept in a blob store, layout.go the key schema and the
// attribute names, client.go what the store asks of its client, and
// table.go the table's creation and checks.
//
// # Table
//
// One item per key, one per step of an execution, and one per result that
// would make its record pass one write unit (RecordUnit). By default, in a
// table of its own with a string partition key "pk" and no sort key
// (CreateTable makes one; so do the SAM template and the LocalStack init
// script); WithSortKey, WithSortKeyFunc, WithKeyPrefix and
// WithAttributeNames fit the records into a single-table design. The
// attributes are the Attr* constants: status, fingerprint, lease_token,
// lease_until_ms, attempts, attempts_carried (the count a one-write
// reservation continues), expires_at (the TTL attribute, epoch seconds),
// updated_at_ms, retryable, error, result (raw or gzip), result_encoding,
// result_omitted, result_item/result_sha256/result_size (a result kept in
// an item of its own), result_ref/result_sha256/result_size (WithLargeResults),
// and the steps' steps, step_names, steps_size and steps_until.
//
// # Time
//
// The store converts times only here, at the edge: retention in epoch
// seconds (DynamoDB's TTL ignores anything else), leases in milliseconds.
// Ends are rounded up when written and the current time is truncated when
// compared, so a record or lease is never treated as ended before its true
// end. Records read back carry the rounded times, so core.Decide on them
// agrees with the store's conditions exactly. DynamoDB deletes expired items
// lazily; every read and condition treats an item whose expires_at is at or
// before now as absent, whether or not it is still there.
//
// # Calls
//
// Through an idem.Runner, on DynamoDB (and on servers that return the
// blocking item with a refused condition; dynalite does not, and needs one
// GetItem more for each refusal):
//
//	first run                           1 UpdateItem + 1 PutItem
//	duplicate of a completed key        1 UpdateItem
//	in progress elsewhere               1 UpdateItem
//	takeover of an expired lease        1 UpdateItem + 1 PutItem
//	retry of a retryable failure        1 UpdateItem + 1 PutItem
//
// A result that would make the record pass one write unit is one PutItem
// more on its first run (its result item) and one GetItem per replay, so
// that the record's own writes cost one unit whatever the result. Each
// step (idem.Step) is one PutItem (its item) and one UpdateItem (its
// reference) more; a takeover or a retry that carries steps reads their
// items with one BatchGetItem per 100. Each operation has one path,
// whatever the client and its IAM policy: a request refused for a
// permission fails with an error that names the action to grant
// (ErrAccessDenied, idem.ErrMisconfigured).
//
// # Errors
//
// AWS errors are translated once, here, by type and error code, never by
// message text, into an *Error{Op, Table, Err} wrapping a sentinel and the
// SDK's error, marked for core.Classify (docs/dynamodb.md has the table). A
// store write is retryable only where retrying it cannot do harm: every
// write is conditional and carries the lease token, so a retry recognises
// its own earlier write; after a failure that may have been applied (a
// timeout, a reset, a 5xx, a reply cut short), the store reads the record
// before it reports the error. The store sets no retries of its own:
// configure the SDK client (config.WithRetryMaxAttempts); the idem.Runner
// retries completions within the invocation's deadline.
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
