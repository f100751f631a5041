// Package linz checks idem's stores against a model of the store contract:
// histories of concurrent clients for linearizability (with
// github.com/anishathalye/porcupine), and random sequences of calls for
// equality with the model after every call (with pgregory.net/rapid's
// stateful tests). It is used by the tests of memstore, ddbstore (dynalite
// and moto) and redisstore, and by its own (several processes).
//
// # The model
//
// Model is the sequential specification of idem.Store and its optional
// capabilities (idem.Acquirer, idem.StepRecorder, idem.LeaseRenewer,
// idem.Releaser, idem.StagedCompleter), one key at a time: Model.Step
// gives, for the stored record of a key (State) and one call (Op), the
// store's answer (Result: a Verdict and the records answered) and the
// record it leaves. It is written with core's own rules, not a second copy
// of them: core.Record.Expired, core.SameWrite, core.Reservable,
// core.Acquirable, core.Acquire, core.Acquired, core.AddStep,
// core.Renewable, core.Renewed and core.Renew, in the order the method docs
// state them. Records are stored at the store's Resolution (ddbstore keeps
// retention in seconds, rounded up; leases and updates in milliseconds).
// CompleteStaged carries one staged write, which adds 1 to the key's
// effect counter: the model checks that it lands if and only if the
// success does, and once (Effects reads the counter).
//
// # Linearizability (RunLinearizable, CheckHistory)
//
// A Workload runs clients at once on one Target, sharing a fake clock and
// a few keys at a time: random clients, which act as runners do (read or
// acquire, decide with core.Decide, reserve, record steps, renew, complete
// or crash) and as runners do not (decisions on stale reads, completions
// after the lease ended, releases of records read earlier, clocks that
// lag), and idem.Runners, whose calls go through a proxy store that
// records them. Every call is recorded in a History with the wall-clock
// times of its call and return. The fault kit's faults (storetest.Fault)
// are injected at random (Faults): into the DynamoDB client's HTTP
// requests in DynamoDB's own shapes (Transport; half the lost answers and
// half the throttles come cut short, their body ending early at whatever
// status), into the Redis client's commands (RedisHook; half the lost
// answers cut short), or around memstore's calls (Target.Faults). A write
// whose answer is a transient error may or may not have been applied: the
// history gives it no end (Pending), so that porcupine may place it at any
// point after its call, or after every other call (never). A read whose
// answer is a transient error changed nothing and is left out.
//
// The history is checked per key (a store's keys are independent).
// Model.LostAnswers accepts the one answer the contract allows a store that
// recovers its own write after losing its answer: an Acquire with no prev;
// Model.StepsApart, those of a store that keeps steps apart from its records
// (ddbstore): a blocking record without its steps where the caller may not
// resume it (core.Resumable). Any other error than the contract's is Failed, which the model never
// answers. A history that is not linearizable, or whose check does not end
// within CheckTimeout, fails the test with the paths of porcupine's HTML
// visualisation and of a text explanation (Explain: the longest order the
// model accepts, and the calls none of which can come next).
//
// The processes test of this package (TestProcesses) runs the workload in
// three OS processes, this test binary run again as a worker, on one
// dynalite table and on one Redis server, each process with its own
// clients, connections and fake clock (their clocks drift apart), and
// checks the merged history.
//
// # Model-based tests (RunModel)
//
// rapid draws sequences of calls of every kind the target takes on two
// keys, with two fingerprints, fresh and stale lease tokens and prevs,
// retried writes, and a fake clock the machine advances (by whole and
// fractions of milliseconds; callers may lag it). After every call the
// store's answer is compared with the model's, and the key is read back.
// Shrunk counterexamples are saved in the store package's
// testdata/rapid/, and replayed before the random ones on every run.
//
// # What is not checked
//
//   - moto's atomicity: moto does not apply conditional writes atomically
//     under concurrency, so its targets make one call at a time
//     (Target.Serial). Their histories still have concurrent clients and
//     faults, and check the store's logic and moto's API (the blocking
//     record in a refused write's error, transactions for CompleteStaged),
//     but not concurrency, which the dynalite and Redis runs check.
//   - Deletion by the server: records live past their retention until a
//     write replaces them (dynalite and moto never delete; Redis deletes at
//     its own clock, long after the runs' fake times).
//   - What the model leaves out: large results (ResultOmitted, the blob
//     store), key and record size limits, Redis replication (WithWait),
//     staged writes refused by their own condition, custom table layouts,
//     and records written by earlier versions of a store.
//   - The runner's own behaviour (one execution at a time, verdicts,
//     renewal, waiting): only its calls of the store are checked here; the
//     simulation (internal/sim) checks the runner.
//
// Sizes are set by each test and raised with IDEM_LINZ_HISTORIES,
// IDEM_LINZ_CLIENTS, IDEM_LINZ_OPS, RAPID_CHECKS and RAPID_STEPS (make
// test-long; docs/development.md).
package linz
