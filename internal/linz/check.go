package linz

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/anishathalye/porcupine"
)

// Porcupine returns m as a porcupine model of histories of Entry ops
// (Input an Op, Output a Result), partitioned by key: the store's keys are
// independent, so a history is linearizable if and only if each key's is.
// An operation answered Unknown takes the model's step whatever it was; a
// history gives it no end, so it may also be placed after every other
// operation, which is the same as never. base is the time descriptions
// count from.
func (m Model) Porcupine(base time.Time) porcupine.Model {
	d := describer{base: base}
	return porcupine.Model{
		Partition: partitionByKey,
		Init:      func() any { return State{} },
		Step: func(state, input, output any) (bool, any) {
			want, next := m.Step(state.(State), input.(Op))
			got := output.(Result)
			return got.Verdict == Unknown || m.Accepts(input.(Op), want, got), next
		},
		Equal: func(a, b any) bool { return a.(State).Equal(b.(State)) },
		Hash:  hashState,
		DescribeOperation: func(input, output any) string {
			return d.op(input.(Op)) + " → " + d.result(output.(Result))
		},
		DescribeState: func(state any) string {
			s := state.(State)
			if s.Effects == 0 {
				return d.record(s.Rec)
			}
			return fmt.Sprintf("%s, effects=%d", d.record(s.Rec), s.Effects)
		},
	}
}

func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	index := map[string]int{}
	var parts [][]porcupine.Operation
	for _, op := range history {
		key := op.Input.(Op).Key
		i, ok := index[key]
		if !ok {
			i = len(parts)
			index[key] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

func hashState(state any) uint64 {
	s := state.(State)
	h := fnv.New64a()
	if r := s.Rec; r != nil {
		h.Write(fmt.Appendf(nil, "%s|%s|%d|%d|%d|%d|%d", r.LeaseToken, r.Status, r.Attempts, len(r.Steps),
			r.LeaseUntil.UnixNano(), r.ExpiresAt.UnixNano(), r.UpdatedAt.UnixNano()))
	}
	h.Write(fmt.Appendf(nil, "|%d", s.Effects))
	return h.Sum64()
}

// Operations returns entries as porcupine operations: a Pending return
// becomes one after every other event of the history.
func Operations(entries []Entry) []porcupine.Operation {
	var last int64
	for _, e := range entries {
		last = max(last, e.Call, e.Return)
	}
	ops := make([]porcupine.Operation, len(entries))
	for i, e := range entries {
		ret := e.Return
		if ret == Pending {
			ret = last + 1
		}
		ops[i] = porcupine.Operation{ClientId: e.Client, Input: e.Op, Call: e.Call, Output: e.Result, Return: ret}
	}
	return ops
}

// Check checks entries for linearizability against m within timeout. It
// returns porcupine's answer: porcupine.Ok, porcupine.Illegal, or
// porcupine.Unknown when the timeout ended the search. For any answer but
// Ok it writes porcupine's visualisation of the history (each key's longest
// linearizable prefix, the operations that could not follow it, and the
// model's states) to a file in dir named after name, and returns its path.
func Check(m Model, base time.Time, entries []Entry, timeout time.Duration, dir, name string) (porcupine.CheckResult, string, error) {
	model := m.Porcupine(base)
	res, info := porcupine.CheckOperationsVerbose(model, Operations(entries), timeout)
	if res == porcupine.Ok {
		return res, "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.html", unsafeName.ReplaceAllString(name, "_"), time.Now().Format("20060102-150405.000")))
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		return res, "", err
	}
	return res, path, nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)
