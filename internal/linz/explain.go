package linz

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Explain describes, in text, each key of entries whose history is not
// linearizable: the longest sequence of its operations that the model
// accepts (in that order, with the state after each), then the operations
// none of which the model accepts next, in the order they were called. It
// returns "" when every key's history is linearizable.
func Explain(m Model, base time.Time, entries []Entry) string {
	model := m.Porcupine(base)
	ops := Operations(entries)
	_, info := porcupine.CheckOperationsVerbose(model, ops, CheckTimeout)
	parts := partitionByKey(ops)
	var b strings.Builder
	for p, partials := range info.PartialLinearizations() {
		var longest []int
		for _, l := range partials {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == len(parts[p]) {
			continue
		}
		explainKey(&b, m, base, ops[0].Call, parts[p], longest)
	}
	return b.String()
}

func explainKey(b *strings.Builder, m Model, base time.Time, t0 int64, ops []porcupine.Operation, order []int) {
	d := describer{base: base}
	span := func(op porcupine.Operation) string {
		ret := "…"
		if op.Output.(Result).Verdict != Unknown {
			ret = fmt.Sprintf("%.3fms", float64(op.Return-t0)/1e6)
		}
		return fmt.Sprintf("[%.3fms, %s] client %d", float64(op.Call-t0)/1e6, ret, op.ClientId)
	}
	fmt.Fprintf(b, "key %s: %d operations; the model accepts at most %d of them in an order real time allows:\n",
		ops[0].Input.(Op).Key, len(ops), len(order))
	s := State{}
	done := map[int]bool{}
	for _, i := range order {
		op := ops[i]
		_, s = m.Step(s, op.Input.(Op))
		done[i] = true
		fmt.Fprintf(b, "  %s %s → %s\n      state: %s\n", span(op), d.op(op.Input.(Op)), d.result(op.Output.(Result)), d.record(s.Rec))
	}
	rest := make([]int, 0, len(ops)-len(order))
	for i := range ops {
		if !done[i] {
			rest = append(rest, i)
		}
	}
	slices.SortFunc(rest, func(a, c int) int { return int(ops[a].Call - ops[c].Call) })
	fmt.Fprintf(b, "  then none of these:\n")
	for _, i := range rest {
		op := ops[i]
		want, _ := m.Step(s, op.Input.(Op))
		fmt.Fprintf(b, "  %s %s → %s\n      (next, the model would answer %s)\n", span(op), d.op(op.Input.(Op)), d.result(op.Output.(Result)), d.result(want))
	}
}
