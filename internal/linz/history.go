package linz

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Entry is one operation of a history: which client made it, the op, the
// store's answer, and when it was called and returned, in nanoseconds of a
// clock shared by every client (the processes of one machine share the
// wall clock). Return is Pending for an operation whose outcome is unknown.
type Entry struct {
	Client int
	Op     Op
	Result Result
	Call   int64
	Return int64
}

// Pending is the Return of an entry whose outcome is unknown (its answer
// was lost): the check lets it take effect at any time after its call, or
// never.
const Pending int64 = -1

// History records the operations of concurrent clients. Safe for
// concurrent use (mu guards entries).
type History struct {
	base time.Time // its wall-clock reading anchors now; its monotonic one advances it

	mu      sync.Mutex
	entries []Entry
}

// NewHistory returns an empty history.
func NewHistory() *History { return &History{base: time.Now()} }

// now is the wall clock in nanoseconds, advancing monotonically.
func (h *History) now() int64 { return h.base.UnixNano() + int64(time.Since(h.base)) }

// Do makes op on t as client and records it: a read whose answer is
// Unknown is left out (it changed nothing), a write whose answer is
// Unknown is recorded Pending. It returns what t.Do returns.
func (h *History) Do(ctx context.Context, t *Target, client int, op Op, staged []any) (Result, error) {
	call := h.now()
	res, err := t.Do(ctx, op, staged)
	ret := h.now()
	if res.Verdict == Unknown {
		if op.Kind == Get || op.Kind == Effects {
			return res, err
		}
		ret = Pending
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.entries = append(h.entries, Entry{Client: client, Op: op, Result: res, Call: call, Return: ret})
	return res, err
}

// Entries returns the entries recorded so far, in the order they returned.
func (h *History) Entries() []Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Entry(nil), h.entries...)
}

// Summary counts the entries' answers by kind and verdict, for reports:
// "reserve ok=12 conflict=3 unknown=1; ...".
func Summary(entries []Entry) string {
	counts := map[Kind]map[Verdict]int{}
	for _, e := range entries {
		if counts[e.Op.Kind] == nil {
			counts[e.Op.Kind] = map[Verdict]int{}
		}
		counts[e.Op.Kind][e.Result.Verdict]++
	}
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		vs := make([]string, 0, len(counts[Kind(k)]))
		for v, n := range counts[Kind(k)] {
			vs = append(vs, fmt.Sprintf("%s=%d", v, n))
		}
		sort.Strings(vs)
		parts = append(parts, k+" "+strings.Join(vs, " "))
	}
	return strings.Join(parts, "; ")
}
