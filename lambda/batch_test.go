package idemlambda

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

func TestBatchEngine(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	pol := batchPolicy{concurrency: 4, safetyMargin: 2 * time.Second, now: func() time.Time { return t0 }}
	for _, tc := range []struct {
		name        string
		items       []batchItem
		ordered     bool
		deadline    time.Duration // from t0; 0 means none
		fail        map[int]bool  // records whose processing fails
		panics      map[int]bool
		want        []itemState
		wantReasons map[int]error // reasons given to unprocessed
	}{
		{name: "all done", items: make([]batchItem, 3), want: []itemState{itemDone, itemDone, itemDone}},
		{name: "unordered failure stops nothing", items: []batchItem{{lane: "g"}, {lane: "g"}, {lane: "g"}}, fail: map[int]bool{0: true},
			want: []itemState{itemFailed, itemDone, itemDone}},
		{name: "ordered lane stops at its first failure", ordered: true,
			items: []batchItem{{lane: "a"}, {lane: "b"}, {lane: "a"}, {lane: "a"}, {lane: "b"}}, fail: map[int]bool{0: true},
			want: []itemState{itemFailed, itemDone, itemSkipped, itemSkipped, itemDone}, wantReasons: map[int]error{2: errLaneStopped, 3: errLaneStopped}},
		{name: "panic fails the record only", items: make([]batchItem, 2), panics: map[int]bool{1: true},
			want: []itemState{itemDone, itemFailed}},
		{name: "no time left: nothing starts", items: make([]batchItem, 2), deadline: time.Second,
			want: []itemState{itemFailed, itemFailed}, wantReasons: map[int]error{0: errNotStarted, 1: errNotStarted}},
		{name: "time left", items: make([]batchItem, 1), deadline: 3 * time.Second, want: []itemState{itemDone}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Hour))
				defer cancel()
				ctx = fixedDeadline{ctx, t0.Add(tc.deadline)}
			}
			p := pol
			p.ordered = tc.ordered
			var mu sync.Mutex
			reasons := map[int]error{}
			verdicts := map[int]idem.Verdict{}
			got := runBatch(ctx, tc.items, p, func(ctx context.Context, i int) bool {
				if tc.panics[i] {
					panic(fmt.Sprintf("record %d", i))
				}
				return tc.fail[i]
			}, func(i int, v idem.Verdict, reason error) {
				mu.Lock()
				reasons[i] = reason
				verdicts[i] = v
				mu.Unlock()
			})
			if !slices.Equal(got, tc.want) {
				t.Fatalf("states = %v, want %v", got, tc.want)
			}
			for i, want := range tc.wantReasons {
				if !errors.Is(reasons[i], want) {
					t.Errorf("record %d: reason %v, want %v", i, reasons[i], want)
				}
				if wantV := map[error]idem.Verdict{errLaneStopped: idem.Blocked, errNotStarted: idem.NotStarted}[want]; verdicts[i] != wantV {
					t.Errorf("record %d: verdict %v, want %v", i, verdicts[i], wantV)
				}
			}
			for i := range tc.panics {
				if reasons[i] == nil || verdicts[i] != idem.Panicked {
					t.Errorf("record %d panicked and unprocessed was told %v, %v", i, verdicts[i], reasons[i])
				}
			}
		})
	}
}

type fixedDeadline struct {
	context.Context
	at time.Time
}

func (c fixedDeadline) Deadline() (time.Time, bool) { return c.at, true }

// TestBatchEngineBoundsAndSerialises checks the concurrency bound and that
// records sharing a key never run at once.
func TestBatchEngineBoundsAndSerialises(t *testing.T) {
	items := make([]batchItem, 40)
	for i := range items {
		items[i].key = fmt.Sprintf("k%d", i%5)
	}
	var running, peak atomic.Int32
	var perKey [5]atomic.Int32
	states := runBatch(context.Background(), items, batchPolicy{concurrency: 3, now: time.Now}, func(ctx context.Context, i int) bool {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if perKey[i%5].Add(1) != 1 {
			t.Errorf("record %d: another record with key k%d is running", i, i%5)
		}
		time.Sleep(time.Millisecond) // real overlap for the race to show
		perKey[i%5].Add(-1)
		return false
	}, func(int, idem.Verdict, error) {})
	if p := peak.Load(); p > 3 || p < 1 {
		t.Errorf("peak concurrency %d, want 1..3", p)
	}
	for i, s := range states {
		if s != itemDone {
			t.Fatalf("record %d: %v", i, s)
		}
	}
}

func TestLaneCheckpoints(t *testing.T) {
	d, f, s := itemDone, itemFailed, itemSkipped
	lane := func(ls ...string) []batchItem {
		items := make([]batchItem, len(ls))
		for i, l := range ls {
			items[i].lane = l
		}
		return items
	}
	for _, tc := range []struct {
		name   string
		items  []batchItem
		states []itemState
		want   []int
	}{
		{name: "all done", items: lane("a", "a"), states: []itemState{d, d}, want: nil},
		{name: "the failed record, not the skipped ones after it", items: lane("a", "a", "a", "a"), states: []itemState{d, f, s, s}, want: []int{1}},
		{name: "the first record failed", items: lane("a", "a"), states: []itemState{f, s}, want: []int{0}},
		{name: "one per lane, in batch order", items: lane("a", "b", "b", "a", "b", "a"), states: []itemState{d, f, s, f, s, s}, want: []int{1, 3}},
		{name: "a lane all done among stopped ones", items: lane("a", "b", "c", "b"), states: []itemState{f, d, f, d}, want: []int{0, 2}},
		{name: "empty batch", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := laneCheckpoints(tc.items, tc.states); !slices.Equal(got, tc.want) {
				t.Errorf("laneCheckpoints = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBatchEngineOrderedLaneThenCheckpoint runs an ordered batch through the
// engine and takes its checkpoints, as the stream adapters do: records of a
// lane run strictly one after another, in batch order, and a failure's lane
// reports that record only.
func TestBatchEngineOrderedLaneThenCheckpoint(t *testing.T) {
	items := []batchItem{{lane: "a"}, {lane: "b"}, {lane: "a"}, {lane: "a"}, {lane: "b"}, {lane: "a"}}
	var mu sync.Mutex
	var ran []int
	states := runBatch(context.Background(), items, batchPolicy{concurrency: 2, ordered: true, now: time.Now}, func(ctx context.Context, i int) bool {
		mu.Lock()
		ran = append(ran, i)
		mu.Unlock()
		return i == 3
	}, func(int, idem.Verdict, error) {})
	var laneA []int
	for _, i := range ran {
		if items[i].lane == "a" {
			laneA = append(laneA, i)
		}
	}
	if !slices.Equal(laneA, []int{0, 2, 3}) {
		t.Errorf("lane a ran %v, want [0 2 3]: in order, and nothing after its failure", laneA)
	}
	if got := laneCheckpoints(items, states); !slices.Equal(got, []int{3}) {
		t.Errorf("checkpoints %v, want [3] (states %v)", got, states)
	}
}

// TestBatchEngineKeyOrder checks that records sharing a key run in batch
// order, one after another, across lanes too, whatever the scheduler does:
// the first record of a key blocks until released, and no later record of
// its key starts before it has ended.
func TestBatchEngineKeyOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ordered bool
		items   []batchItem
	}{
		{name: "unordered", items: []batchItem{{key: "k"}, {key: "k"}, {key: "x"}, {key: "y"}, {key: "k"}}},
		{name: "ordered, the key across lanes", ordered: true,
			items: []batchItem{{key: "k", lane: "a"}, {key: "k", lane: "b"}, {key: "x", lane: "c"}, {key: "y", lane: "d"}, {key: "k", lane: "e"}}},
		{name: "ordered, a lane waits for another's record of its key", ordered: true,
			items: []batchItem{{key: "k", lane: "a"}, {key: "z", lane: "b"}, {key: "w", lane: "a"}, {key: "k", lane: "b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, concurrency := range []int{1, 2, 10} {
				release := make(chan struct{})
				started := make(chan int, len(tc.items))
				var mu sync.Mutex
				var order []int
				done := make(chan []itemState)
				go func() {
					done <- runBatch(context.Background(), tc.items, batchPolicy{concurrency: concurrency, ordered: tc.ordered, now: time.Now}, func(ctx context.Context, i int) bool {
						mu.Lock()
						order = append(order, i)
						mu.Unlock()
						started <- i
						if i == 0 {
							<-release
						}
						return false
					}, func(int, idem.Verdict, error) {})
				}()
				if first := <-started; first != 0 && tc.items[first].key == "k" {
					t.Fatalf("concurrency %d: record %d started before record 0, the first of its key", concurrency, first)
				}
				close(release)
				<-done
				var ofK []int
				for _, i := range order {
					if tc.items[i].key == "k" {
						ofK = append(ofK, i)
					}
				}
				var want []int
				for i, it := range tc.items {
					if it.key == "k" {
						want = append(want, i)
					}
				}
				if !slices.Equal(ofK, want) {
					t.Errorf("concurrency %d: records of key k ran in the order %v, want %v (batch order)", concurrency, ofK, want)
				}
			}
		})
	}
}
