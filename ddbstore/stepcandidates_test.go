package ddbstore

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/capacity"
)

// The layouts of an execution's steps that were weighed, each computed from
// the items its requests would write, with internal/capacity's rules
// (DynamoDB's published ones): the record as the store encodes it, the
// step items and the reference update as RecordStep makes them.
//
//   - inline: every step in the record (the previous layout): one
//     UpdateItem per step, billed on the record with every step before it.
//   - transaction: each step in an item of its own, put in one
//     TransactWriteItems with a ConditionCheck of the record's lease: the
//     record never grows, both items billed twice (read back with a Query,
//     which needs a sort key; dynalite has no transactions).
//   - item+reference (the store's): the step's item, then its 8-byte
//     reference appended to the record (RecordStep).
//   - spill: steps in the record while it stays within 1 KB, then as
//     item+reference.
type stepLayout struct {
	name string
	step func(sim *stepSim, st core.Step) float64 // write units; updates the record
}

var stepLayouts = []stepLayout{
	{"inline (before)", (*stepSim).inline},
	{"transaction per step", (*stepSim).transaction},
	{"item + reference (chosen)", (*stepSim).reference},
	{"spill past 1 KB", (*stepSim).spill},
}

// stepSim is an execution's record as a layout leaves it.
type stepSim struct {
	s      *Store
	rec    core.Record
	record map[string]types.AttributeValue
}

func size(item map[string]types.AttributeValue) int {
	c := capacity.Item{}
	for k, v := range item {
		c[k] = capacity.FromAttributeValue(v)
	}
	return capacity.Size(c)
}

func writeUnits(items ...map[string]types.AttributeValue) float64 {
	n := 0
	for _, it := range items {
		n = max(n, size(it))
	}
	return capacity.WriteUnits(n)
}

// inline writes st into the record, as v0.1.0's RecordStep did.
func (sim *stepSim) inline(st core.Step) float64 {
	before := sim.record
	sim.rec.Steps = append(sim.rec.Steps, st)
	sim.record = sim.s.encodeV010(sim.rec, nil, "")
	for k, v := range before {
		if _, ok := sim.record[k]; !ok {
			sim.record[k] = v // references made by spill before
		}
	}
	if l, ok := before[sim.s.names.Steps].(*types.AttributeValueMemberL); ok {
		sim.record[sim.s.names.Steps] = &types.AttributeValueMemberL{Value: append(append([]types.AttributeValue(nil), l.Value...), stepValue(st))}
	}
	return writeUnits(before, sim.record)
}

// transaction puts st's item with a check of the record: both billed twice.
func (sim *stepSim) transaction(st core.Step) float64 {
	return 2 * (writeUnits(sim.record) + writeUnits(sim.s.stepItem(sim.rec.Key, st, 1<<32)))
}

// reference makes RecordStep's two writes, the record's update applied as
// DynamoDB would.
func (sim *stepSim) reference(st core.Step) float64 {
	units := writeUnits(sim.s.stepItem(sim.rec.Key, st, 1<<32))
	in := sim.s.stepInput(sim.rec.Key, sim.rec.LeaseToken, st, sim.rec.UpdatedAt, 1<<20, 1<<32)
	before, key := capacity.Item{}, capacity.Item{}
	for k, v := range sim.record {
		before[k] = capacity.FromAttributeValue(v)
	}
	for k, v := range in.Key {
		key[k] = capacity.FromAttributeValue(v)
	}
	values := map[string]capacity.Value{}
	for k, v := range in.ExpressionAttributeValues {
		values[k] = capacity.FromAttributeValue(v)
	}
	after, err := capacity.ApplyUpdate(before, key, capacity.Update{Expression: aws.ToString(in.UpdateExpression), Names: in.ExpressionAttributeNames, Values: values})
	if err != nil {
		panic(err) // the store's own update: a test failure
	}
	sim.record = map[string]types.AttributeValue{}
	for k, v := range after {
		sim.record[k] = toAttributeValue(v)
	}
	sim.rec.Steps = append(sim.rec.Steps, st)
	return units + capacity.WriteUnits(max(capacity.Size(before), capacity.Size(after)))
}

// toAttributeValue is capacity.FromAttributeValue's inverse.
func toAttributeValue(v capacity.Value) types.AttributeValue {
	switch v.Kind {
	case capacity.KindS:
		return &types.AttributeValueMemberS{Value: v.Scalar}
	case capacity.KindN:
		return &types.AttributeValueMemberN{Value: v.Scalar}
	case capacity.KindB:
		return &types.AttributeValueMemberB{Value: []byte(v.Scalar)}
	case capacity.KindBOOL:
		return &types.AttributeValueMemberBOOL{Value: v.Scalar == "true"}
	case capacity.KindSS:
		return &types.AttributeValueMemberSS{Value: v.Set}
	case capacity.KindL:
		l := make([]types.AttributeValue, len(v.List))
		for i, e := range v.List {
			l[i] = toAttributeValue(e)
		}
		return &types.AttributeValueMemberL{Value: l}
	case capacity.KindM:
		m := map[string]types.AttributeValue{}
		for k, e := range v.Map {
			m[k] = toAttributeValue(e)
		}
		return &types.AttributeValueMemberM{Value: m}
	}
	panic(fmt.Sprintf("value of kind %s", v.Kind))
}

// spill keeps st in the record if the record stays within 1 KB, and else
// makes it an item and a reference.
func (sim *stepSim) spill(st core.Step) float64 {
	saved, rec := sim.record, sim.rec
	units := sim.inline(st)
	if size(sim.record) <= capacity.WriteUnitBytes {
		return units
	}
	sim.record, sim.rec = saved, rec
	return sim.reference(st)
}

// stepRow is one layout's figures for results of one size.
type stepRow struct {
	layout, size                        string
	units                               map[int]float64 // by steps per execution
	completion, duplicate, renewal      float64         // after 50 steps
	oneCompletion, oneDuplicate, oneRen float64         // after 1 step
}

// runLayout computes layout's figures: the write units of executions of 1,
// 10 and 50 steps, and of the completion, a duplicate refused while the
// execution runs, and a renewal, after one step and after 50.
func runLayout(s *Store, l stepLayout, size string) stepRow {
	row := stepRow{layout: l.name, size: size, units: map[int]float64{}}
	for _, k := range []int{1, 10, 50} {
		t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
		rec := normalize(core.Reserve("evt:0f8e2d6c-3a1b-4c5d-9e7f-1234567890ab:charge", fmt64, "6f1c0a4e9b2d47c58e3a1f0b7d6c5e4a",
			nil, t0, t0.Add(35*time.Second), 24*time.Hour))
		rec.Attempts = 1
		sim := &stepSim{s: s, rec: rec, record: s.encode(rec, nil, "")}
		for i := 1; i <= k; i++ {
			row.units[k] += l.step(sim, core.Step{Name: fmt.Sprintf("step-%02d", i), Result: candidateResult(i, size)})
		}
		renewed := core.Renew(sim.rec, t0.Add(time.Minute), t0.Add(10*time.Second))
		renewal := writeUnits(sim.record) // the lease's attributes: the item's size hardly changes
		duplicate := writeUnits(sim.record, s.encode(core.Reserve(rec.Key, fmt64, "other", nil, t0, t0, time.Hour), nil, ""))
		done := s.encode(core.Succeed(renewed, []byte(`{"ok": true, "id": "evt-1", "n": 1}`), t0.Add(time.Minute), 24*time.Hour), nil, "")
		completion := writeUnits(sim.record, done)
		switch k {
		case 1:
			row.oneCompletion, row.oneDuplicate, row.oneRen = completion, duplicate, renewal
		case 50:
			row.completion, row.duplicate, row.renewal = completion, duplicate, renewal
		}
	}
	return row
}

// candidateResult is step i's result: the bench's small JSON, or 4 KB.
func candidateResult(i int, size string) []byte {
	if size == "small" {
		return fmt.Appendf(nil, `{"step":%d,"ok":true}`, i)
	}
	return []byte(strings.Repeat("x", 4096))
}

// stepCandidatesTable is the table of docs/cost.md that the test checks.
func stepCandidatesTable(rows []stepRow) string {
	var b strings.Builder
	b.WriteString("| layout | results | 1 step | 10 steps | 50 steps | 50 ÷ (50 × 1) | completion after 1 / 50 | duplicate during 1 / 50 | renewal after 1 / 50 |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %g | %g | %g | %.2f | %g / %g | %g / %g | %g / %g |\n", r.layout, r.size,
			r.units[1], r.units[10], r.units[50], r.units[50]/(50*r.units[1]),
			r.oneCompletion, r.completion, r.oneDuplicate, r.duplicate, r.oneRen, r.renewal)
	}
	return b.String()
}

// TestStepLayoutCandidates computes the write units of the step layouts
// weighed (stepLayouts), checks that the chosen one, the store's own
// requests, costs at most 1.1 times 50 single steps for 50 steps where the
// previous one did not, and that docs/cost.md shows the table it computes
// (between the step-candidates markers).
func TestStepLayoutCandidates(t *testing.T) {
	t.Parallel()
	s, err := New(benchAPI{}, "idempotency")
	if err != nil {
		t.Fatal(err)
	}
	var rows []stepRow
	for _, size := range []string{"small", "4 KB"} {
		for _, l := range stepLayouts {
			rows = append(rows, runLayout(s, l, size))
		}
	}
	for _, r := range rows {
		ratio := r.units[50] / (50 * r.units[1])
		if linear := ratio <= 1.1; linear != !strings.HasPrefix(r.layout, "inline") && !(r.layout == "spill past 1 KB" && r.size == "small") {
			t.Errorf("%s, %s results: 50 steps %.2f times one step", r.layout, r.size, ratio)
		}
	}
	table := stepCandidatesTable(rows)
	t.Logf("\n%s", table)
	doc, err := os.ReadFile("../docs/cost.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- step-candidates: TestStepLayoutCandidates computes this table -->\n", "<!-- /step-candidates -->"
	_, rest, ok := strings.Cut(string(doc), begin)
	shown, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 || shown != table {
		t.Errorf("docs/cost.md's step layout table is not the one computed; want, between its markers:\n%s", table)
	}
}
