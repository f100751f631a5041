package idemlambda

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/awsclassify"
)

// The batch engine: what every batch source (SQS, and the ordered sources
// that come with lanes: FIFO message groups, Kinesis and DynamoDB Streams
// shards) shares. It knows
// nothing of an event type: an adapter gives it one batchItem per record and
// a function that processes record i, and maps the states it returns to the
// source's partial-failure report.

// itemState is what became of one record of a batch.
type itemState int

const (
	// itemDone: processed, acknowledged.
	itemDone itemState = iota
	// itemFailed: processed, or not started for lack of time or a panic,
	// and must be retried.
	itemFailed
	// itemSkipped: not started because an earlier record of its ordered
	// lane failed; it must be retried after that one.
	itemSkipped
)

// batchItem is one record as the engine sees it.
type batchItem struct {
	// key serialises records of one batch that share it (a duplicate
	// within a batch replays the first one's outcome instead of being
	// refused as in progress); "" means no serialisation.
	key string
	// lane names an ordered lane (a FIFO message group, a shard); records
	// of one lane run in order and stop at the first failure. Used only
	// when the batch is ordered.
	lane string
}

// batchPolicy is how the engine runs a batch.
type batchPolicy struct {
	concurrency  int           // lanes (or records) at once, at least 1
	safetyMargin time.Duration // least time before the deadline to start a record
	ordered      bool          // lanes are ordered and stop at their first failure
	now          func() time.Time
}

// processFunc processes record i and reports whether it failed (must be
// retried).
type processFunc func(ctx context.Context, i int) (failed bool)

// unprocessedFunc is told why record i ended without an answer from
// process: errNotStarted (no time left, or the invocation is over),
// errLaneStopped, or the panic of its processing.
type unprocessedFunc func(i int, reason error)

var (
	errNotStarted  = fmt.Errorf("idemlambda: not started: less than the safety margin left before the deadline")
	errLaneStopped = fmt.Errorf("idemlambda: not started: an earlier record of its ordered lane failed")
)

// runBatch processes items under pol and returns each one's state. It never
// panics because of process: a panic is recovered and the record failed.
func runBatch(ctx context.Context, items []batchItem, pol batchPolicy, process processFunc, unprocessed unprocessedFunc) []itemState {
	states := make([]itemState, len(items)) // each index written by one goroutine
	locks := make(map[string]*sync.Mutex, len(items))
	for _, it := range items {
		if it.key != "" && locks[it.key] == nil {
			locks[it.key] = new(sync.Mutex)
		}
	}
	sem := make(chan struct{}, max(pol.concurrency, 1))
	var wg sync.WaitGroup
	for _, lane := range lanes(items, pol.ordered) {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for j, i := range lane {
				states[i] = runItem(ctx, i, locks[items[i].key], pol, process, unprocessed)
				if states[i] == itemFailed && pol.ordered {
					for _, k := range lane[j+1:] {
						states[k] = itemSkipped
						unprocessed(k, errLaneStopped)
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	return states
}

// lanes groups record indexes: by lane, in order, for an ordered batch;
// one record a lane otherwise.
func lanes(items []batchItem, ordered bool) [][]int {
	var out [][]int
	byLane := map[string]int{}
	for i, it := range items {
		if !ordered {
			out = append(out, []int{i})
			continue
		}
		l, ok := byLane[it.lane]
		if !ok {
			l = len(out)
			byLane[it.lane] = l
			out = append(out, nil)
		}
		out[l] = append(out[l], i)
	}
	return out
}

// runItem runs one record under its key's lock, if it has one, when enough
// time is left; a panic fails it.
func runItem(ctx context.Context, i int, lock *sync.Mutex, pol batchPolicy, process processFunc, unprocessed unprocessedFunc) (state itemState) {
	if lock != nil {
		lock.Lock()
		defer lock.Unlock()
	}
	if err := ctx.Err(); err != nil {
		unprocessed(i, fmt.Errorf("%w: %w", errNotStarted, err))
		return itemFailed
	}
	if deadline, ok := ctx.Deadline(); ok && deadline.Sub(pol.now()) < pol.safetyMargin {
		unprocessed(i, errNotStarted)
		return itemFailed
	}
	defer func() {
		if p := recover(); p != nil {
			unprocessed(i, fmt.Errorf("idemlambda: panic: %v", p))
			state = itemFailed
		}
	}()
	if process(ctx, i) {
		return itemFailed
	}
	return itemDone
}

// laneCheckpoints returns, for an ordered batch whose states runBatch
// returned, the index of each lane's first record that is not done, in batch
// order: the record a stream reports as its shard's checkpoint. Every record
// of the lane before it is done; every one after it was skipped and comes
// back with it when the source redelivers from the checkpoint. Lanes whose
// records are all done have none.
func laneCheckpoints(items []batchItem, states []itemState) []int {
	stopped := map[string]bool{}
	var out []int
	for i, it := range items {
		if states[i] == itemDone || stopped[it.lane] {
			continue
		}
		stopped[it.lane] = true
		out = append(out, i)
	}
	return out
}

// runRecord runs one record of a batch through runner under key, with the
// record's stored key in handle's context and AWS-retryable errors marked
// transient (awsclassify.Mark), and reports whether the record must be
// retried (batchReport).
func runRecord(ctx context.Context, runner *idem.Runner, key string, payload []byte, toDLQ bool, handle func(context.Context) ([]byte, error)) (idem.Outcome, error, bool) {
	out, err := runner.Do(ctx, key, payload, func(ctx context.Context) ([]byte, error) {
		res, err := handle(withStoredKey(ctx, key))
		return res, awsclassify.Mark(err)
	})
	return out, err, batchReport(out.Verdict, toDLQ)
}

// batchReport says whether a record whose call had verdict v is reported
// for redelivery, for every batch source:
//   - done (acknowledged): executed, replayed, and a success whose outcome
//     could not be recorded (redelivering it would run the handler again);
//   - permanent (acknowledged, or reported with toDLQ so that the queue's
//     redrive policy moves it on): a new or replayed permanent failure, a
//     key reused with another payload, retries exhausted, an unusable key
//     or payload;
//   - anything else is reported: a transient failure, a store failure, a
//     key in progress elsewhere, and any verdict this list does not name.
func batchReport(v idem.Verdict, toDLQ bool) bool {
	switch v {
	case idem.Executed, idem.Replayed, idem.OutcomeNotRecorded:
		return false
	case idem.FailedPermanently, idem.ReplayedFailure, idem.KeyReused, idem.RetriesExhausted, idem.InvalidKey, idem.InvalidPayload:
		return toDLQ
	}
	return true
}
