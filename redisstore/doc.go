// Package redisstore is an idem.Store on Redis (or Valkey, which speaks the
// same protocol): the store for services that already run Redis and want
// one shared store for all their processes without DynamoDB. Every write is
// one Lua script, which Redis runs atomically, so of any number of
// concurrent callers in any number of processes, one reserves a key.
//
//	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	store, err := redisstore.New(client)
//	runner, err := idem.New(store)
//
// The client is the application's own go-redis client: a *redis.Client, a
// *redis.ClusterClient, a *redis.Ring or any redis.UniversalClient (the
// store needs only EvalSha and Eval; see Client). Addresses, credentials,
// TLS, timeouts and retries are the client's configuration.
//
// # Keys and fields
//
// A record is one Redis hash at "<prefix>{<key>}" (Store.Name; the prefix is
// "idem:" unless WithPrefix says otherwise). The key is a hash tag, so a
// record and anything the store may keep beside it later share one hash
// slot on Redis Cluster; every script touches that one key. Fields, all
// written by every write (empty when unset), so that one HSET replaces the
// whole record:
//
//	status          in_progress, succeeded or failed
//	token           fencing token of the lease that wrote the record; kept after completion
//	fp              hex SHA-256 of the canonical payload
//	attempts        executions started for the key, across deliveries
//	lease_ms        end of the lease, epoch milliseconds, rounded up ("" for none)
//	exp_ms          end of retention, epoch milliseconds, rounded up ("" for never)
//	result          succeeded only: the result, raw or gzip-compressed
//	result_omitted  "1" when the result was too large to keep, else "0"
//	retryable       "1" for a failure a later delivery may retry, else "0"
//	error           failed only: the handler error's message (shortened if it would not fit)
//	updated_ms      time of the write, epoch milliseconds
//	steps           in-progress and failed: the completed steps (idem.Step), "name=base64;..." in order
//	encoding        "gzip" when result is compressed, else ""
//
// # Time
//
// The store compares times only with the now its methods are given (the
// caller's clock, read once per invocation by the runner), never with the
// server's: the scripts receive now in milliseconds and apply
// core.Record.Expired, core.Reservable and core.SameWrite to it. Ends are
// rounded up when written and now is truncated when compared, so a record or
// lease is never treated as ended before its true end; it may outlive it by
// less than a millisecond. Records read back carry the rounded times, so
// core.Decide on them agrees with the scripts exactly.
//
// The server's clock serves only to delete records: every write sets
// PEXPIREAT to the later of the record's retention end and its lease end,
// plus a margin (DefaultExpiryMargin, WithExpiryMargin), so that the server
// never deletes a record whose lease lives even if its clock runs ahead of
// the callers'. Every read and script treats a record that is Expired at
// now as absent, whether or not the server has deleted it yet.
//
// # Calls
//
// Reserve is one EVALSHA whose script writes the reservation or answers
// with the record that blocks it, so a conflict costs one round trip, like
// DynamoDB's ALL_OLD. Complete is one EVALSHA conditioned on the lease.
// RecordStep (idem.StepRecorder) is one EVALSHA that applies core.AddStep
// and rewrites only the steps and updated_ms fields.
// Get is one EVALSHA of a script that returns the hash (HGETALL): a script
// runs on the key's primary whatever the client's read routing (a cluster
// client with ReadOnly would send a plain HGETALL to a replica, which may
// be behind), so reads are strongly consistent. The first time a server
// sees a script, EVALSHA is answered NOSCRIPT and one EVAL runs (and loads)
// it. Through an idem.Runner:
//
//	first run                           2 EVALSHA
//	duplicate of a completed key        1 EVALSHA
//	in progress elsewhere               1 EVALSHA
//	takeover of an expired lease        2 EVALSHA + 1 to complete
//	retry of a retryable failure        2 EVALSHA + 1 to complete
//
// With WithWait, each EVALSHA is pipelined with a WAIT on the same
// connection: the same round trips, each lasting until the replicas have
// acknowledged the write.
//
// # Large results
//
// The size policy is ddbstore's (its code is DynamoDB-specific, so the few
// lines are repeated here): a result of more than 4 KB
// (WithCompressionThreshold) is stored gzip-compressed when that makes it
// smaller. If the record would still pass the record size limit
// (DefaultMaxRecordSize, 400,000 bytes as ddbstore's, counted as the key
// name plus every field's name and value; WithMaxRecordSize), the succeeded
// outcome is stored without its result and with result_omitted: a
// duplicate is answered "succeeded" (idem.Outcome.ResultOmitted) and the
// handler does not run again. A failed record's message is shortened. A
// completion never fails for size. A reservation that cannot fit (a key over
// MaxKeySize, an enormous token) is refused before any call with a
// permanent error wrapping ErrKeyTooLarge or ErrRecordTooLarge.
//
// # Errors
//
// Client errors are translated once, here, by go-redis's typed errors and,
// where it has none, by the error code that starts a Redis error reply (the
// protocol's, never free message text), into an *Error{Op, Err} wrapping a
// sentinel and the client's error, marked for core.Classify:
//
//	LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN,
//	  READONLY, MOVED, ASK, OOM, NOREPLICAS, max clients   ErrUnavailable, transient
//	refused or failed dial, exhausted connection pool     ErrUnavailable, transient
//	timeouts, resets, a connection closed mid-answer      ErrUnavailable, transient
//	fewer replicas than WithWait asks                     ErrNotReplicated, transient
//	NOAUTH, WRONGPASS, NOPERM                             ErrAccessDenied, permanent
//	WRONGTYPE, a hash that does not decode                ErrCorruptRecord, permanent
//	other error replies                                   ErrRejected, permanent
//	context.Canceled, a closed client, unknown errors     no sentinel, permanent
//
// A store write is retryable only where retrying it cannot do harm. An error
// reply means the script did not write (it checks before it writes; a
// refused first write, such as OOM, leaves the record as it was). A
// timeout or a broken connection after the command was sent may hide an
// applied write. Both scripts recognise their own earlier write
// (core.SameWrite: same token, status and attempt) and answer it as the
// first try would have been answered; that is why these failures are marked
// transient, why go-redis's own retries (MaxRetries, 3 by default) are safe,
// and why the runner retries a completion. After such a failure Reserve and
// Complete also read the key once to look for their own write before
// reporting the error, so an applied reservation is not left orphaned (with
// WithWait, a write found so is reported as ErrNotReplicated: no WAIT
// confirmed it); if that read fails too, the orphan holds the key until its
// lease ends and is then taken over: the handler has not run, and nothing
// runs twice.
//
// # What the guarantees need from Redis
//
// The scripts make every decision atomic on the server that runs them. What
// survives a crash or a failover is Redis's to keep, and depends on its
// configuration:
//
//   - Persistence. Without it (or with RDB snapshots only) a restart forgets
//     every record since the last snapshot: a duplicate then executes again.
//     With appendonly yes and appendfsync everysec (Redis's default for AOF)
//     a crash of the server loses up to about a second of writes: a
//     reservation or an outcome acknowledged in that second may be lost,
//     and a duplicate may execute. Only appendfsync always makes an
//     acknowledged write survive a crash of the server, at the cost of one
//     fsync per write.
//   - Replication is asynchronous: a primary acknowledges a write before its
//     replicas have it, and a failover can promote a replica that lacks a
//     reservation, so a duplicate may execute. WithWait(replicas, timeout)
//     makes every write wait until that many replicas acknowledge it, and
//     fail (ErrNotReplicated, transient) otherwise; this narrows the window
//     but is not consensus: a failover may still promote a replica that had
//     not acknowledged, and a replica's acknowledgement is not an fsync.
//     Services that need acknowledged writes to survive failures use a
//     Redis-compatible store with a durable, synchronously replicated log
//     (for example Amazon MemoryDB), or DynamoDB (ddbstore).
//   - Eviction must be off for these keys: maxmemory-policy noeviction.
//     Every record has an expiry, so the volatile-* policies can evict it
//     as readily as the allkeys-* ones, and an evicted live reservation or
//     outcome lets a duplicate execute. With noeviction a full server
//     refuses writes (OOM, transient) instead.
//   - Clocks: leases and retention use the callers' time (see Time); the
//     runner's lease margin (idem.WithLease) is the allowance for skew
//     between callers, the expiry margin the one for skew with the server.
//   - Cluster: one key per record, one slot per key (the hash tag); a
//     *redis.ClusterClient follows MOVED and ASK itself. A plain client
//     pointed at one node of a cluster gets MOVED for other slots' keys
//     (transient; use a cluster client). Every call is a script: Lua
//     scripting must be enabled, and EVALSHA, EVAL (and, with WithWait,
//     WAIT) permitted by the ACL.
//
// # What it does not promise
//
// Exactly once. A process that dies after its handler's side effect but
// before the completion is written leaves the key in progress; after the
// lease ends, a later delivery runs the handler again. A completion the
// store could not confirm (idem.ErrOutcomeNotRecorded) may nevertheless have
// been written: a duplicate then replays it. And everything above that
// Redis itself does not keep. The store is tested with Redis 7.0. It needs
// Redis 4.0 or later (HSET with several fields) and uses only commands that
// Valkey keeps as Redis has them (EVALSHA, EVAL, and in the scripts HGETALL,
// HSET, PEXPIREAT, PERSIST; WAIT), but is not tested on Valkey here.
package redisstore
