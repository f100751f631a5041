package ddbstore

import (
	"bytes"
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
	// AttrSteps (L) is the completed steps in order: each element is the
	// 8-byte reference (B) of a step kept in a step item of its own (see
	// RecordStep). A step item has the record's key with "#step#" and the
	// reference in hex after it (in its partition key, or in its sort key
	// where the table has one), the step as the only element of its
	// AttrSteps list (a map of "n", S, the step's name, and "r", B, its
	// result, absent when empty), and the TTL attribute. (A record written
	// by v0.1.0 keeps such maps in its own list: stepOfV010.)
	AttrSteps = "steps"
	// AttrStepNames (SS) is the steps' names, for the condition that
	// records a name once.
	AttrStepNames = "step_names"
	// AttrStepsSize (N) is the steps' size as the store budgets it (see
	// refCost), for the condition that keeps the item within its limit.
	AttrStepsSize = "steps_size"
	// AttrStepsUntil (N), on records that reference step items, is the
	// earliest end of retention (epoch seconds) of those items: no write
	// moves the record's own end of retention past it.
	AttrStepsUntil = "steps_until"
)

// stepHeadroom is the part of the item size limit that steps leave to the
// failure that may complete the record: its retryable flag and its error
// message (shortened to fit what is left).
const stepHeadroom = 256

var _ idem.StepRecorder = (*Store)(nil)

// stepCondition is core.AddStep's rule for a step not yet recorded: the
// caller's in-progress record whose lease is live at now (a live lease is
// never Expired), without a step of that name, and with room for the
// step's reference within the item size limit. A step item with an end of
// retention adds untilCondition.
const stepCondition = "#st = :in_progress AND #tok = :tok AND #lease > :now_ms AND NOT contains(#names, :name)" +
	" AND (attribute_not_exists(#size) OR #size <= :room)"

// untilCondition keeps a record's end of retention at or before that of
// every step item it references: the new item's (:ttl) is not before the
// record's, nor before the earliest of the items already referenced
// (steps_until, which keeps the earliest).
const untilCondition = " AND #exp <= :ttl AND (attribute_not_exists(#until) OR #until <= :ttl)"

// RecordStep implements idem.StepRecorder with two writes whose cost does
// not depend on the steps recorded before: the step's own item (one
// PutItem, see putStepItem), then its reference in the record (one
// UpdateItem conditioned on the caller's lease, stepCondition, that appends
// the 8-byte reference to the steps list and adds the step's name and
// budgeted size). The reference is the commit: a step item that no record
// references is never read, so a holder that lost its lease (the update
// refused) leaves an item that is nothing but garbage until its TTL. If
// the update's condition fails, the stored record (from the error, or one
// consistent GetItem where the server does not return it) decides with
// core.AddStep: the step stored already with this result is a retried write
// (nil), with another result an idem.ErrStepConflict, anything else
// idem.ErrLeaseLost; where core would append, the item had no room, or the
// step item would end its retention before the record does, in which case
// the item is written again to end later and the update made once more.
//
// A step item ends its retention two retention spans after now (the span
// from a reservation to its end of retention, as the store last saw one),
// and never before the record (untilCondition). It costs one write of the
// step item's size and one of the record's, whose size grows by the step's
// name and 9 bytes. Steps count against the item size limit
// (WithMaxItemSize): a step whose item would not fit, or whose reference
// would leave the record less than 256 bytes for the failure that may
// complete it, is refused with a permanent error wrapping ErrItemTooLarge,
// and nothing is written. A key whose step items' keys would pass
// DynamoDB's key limits (22 bytes more than the record's) is refused with
// ErrKeyTooLarge.
func (s *Store) RecordStep(ctx context.Context, key, leaseToken string, step core.Step, now time.Time) error {
	const op = "step"
	if err := ctx.Err(); err != nil {
		return err
	}
	room, err := s.checkStep(op, key, leaseToken, step)
	if err != nil {
		return err
	}
	ttl := s.span.ttl(now)
	for try := 0; ; try++ {
		if err := s.putStepItem(ctx, op, key, step, ttl); err != nil {
			return err
		}
		_, err := s.client.UpdateItem(ctx, s.stepInput(key, leaseToken, step, now, room, ttl), s.calls.fns...)
		var ccf *types.ConditionalCheckFailedException
		if err == nil || !errors.As(err, &ccf) {
			if err != nil {
				return s.translate(ctx, op, err).err
			}
			return nil
		}
		item, err := s.blockingItem(ctx, op, ccf, key)
		if err != nil {
			return err
		}
		later, again, err := s.refusedStep(key, leaseToken, step, now, ttl, item)
		if !again || err != nil {
			return err
		}
		if try >= 1 {
			return core.MarkTransient(&Error{Op: op, Table: s.table,
				Err: fmt.Errorf("%w: the record's end of retention moved twice during the step", ErrUnavailable)})
		}
		ttl = later
	}
}

// checkStep checks the key, the step's name and size before a step is
// recorded, and returns the room the record's steps may take before it
// (the condition's :room).
func (s *Store) checkStep(op, key, token string, step core.Step) (int, error) {
	if err := s.checkKey(op, key); err != nil {
		return 0, err
	}
	if err := core.ValidateStepName(step.Name); err != nil {
		return 0, err
	}
	if err := s.checkStepItem(op, key, step); err != nil {
		return 0, err
	}
	room := s.stepRoom(key, token) - refCost(step)
	if room < 0 {
		return 0, s.fail(op, ErrItemTooLarge, "step %q: no room for its reference within the item size limit %d", step.Name, s.maxItem)
	}
	return room, nil
}

// stepInput is the UpdateItem that references step (whose item ends its
// retention at ttl, none when 0) in the record of key under token's lease.
func (s *Store) stepInput(key, token string, step core.Step, now time.Time, room int, ttl int64) *dynamodb.UpdateItemInput {
	n := &s.names
	ref := refOf(step)
	names := map[string]string{"#st": n.Status, "#tok": n.LeaseToken, "#lease": n.LeaseUntil,
		"#steps": n.Steps, "#names": n.StepNames, "#size": n.StepsSize, "#upd": n.UpdatedAt}
	values := map[string]types.AttributeValue{
		":in_progress": &types.AttributeValueMemberS{Value: string(core.StatusInProgress)},
		":tok":         &types.AttributeValueMemberS{Value: token},
		":now_ms":      num(now.UnixMilli()),
		":upd":         num(now.UnixMilli()),
		":name":        &types.AttributeValueMemberS{Value: step.Name},
		":names":       &types.AttributeValueMemberSS{Value: []string{step.Name}},
		":room":        num(int64(room)),
		":cost":        num(int64(refCost(step))),
		":none":        &types.AttributeValueMemberL{Value: []types.AttributeValue{}},
		":step":        &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberB{Value: ref[:]}}},
	}
	update, cond := "SET #steps = list_append(if_not_exists(#steps, :none), :step), #upd = :upd", stepCondition
	if ttl > 0 {
		names["#exp"], names["#until"], values[":ttl"] = s.ttlAttr, n.StepsUntil, num(ttl)
		update += ", #until = if_not_exists(#until, :ttl)"
		cond += untilCondition
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.keyOf(key),
		UpdateExpression:                    aws.String(update + " ADD #names :names, #size :cost"),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// blockingItem returns the item that made a conditional write fail: the one
// the error carries (ALL_OLD), or else one consistent GetItem's (nil if
// there is none).
func (s *Store) blockingItem(ctx context.Context, op string, ccf *types.ConditionalCheckFailedException, key string) (map[string]types.AttributeValue, error) {
	if len(ccf.Item) > 0 {
		return ccf.Item, nil
	}
	return s.getItem(ctx, op, key)
}

// refusedStep answers a refused step write from the stored item (nil: no
// record), by core.AddStep. Where core would append, again is true if the
// step item must end its retention later (at ttl, none when 0) for the
// record to reference it; otherwise the record had no room.
func (s *Store) refusedStep(key, token string, step core.Step, now time.Time, ttl int64, item map[string]types.AttributeValue) (later int64, again bool, err error) {
	var cur *core.Record
	var st storedSteps
	if len(item) > 0 {
		rec, err := s.decode(item)
		if err == nil {
			st, err = s.storedStepsOf(item)
		}
		if err != nil {
			return 0, false, core.MarkPermanent(&Error{Op: "step", Table: s.table, Err: err})
		}
		cur = &rec
	}
	switch _, w := core.AddStep(st.stub(cur, step), token, step, now); w {
	case core.StepRecorded:
		return 0, false, nil
	case core.StepConflict:
		return 0, false, fmt.Errorf("ddbstore: step on table %q, key hash %s, step %q: %w", s.table, idem.HashKey(key), step.Name, idem.ErrStepConflict)
	case core.StepAppend:
		if later, again := st.itemEnd(cur.ExpiresAt, ttl, now); again {
			return later, true, nil
		}
		return 0, false, s.fail("step", ErrItemTooLarge, "step %q of %d bytes: the record's steps reached the item size limit %d", step.Name, len(step.Result), s.maxItem)
	}
	return 0, false, fmt.Errorf("ddbstore: step on table %q, key hash %s, step %q: %w", s.table, idem.HashKey(key), step.Name, idem.ErrLeaseLost)
}

// storedSteps is what the store's conditions read of a record's steps: its
// steps list, the set of names, their budgeted size and the earliest end
// of its step items.
type storedSteps struct {
	entries []stepEntry
	names   map[string]bool
	size    int64 // the steps' budgeted size (steps_size)
	until   int64 // 0: no step item with an end
}

// storedStepsOf reads the steps attributes of a record's item.
func (s *Store) storedStepsOf(item map[string]types.AttributeValue) (storedSteps, error) {
	r := itemReader{item: item}
	st := storedSteps{entries: r.stepEntries(s.names.Steps), names: map[string]bool{}}
	if ss, ok := item[s.names.StepNames].(*types.AttributeValueMemberSS); ok {
		for _, name := range ss.Value {
			st.names[name] = true
		}
	}
	st.size, _ = r.num(s.names.StepsSize)
	st.until, _ = r.num(s.names.StepsUntil)
	return st, r.err
}

// stub returns rec (nil: none) with steps that answer core.AddStep for
// step as the stored ones do: every stored name, with step's result where
// the record holds step itself (kept in it or referenced) and another
// result where it holds another step of that name.
func (st storedSteps) stub(rec *core.Record, step core.Step) *core.Record {
	if rec == nil {
		return nil
	}
	stub := *rec
	stub.Steps = nil
	ref := refOf(step)
	for name := range st.names {
		other := core.Step{Name: name, Result: append(append([]byte(nil), step.Result...), 0)}
		if name == step.Name && st.holds(step, ref) {
			other.Result = step.Result
		}
		stub.Steps = append(stub.Steps, other)
	}
	return &stub
}

// holds reports whether the steps list holds step (ref is its reference).
func (st storedSteps) holds(step core.Step, ref stepRef) bool {
	for _, e := range st.entries {
		if e.isRef && e.ref == ref || !e.isRef && e.step.Name == step.Name && bytes.Equal(e.step.Result, step.Result) {
			return true
		}
	}
	return false
}

// itemEnd reports whether a step item that ends at ttl (none: 0) ends too
// early for a record that ends its retention at expires (zero: never),
// and if so the end it needs: none for a record that never ends; else the
// later of the earliest end of the record's step items and twice the
// record's remaining retention from now.
func (st storedSteps) itemEnd(expires time.Time, ttl int64, now time.Time) (int64, bool) {
	if ttl == 0 {
		return 0, false
	}
	if expires.IsZero() {
		return 0, true
	}
	exp := expires.Unix()
	if exp <= ttl && st.until <= ttl {
		return 0, false
	}
	return max(exp, st.until, 2*exp-now.Unix()), true
}

// refCost is what a step kept in its own item adds to the record, as
// ItemSize counts it, or more: its reference in the list (an element of
// 8 bytes), its name in the set of names, and the growth of the size
// counter.
func refCost(step core.Step) int {
	return len(step.Name) + stepRefSize + 8
}

// stepRoom is the budget of an item's steps (the sum of their refCost, and
// of stepCostV010 for steps a v0.1.0 record keeps): the item size limit less the headroom, the largest in-progress
// item of the key and token without steps, and the step attributes' own
// overhead.
func (s *Store) stepRoom(key, token string) int {
	far := time.UnixMilli(1 << 50).UTC()
	base := s.encode(core.Record{Key: key, Fingerprint: fmt64, Status: core.StatusInProgress, LeaseToken: token,
		LeaseUntil: far, ExpiresAt: far, UpdatedAt: far, Attempts: 1 << 30}, nil, "")
	n := &s.names
	overhead := len(n.Steps) + 3 + len(n.StepNames) + len(n.StepsSize) + numberSize(strconv.Itoa(s.maxItem)) +
		len(n.StepsUntil) + numberSize(strconv.FormatInt(far.Unix(), 10))
	return s.maxItem - stepHeadroom - ItemSize(base) - overhead
}

// fmt64 stands for a fingerprint (hex SHA-256: 64 characters) in stepRoom.
const fmt64 = "0000000000000000000000000000000000000000000000000000000000000000"
