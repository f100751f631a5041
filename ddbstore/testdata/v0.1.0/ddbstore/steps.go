package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// Default names of the attributes of an execution's steps (idem.Step),
// present on in-progress and failed records that have steps;
// WithAttributeNames renames them.
const (
	// AttrSteps (L) is the completed steps in order, each a map of "n" (S,
	// the step's name) and "r" (B, its result; absent when empty).
	AttrSteps = "steps"
	// AttrStepNames (SS) is the steps' names, for the condition that
	// records a name once.
	AttrStepNames = "step_names"
	// AttrStepsSize (N) is the steps' size as the store budgets it (see
	// stepCost), for the condition that keeps the item within its limit.
	AttrStepsSize = "steps_size"
)

// stepHeadroom is the part of the item size limit that steps leave to the
// failure that may complete the record: its retryable flag and its error
// message (shortened to fit what is left).
const stepHeadroom = 256

var _ idem.StepRecorder = (*Store)(nil)

// stepCondition is core.AddStep's rule for a step not yet recorded: the
// caller's in-progress record whose lease is live at now (a live lease is
// never Expired), without a step of that name, and with room for the step
// within the item size limit.
const stepCondition = "#st = :in_progress AND #tok = :tok AND #lease > :now_ms AND NOT contains(#names, :name)" +
	" AND (attribute_not_exists(#size) OR #size <= :room)"

// RecordStep implements idem.StepRecorder with one UpdateItem conditioned
// on the caller's lease (stepCondition) that appends the step to the steps
// list and adds its name and size; ReturnValuesOnConditionCheckFailure
// ALL_OLD returns the record that refused it. If the condition fails, the
// stored record (from the error, or one consistent GetItem where the
// server does not return it) decides with core.AddStep: the step stored
// already with this result is a retried write (nil), with another result
// an idem.ErrStepConflict, anything else idem.ErrLeaseLost; where core
// would append, the item had no room.
//
// Steps count against the item size limit (WithMaxItemSize): a step that
// would leave less than 256 bytes for the failure that may complete the
// record is refused with a permanent error wrapping ErrItemTooLarge, and
// nothing is written. It costs one write of the item's size in WCUs. A
// client without UpdateItem (see UpdateAPI) gets an error wrapping
// idem.ErrStepsUnsupported.
func (s *Store) RecordStep(ctx context.Context, key, leaseToken string, step core.Step, now time.Time) error {
	const op = "step"
	if err := ctx.Err(); err != nil {
		return err
	}
	c, ok := s.client.(UpdateAPI)
	if !ok {
		return core.MarkPermanent(&Error{Op: op, Table: s.table,
			Err: fmt.Errorf("client %T has no UpdateItem (ddbstore.UpdateAPI): %w", s.client, idem.ErrStepsUnsupported)})
	}
	if err := s.checkKey(op, key); err != nil {
		return err
	}
	if err := core.ValidateStepName(step.Name); err != nil {
		return err
	}
	room := s.stepRoom(key, leaseToken) - stepCost(step)
	if room < 0 {
		return s.fail(op, ErrItemTooLarge, "step %q of %d bytes does not fit the item size limit %d", step.Name, len(step.Result), s.maxItem)
	}
	_, err := c.UpdateItem(ctx, s.stepInput(key, leaseToken, step, now, room), s.calls.fns...)
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return s.translate(op, err).err
	}
	stored, found, err := s.blocking(ctx, op, ccf, key)
	if err != nil {
		return err
	}
	return s.refusedStep(key, leaseToken, step, now, stored, found)
}

func (s *Store) stepInput(key, token string, step core.Step, now time.Time, room int) *dynamodb.UpdateItemInput {
	n := &s.names
	return &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 s.keyOf(key),
		UpdateExpression:    aws.String("SET #steps = list_append(if_not_exists(#steps, :none), :step), #upd = :upd ADD #names :names, #size :cost"),
		ConditionExpression: aws.String(stepCondition),
		ExpressionAttributeNames: map[string]string{"#st": n.Status, "#tok": n.LeaseToken, "#lease": n.LeaseUntil,
			"#steps": n.Steps, "#names": n.StepNames, "#size": n.StepsSize, "#upd": n.UpdatedAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":in_progress": &types.AttributeValueMemberS{Value: string(core.StatusInProgress)},
			":tok":         &types.AttributeValueMemberS{Value: token},
			":now_ms":      num(now.UnixMilli()),
			":upd":         num(now.UnixMilli()),
			":name":        &types.AttributeValueMemberS{Value: step.Name},
			":names":       &types.AttributeValueMemberSS{Value: []string{step.Name}},
			":room":        num(int64(room)),
			":cost":        num(int64(stepCost(step))),
			":none":        &types.AttributeValueMemberL{Value: []types.AttributeValue{}},
			":step":        &types.AttributeValueMemberL{Value: []types.AttributeValue{stepValue(step)}},
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// prevSteps returns the clause of a takeover's condition that requires the
// stored record to have prev's number of steps (core.Replaceable): no
// step_names without steps, else as many names. It adds the clause's names
// and values.
func (s *Store) prevSteps(prev *core.Record, names map[string]string, values map[string]types.AttributeValue) string {
	names["#names"] = s.names.StepNames
	if len(prev.Steps) == 0 {
		return "attribute_not_exists(#names)"
	}
	values[":prev_steps"] = num(int64(len(prev.Steps)))
	return "size(#names) = :prev_steps"
}

// refusedStep answers a refused step write from the stored record, by
// core.AddStep.
func (s *Store) refusedStep(key, token string, step core.Step, now time.Time, stored core.Record, found bool) error {
	var cur *core.Record
	if found {
		cur = &stored
	}
	switch _, w := core.AddStep(cur, token, step, now); w {
	case core.StepRecorded:
		return nil
	case core.StepConflict:
		return fmt.Errorf("ddbstore: step on table %q, key hash %s, step %q: %w", s.table, idem.HashKey(key), step.Name, idem.ErrStepConflict)
	case core.StepAppend:
		return s.fail("step", ErrItemTooLarge, "step %q of %d bytes: the record's steps reached the item size limit %d", step.Name, len(step.Result), s.maxItem)
	}
	return fmt.Errorf("ddbstore: step on table %q, key hash %s, step %q: %w", s.table, idem.HashKey(key), step.Name, idem.ErrLeaseLost)
}

// stepCost is what a step adds to an item, as ItemSize counts it, or more:
// its list element (a map of two attributes), its name in the set of names,
// and the growth of the size counter.
func stepCost(step core.Step) int {
	return 2*len(step.Name) + len(step.Result) + 16
}

// stepRoom is the budget of an item's steps (the sum of their stepCost):
// the item size limit less the headroom, the largest in-progress item of
// the key and token without steps, and the step attributes' own overhead.
func (s *Store) stepRoom(key, token string) int {
	far := time.UnixMilli(1 << 50).UTC()
	base := s.encode(core.Record{Key: key, Fingerprint: fmt64, Status: core.StatusInProgress, LeaseToken: token,
		LeaseUntil: far, ExpiresAt: far, UpdatedAt: far, Attempts: 1 << 30}, nil, "")
	n := &s.names
	overhead := len(n.Steps) + 3 + len(n.StepNames) + len(n.StepsSize) + numberSize(strconv.Itoa(s.maxItem))
	return s.maxItem - stepHeadroom - ItemSize(base) - overhead
}

// fmt64 stands for a fingerprint (hex SHA-256: 64 characters) in stepRoom.
const fmt64 = "0000000000000000000000000000000000000000000000000000000000000000"

func stepValue(step core.Step) types.AttributeValue {
	m := map[string]types.AttributeValue{"n": &types.AttributeValueMemberS{Value: step.Name}}
	if len(step.Result) > 0 {
		m["r"] = &types.AttributeValueMemberB{Value: step.Result}
	}
	return &types.AttributeValueMemberM{Value: m}
}

// encodeSteps adds the attributes of steps to item (none when there are no
// steps).
func (s *Store) encodeSteps(item map[string]types.AttributeValue, steps []core.Step) {
	if len(steps) == 0 {
		return
	}
	list := make([]types.AttributeValue, len(steps))
	names := make([]string, len(steps))
	size := 0
	for i, st := range steps {
		list[i], names[i] = stepValue(st), st.Name
		size += stepCost(st)
	}
	item[s.names.Steps] = &types.AttributeValueMemberL{Value: list}
	item[s.names.StepNames] = &types.AttributeValueMemberSS{Value: names}
	item[s.names.StepsSize] = num(int64(size))
}

// steps reads the steps list (nil if there is none).
func (r *itemReader) steps(name string) []core.Step {
	av, ok := r.item[name]
	if !ok {
		return nil
	}
	l, ok := av.(*types.AttributeValueMemberL)
	if !ok {
		r.fail("attribute %s is %T, want L", name, av)
		return nil
	}
	var steps []core.Step
	for i, e := range l.Value {
		m, ok := e.(*types.AttributeValueMemberM)
		if !ok {
			r.fail("attribute %s[%d] is %T, want M", name, i, e)
			return nil
		}
		sr := itemReader{item: m.Value}
		st := core.Step{Name: sr.str("n", true), Result: sr.result("r", "")}
		if sr.err != nil {
			r.fail("attribute %s[%d]: %v", name, i, sr.err)
			return nil
		}
		steps = append(steps, st)
	}
	return steps
}
