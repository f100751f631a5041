package idemlambda

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// and reported for redelivery.
	itemFailed
	// itemSkipped: not started because an earlier record of its ordered
	// lane failed (idem.Blocked); it must be retried after that one.
	itemSkipped
)

// batchItem is one record as the engine sees it.
type batchItem struct {
	// key orders the records of one batch that share it: each starts
	// after the one before it in batch order has ended, so the first
	// record of a key in batch order is the one that executes, and a
	// duplicate replays its outcome (or is refused as a reused key)
	// instead of being refused as in progress. "" orders nothing.
	key string
	// lane names an ordered lane (a FIFO message group, a shard); records
	// of one lane run in order and stop at the first failure. Used only
	// when the batch is ordered.
	lane string
}

// batchPolicy is how the engine runs a batch.
type batchPolicy struct {
	concurrency  int           // records at once, at least 1
	safetyMargin time.Duration // least time before the deadline to start a record
	ordered      bool          // lanes are ordered and stop at their first failure
	now          func() time.Time
}

// processFunc processes record i and reports whether it failed (must be
// retried).
type processFunc func(ctx context.Context, i int) (failed bool)

// unprocessedFunc is told the verdict of record i when it ended without an
// answer from process, and why: idem.NotStarted (errNotStarted: no time
// left, or the invocation is over), idem.Blocked (errLaneStopped), or
// idem.Panicked (the panic of its processing).
type unprocessedFunc func(i int, v idem.Verdict, reason error)

var (
	errNotStarted  = fmt.Errorf("idemlambda: not started: less than the safety margin left before the deadline")
	errLaneStopped = fmt.Errorf("idemlambda: not started: an earlier record of its ordered lane did not succeed")
)

// batchRun is one run of the engine over a batch.
type batchRun struct {
	ctx         context.Context
	items       []batchItem
	pol         batchPolicy
	process     processFunc
	unprocessed unprocessedFunc
	states      []itemState     // each index written by one goroutine
	prev        []int           // the record before each one with its key, or -1
	done        []chan struct{} // closed when each record has ended
	sem         chan struct{}   // a slot per record running
}

// runBatch processes items under pol and returns each one's state. Records
// of one key run one after another in batch order, across lanes too; at most
// pol.concurrency records run at once. It never panics because of process:
// a panic is recovered and the record failed.
func runBatch(ctx context.Context, items []batchItem, pol batchPolicy, process processFunc, unprocessed unprocessedFunc) []itemState {
	b := &batchRun{ctx: ctx, items: items, pol: pol, process: process, unprocessed: unprocessed,
		states: make([]itemState, len(items)), prev: keyPredecessors(items),
		done: make([]chan struct{}, len(items)), sem: make(chan struct{}, max(pol.concurrency, 1))}
	for i := range b.done {
		b.done[i] = make(chan struct{})
	}
	var wg sync.WaitGroup
	for _, lane := range lanes(items, pol.ordered) {
		wg.Add(1)
		if pol.ordered {
			// Lanes are few (message groups, shards): each has its
			// goroutine, and takes a slot per record it runs.
			go func() { defer wg.Done(); b.lane(lane, true) }()
			continue
		}
		// One record a lane, started in batch order, holding its slot
		// throughout: a record waits only for an earlier one, which holds
		// a slot or has ended, so the batch always moves on.
		b.sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-b.sem }()
			b.lane(lane, false)
		}()
	}
	wg.Wait()
	return b.states
}

// lane runs the records of a lane in order, each after the record before it
// with its key, and, in an ordered batch, skips those after its first
// failure. slotEach: take a slot for each record run.
func (b *batchRun) lane(lane []int, slotEach bool) {
	stopped := false
	for _, i := range lane {
		if p := b.prev[i]; p >= 0 {
			<-b.done[p]
		}
		if stopped {
			b.states[i] = itemSkipped
			b.unprocessed(i, idem.Blocked, errLaneStopped)
			close(b.done[i])
			continue
		}
		if slotEach {
			b.sem <- struct{}{}
		}
		b.states[i] = runItem(b.ctx, i, b.pol, b.process, b.unprocessed)
		if slotEach {
			<-b.sem
		}
		stopped = b.pol.ordered && b.states[i] == itemFailed
		close(b.done[i])
	}
}

// keyPredecessors returns, for each record, the index of the record before
// it in batch order with the same key, or -1.
func keyPredecessors(items []batchItem) []int {
	prev := make([]int, len(items))
	last := make(map[string]int, len(items))
	for i, it := range items {
		prev[i] = -1
		if it.key == "" {
			continue
		}
		if p, ok := last[it.key]; ok {
			prev[i] = p
		}
		last[it.key] = i
	}
	return prev
}

// lanes groups record indexes: by lane, in order, for an ordered batch;
// one record a lane otherwise. Lanes come in the order of their first
// record.
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

// runItem runs one record when enough time is left; a panic fails it.
func runItem(ctx context.Context, i int, pol batchPolicy, process processFunc, unprocessed unprocessedFunc) (state itemState) {
	if err := ctx.Err(); err != nil {
		unprocessed(i, idem.NotStarted, fmt.Errorf("%w: %w", errNotStarted, err))
		return itemFailed
	}
	if deadline, ok := ctx.Deadline(); ok && deadline.Sub(pol.now()) < pol.safetyMargin {
		unprocessed(i, idem.NotStarted, errNotStarted)
		return itemFailed
	}
	defer func() {
		if p := recover(); p != nil {
			unprocessed(i, idem.Panicked, fmt.Errorf("idemlambda: panic: %v", p))
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
// record's stored key and payload in handle's context (withCall) and
// AWS-retryable errors marked transient (awsclassify.Mark).
func runRecord(ctx context.Context, runner *idem.Runner, key string, payload []byte, handle func(context.Context) ([]byte, error)) idem.Outcome {
	out, _ := runner.Do(ctx, key, payload, func(ctx context.Context) ([]byte, error) {
		res, err := handle(withCall(ctx, key, payload))
		return res, awsclassify.Mark(err)
	})
	return out
}

// acknowledged is the set of verdicts a batch wrapper acknowledges: always
// those of a record whose handler succeeded, and those WithAcknowledged
// adds. Every other verdict is reported.
type acknowledged map[idem.Verdict]bool

// succeeded are the verdicts acknowledged whatever the options: the
// handler's success, new or replayed, recorded or not (a success whose
// outcome could not be recorded would run again if redelivered).
var succeeded = []idem.Verdict{idem.Executed, idem.Replayed, idem.OutcomeNotRecorded}

// acknowledgeable are the verdicts WithAcknowledged accepts: those of a
// record that no redelivery can make succeed.
var acknowledgeable = []idem.Verdict{
	idem.FailedPermanently, idem.ReplayedFailure, idem.RetriesExhausted, idem.KeyReused,
	idem.MissingKey, idem.InvalidKey, idem.InvalidPayload,
}

// reports says whether a record whose verdict is v is reported for
// redelivery (in a stream: may be its shard's checkpoint), for every batch
// source: every verdict but those acknowledged.
func (a acknowledged) reports(v idem.Verdict) bool {
	return !slices.Contains(succeeded, v) && !a[v]
}

// reportPanic, deferred by a wrapper that lets its handler's panic through
// to the Lambda runtime (the HTTP wrappers, Typed), reports the panic as the
// call's verdict (idem.Panicked) and panics again with the same value.
func reportPanic(ctx context.Context, runner *idem.Runner, key string) {
	if p := recover(); p != nil {
		runner.Report(ctx, key, idem.Outcome{Verdict: idem.Panicked}, fmt.Errorf("idemlambda: panic: %v", p))
		panic(p)
	}
}

// keyVerdict is the verdict of a record whose key could not be derived:
// MissingKey when its source found nothing (ErrMissingKey), else InvalidKey.
func keyVerdict(err error) idem.Verdict {
	if errors.Is(err, ErrMissingKey) {
		return idem.MissingKey
	}
	return idem.InvalidKey
}
