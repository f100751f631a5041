// Package sim is a deterministic simulation of idem's runner over a shared
// store, in the style of FoundationDB's and TigerBeetle's simulators: many
// processes run the real idem.Runner against one store while a seeded
// scheduler decides every interleaving, every delay and every fault, and a
// shadow model checks invariants at every step. Run(cfg) makes one run; the
// same Config makes the same run, step for step (Result.Hash digests it).
//
// # Model
//
// A run has services (Config.Services): functions sharing one table, each
// with its own key prefix, runner options (retention, max attempts,
// retries, cache, ...), deliveries and handler. A service has sandboxes:
// processes, each with its own idem.Runner made by idem.New with the
// service's options plus WithClock (the sandbox's clock), WithSleep (a sleep
// in simulated time), WithRand (the run's seeded source) and WithTokens
// (unique tokens from a counter); see runnerOptions. Each sandbox's clock is
// simulated time skewed by less than half the service's lease margin, so
// that two clocks differ by less than the margin (the skew a lease allows).
//
// Every runner calls the same store: the store under test (Config.NewStore:
// memstore, or ddbstore on dynalite) wrapped in a fault-injecting idem.Store,
// or a global table of two Regions (Config.Regions; see Two Regions below).
//
// Each delivery (one Runner.Do call) runs in its own goroutine, but only one
// goroutine runs at a time: the scheduler pops the earliest event of a queue
// ordered by simulated time, then by a random draw, hands control to that
// event's goroutine over a channel, and waits until the goroutine yields
// back. The yield points are both legs (request, answer) of every store
// call, the start and the run of every handler try, and every sleep. Time is
// a virtual clock the scheduler advances to the next event: store latencies,
// handler durations and backoff sleeps pass in simulated time, never on the
// wall clock.
//
// Faults (Config.Faults and each Service), all drawn from the seed:
//   - a process crash at any yield point: before or after a store write (the
//     write applied, its answer never read), before or during a handler,
//     during a backoff; the goroutine unwinds with a private panic and does
//     nothing more;
//   - a store write applied whose answer is lost: the wrapper calls the
//     inner store, then returns an error marked with core.MarkTransient;
//   - throttling (a transient error, not applied) and timeouts (an error
//     wrapping context.DeadlineExceeded, not applied);
//   - deadlines: none (the 15-minute default lease), Lambda's (the deadline
//     on the true clock; the process is killed when it passes, wherever it
//     is), or a service's request timeout (the deadline on the sandbox's
//     clock; the context is cancelled when it passes and the process goes
//     on); and callers that hang up (context.Canceled);
//   - handler tries of random duration that succeed, fail transiently
//     (core.MarkTransient, sometimes with a Retry-After), fail permanently
//     (core.MarkPermanent), fail with an ordinary error, or refuse and ask
//     to leave no record (core.MarkNoRecord, an HTTP handler's 401: the
//     runner releases its reservation),
//     heeding their context (a try stops when its context ends and returns
//     the context's error); optionally some that overrun it (Service.Overrun);
//   - deliveries at random times over a few keys per service, bursts of
//     copies within 50 ms, payloads that reuse a key, and redeliveries of
//     every call that did not end for good (crashed, in progress, failed
//     transiently, outcome not recorded, store error), as a queue does.
//
// # Invariants
//
// The wrapper compares each answer of the inner store with a shadow model
// of the record it must hold for the key; tries, outcomes and lifetimes are
// tracked beside it. A violation records the seed, the step, the simulated
// time and the key's last events (Violation.Error prints them).
//
//  1. OneSuccess: a success accepted for a key in a record lifetime that
//     began (a reservation over no record, or a record past retention)
//     while an earlier success was retained, allowing for clock skew, is a
//     violation.
//  2. Fencing: an accepted reservation must be allowed by the Store
//     contract at the now it was given (core.Reservable: without a
//     decision's record, no live record; with one, that record, with an
//     ended lease or a retryable failure, and never a key it has left),
//     and never replace
//     an in-progress record whose lease is live, whatever its retention; a
//     conflict must report the stored record; an accepted completion must
//     come from the holder of the current lease.
//  3. NoOverlap: no two handler tries of one key run at the same time (in
//     true, unskewed time). Handler durations stay below the lease without a
//     deadline less twice the margin, so a runner that keeps its lease never
//     overlaps; the one exemption is a try that overran (Service.Overrun)
//     once it passed the end a heeding try would have had.
//  4. Outcome: every call ends in a recorded outcome, ErrInProgress,
//     ErrKeyReused (only if another payload ever held the key),
//     ErrRetriesExhausted, ErrTransientFailure, ErrUnclassifiedFailure, a
//     permanent failure (a
//     replayed one only if one was recorded), ErrOutcomeNotRecorded or
//     ErrLeaseLost, ErrCommitRefused (only if the store accepted no success
//     from the call), a store error (injected or the context's), or a crash. A
//     new result must be one the store accepted from this call; a replayed
//     result must be one the store accepted for this key and payload.
//  5. Attempts: the executions of a key in one record lifetime (the calls
//     that ran its handler, however many in-process tries each made) never
//     exceed the service's maximum attempts (WithMaxAttempts's; none for
//     calls marked with idem.ContextWithSourceLimit, the SQS wrapper's
//     included; else idem.DefaultMaxAttempts), and a call's tries never
//     exceed WithRetry's.
//  6. StoreContract: a write retried after its answer was lost is recognised
//     (an identical reservation or completion succeeds); a completion from
//     the holder of a retained record is accepted; a completion of a record
//     past its retention at the completion's time is refused with
//     ErrLeaseLost (Config.StoreResolution allows for a store that rounds
//     retention ends up).
//  7. Cancellation: a permanent failure is never recorded for a try that
//     returned its context's error.
//  8. StepOnce: with Service.Steps, every handler try runs two steps
//     (idem.Step, one at its start and one at its end) through the fault
//     wrapper's RecordStep; a step's function never runs in a record
//     lifetime once the store accepted that step. A step whose function ran
//     but whose write was never applied may run again, as documented.
//  9. StepResult: a step that idem.Step skips returns the result recorded in
//     its record lifetime; a reservation that starts a lifetime (over no
//     record, an expired one, or a released one) carries no step.
//  10. StepLiveness: a step is refused for lack of time only when the lease
//     the runner holds (its last renewal) leaves none.
//  11. HandlerContext: no handler's context is live once another execution
//     of its key has started (renewal must cancel it before its lease ends).
//  12. Staged: a try's staged writes land if and only if its success is
//     recorded, and once; a commit refused by a staged write's own condition,
//     or as a whole (a hot item: idem.ErrCommitRefused), lands none.
//  13. ReplayExact: a result returned, new or replayed (from the store, the
//     blob store or a runner's cache), is byte for byte the one recorded, or
//     the call fails with a typed error; a result is omitted only where the
//     store cannot keep it (Config.OmitAbove).
//  14. Release: a record an operator released, or its holder (a try marked
//     core.MarkNoRecord), is never brought back by a late write, and a
//     cache replays a released success for at most its TTL; a holder's
//     release deletes only the in-progress record it holds.
//  15. Batch: a batch wrapper reports exactly the records that did not
//     succeed, and an ordered lane runs no record after its first that did
//     not.
//  16. Classification: a try that failed with an ordinary error (no mark,
//     no classifier) is never recorded as a permanent failure unless the
//     service runs idem.WithUnclassifiedPermanent, and a call that ends
//     failed_unclassified (ErrUnclassifiedFailure) had such a try last.
//  17. NoDuplicate (runs of two Regions): no execution of a key (a call's
//     first handler try) begins while an earlier one holds a live lease
//     (its reservation, which a replica accepted, neither completed nor
//     released, its lease as last written not ended), nor while a success
//     of the key that a replica accepted is retained and not released;
//     both allowing for clock skew. Over one linearizable store this
//     follows from NoOverlap and Fencing.
//  18. NoLostOutcome (runs of two Regions): once every replicated write has
//     arrived, every outcome a replica accepted is in the history of a
//     replica's last write of its key: no write that never saw it
//     overwrote it (last writer wins).
//
// # Capabilities
//
// Services turn on, alone or together, the runner's and the store's
// capabilities: lease renewal (WithLeaseRenewal; the renewal goroutine of
// each try, a call's next tries included, is scheduled and its calls
// faulted like the handler's), bounded waits and
// in-process coalescing (WithWait), the local cache (WithCache), steps
// (idem.Step), staged writes (idem.Stage; Config.Stager), large results
// (Config.NewStoreBlob: a blob store faulted like the store), fingerprint
// selection, the batch wrappers, and the one-write Acquire or Reserve
// (Service.ReserveOnly). Faults.Release adds an operator that releases
// records; Faults.Downgrade rewrites outcomes and steps in the store's
// previous encoding (PreviousEncoding); Faults.Sweep runs, page by page, a
// sweep that deletes the records past retention (ExpiredSweeper, as idem
// sweep does), and checks that each record it deleted was past retention
// when deleted. Config.Draw adds services whose
// options and capabilities are drawn from the seed (Drawn).
//
// # Two Regions
//
// Config.Regions makes the store a DynamoDB global table of two Regions, A
// and B (regions.go): each Region's replica is an in-memory store that
// applies its own conditional writes against its own state; every write it
// applies is replicated to the other after a lag drawn from the seed
// (Regions.LagMin to LagMax, each write on its own, so that writes may
// arrive out of order) and applied there unless that replica holds a later
// write of the item: last writer wins, per item, by the instant each write
// was applied, silently. Even sandboxes are in Region A, odd ones in B. The
// mode (Regions.Mode) says where a call goes: under MRECEveryRegion to the
// replica of its sandbox's Region; under MRECHomeRegion to the home
// Region's, A, or A and B in turn (Regions.SwitchEvery, at once); under MRSC
// both Regions share one state, and a write to an item the other Region
// wrote less than Regions.ConflictWindow before is refused with a
// transient "replicated write conflict". Service.Copies delivers each event
// more than once, each copy in a Region drawn with Regions.Cross; Regional
// is such a service.
//
// Such a run also checks invariants 17 and 18 and counts what happened
// (Result.Regions). The invariants hold for every key under MRECHomeRegion
// without switches and under MRSC. Under MRECEveryRegion no invariant is
// promised across Regions: violations are counted (RegionStats.Excused),
// not reported. At a switch of the home Region, the keys with a write on
// its way to the new home are excused from then on; every other key keeps
// every invariant. The staged writes of idem.Stage are not modelled (the
// replicas commit none: services that stage don't belong in such runs).
//
// # Replay
//
// A failing test prints the command that replays it, for example
//
//	go test ./internal/sim -run '^TestSim$' -sim.seed=1 -sim.n=100000
//
// (IDEM_SIM_SEED=1 does the same as -sim.seed). Runs over ddbstore are
// deterministic too: the scheduler serializes the store calls, so the real
// I/O only makes them slower.
//
// # Not modelled
//
// The runner's own wall-clock timer (the 2-second bound on a completion
// written after the context ended) never fires: contexts the runner derives
// from a delivery's context are never done in simulated time. The inner
// store receives a background context: its calls are bounded on the wall
// clock only. Processes handle any number of deliveries at once, and a crash
// ends one delivery, not the whole process.
//
// In a run of two Regions, calls take the same time in both Regions (a
// call that crosses Regions is no slower), both Regions' timestamps are the
// true instant, and there is no third Region (MRSC's witness).
package sim
