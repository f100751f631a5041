package ddbstore

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fit"
)

// The writes in this file replace a record that keeps its steps: a
// reservation that carries the steps of the record it replaces, and a
// retryable failure. A PutItem would write the steps again, every one of
// them in the record (encodeSteps), since a core.Record does not say which
// are kept in step items; these are UpdateItems that set every other
// attribute and leave the steps' attributes as they are, conditioned on
// the stored record having the caller's number of steps, so that the record
// written is rec, steps included. Where that condition or the steps' end of
// retention (untilClause) refuses them, the caller makes its PutItem instead.

// untilClause is the part of a condition that keeps the record's end of
// retention, expires (zero: never), at or before that of its step items
// (steps_until). It adds its names and values.
func (s *Store) untilClause(expires time.Time, names map[string]string, values map[string]types.AttributeValue) string {
	names["#until"] = s.names.StepsUntil
	if expires.IsZero() {
		return "attribute_not_exists(#until)"
	}
	values[":new_exp"] = num(ceilSeconds(expires))
	return "(attribute_not_exists(#until) OR #until >= :new_exp)"
}

// replaceUpdate returns the update that makes an item into item: it adds
// set, sets the attributes of item named in names (recordPlaceholders)
// and removes the others of names, but those of skip. It adds the values it
// sets.
func replaceUpdate(item map[string]types.AttributeValue, names map[string]string, values map[string]types.AttributeValue, set []string, skip ...string) string {
	var remove []string
	for _, ph := range slices.Sorted(maps.Keys(names)) {
		switch v := item[names[ph]]; {
		case slices.Contains(skip, ph):
		case v != nil:
			set = append(set, ph+" = :set_"+ph[1:])
			values[":set_"+ph[1:]] = v
		default:
			remove = append(remove, ph)
		}
	}
	update := "SET " + strings.Join(set, ", ")
	if len(remove) > 0 {
		update += " REMOVE " + strings.Join(remove, ", ")
	}
	return update
}

// keepingUpdate returns the UpdateItem that replaces rec's record by rec
// under cond (whose names and values are given), leaving the steps'
// attributes as they are.
func (s *Store) keepingUpdate(rec core.Record, cond string, names map[string]string, values map[string]types.AttributeValue) *dynamodb.UpdateItemInput {
	rec.Steps = nil
	all := s.recordPlaceholders()
	update := replaceUpdate(s.encode(rec, nil, ""), all, values, nil, "#k")
	delete(all, "#k") // the item's key, which the update addresses
	maps.Copy(names, all)
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.keyOf(rec.Key),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// reserveKeepingSteps makes Reserve's write when rec carries prev's steps
// (a takeover or a retry) and the client has UpdateItem: one UpdateItem
// conditioned on prevBranch (the stored record is still prev, steps
// counted, and replaceable) and untilClause. done is false where Reserve's
// PutItem is to be made instead: rec carries no steps or other steps than
// prev's, or the stored record is absent, past retention, or replaceable
// but its step items end before rec's retention. Otherwise its answer is
// Reserve's: nil (also for rec itself, found after a lost answer), or a
// *idem.ConflictError.
func (s *Store) reserveKeepingSteps(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) (done bool, err error) {
	const op = "reserve"
	c, ok := s.client.(UpdateAPI)
	if !ok || s.noUpdate.Load() || prev == nil || len(rec.Steps) == 0 || !sameStepList(rec.Steps, prev.Steps) {
		return false, nil
	}
	branch, names, values := s.prevOnly(prev, now)
	if branch == "" {
		return false, nil
	}
	cond := branch + " AND " + s.untilClause(rec.ExpiresAt, names, values)
	_, err = c.UpdateItem(ctx, s.keepingUpdate(rec, cond, names, values), s.calls.fns...)
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		t := s.translate(ctx, op, err)
		if errors.Is(t.err, ErrAccessDenied) {
			s.noUpdate.Store(true)
			return false, nil
		}
		if t.maybeApplied && s.ownReservation(ctx, rec) {
			return true, nil
		}
		return true, t.err
	}
	if err == nil {
		s.steps.span.learn(rec.ExpiresAt, now)
		return true, nil
	}
	existing, found, err := s.blockingFor(ctx, op, ccf, rec.Key, replayOf(rec, now))
	switch {
	case err != nil:
		return true, err
	case found && core.SameWrite(existing, rec):
		return true, nil
	case found && !existing.Expired(now) && !core.Replaceable(existing, prev, now):
		return true, &idem.ConflictError{Existing: existing}
	}
	return false, nil
}

// prevOnly returns prevBranch alone, a condition that replaces prev and
// nothing else (not an absent or expired record), with its names and
// values; "" where prev allows no replacement.
func (s *Store) prevOnly(prev *core.Record, now time.Time) (string, map[string]string, map[string]types.AttributeValue) {
	names, values := map[string]string{}, map[string]types.AttributeValue{}
	return s.prevBranch(prev, now, names, values), names, values
}

// sameStepList reports whether a and b are the same steps in the same order.
func sameStepList(a, b []core.Step) bool {
	return slices.EqualFunc(a, b, func(x, y core.Step) bool { return x.Name == y.Name && string(x.Result) == string(y.Result) })
}

// prepareReservation checks and normalizes rec, a reservation over prev
// (nil: none), and makes reserveKeepingSteps's write where it applies.
// done reports that the reservation is answered (err), written or refused;
// otherwise rec fits the item written whole, and that write is the
// caller's.
func (s *Store) prepareReservation(ctx context.Context, op string, rec *core.Record, prev *core.Record, now time.Time) (done bool, err error) {
	if _, err := s.checkReservation(op, rec); err != nil {
		return true, err
	}
	if done, err := s.reserveKeepingSteps(ctx, *rec, prev, now); done {
		return true, err
	}
	if err := s.checkInline(op, *rec); err != nil {
		return true, err
	}
	return false, nil
}

// checkInline returns nil if rec's item, steps kept in it, fits the item
// size limit (a reservation written whole), and else a permanent error
// wrapping ErrItemTooLarge.
func (s *Store) checkInline(op string, rec core.Record) error {
	if len(rec.Steps) == 0 {
		return nil
	}
	if size := ItemSize(s.encode(rec, nil, "")); size > s.maxItem {
		return s.fail(op, ErrItemTooLarge, "record with its %d steps is %d bytes, at most %d", len(rec.Steps), size, s.maxItem)
	}
	return nil
}

// completeKeepingSteps makes Complete's write of rec, a retryable failure
// with steps, when the client has UpdateItem: one UpdateItem conditioned on
// Complete's condition, the stored record having rec's number of steps and
// untilClause. done is false where Complete's PutItem is to be made
// instead: rec is no such failure, or the caller's record (in progress,
// holding its lease) was refused for its steps (a step whose write the
// caller could not confirm and that was not applied) or their end of
// retention. Otherwise its answers are Complete's.
func (s *Store) completeKeepingSteps(ctx context.Context, op string, rec core.Record) (core.Record, bool, error) {
	c, ok := s.client.(UpdateAPI)
	if !ok || s.noUpdate.Load() || rec.Status != core.StatusFailed || !rec.Retryable || len(rec.Steps) == 0 {
		return core.Record{}, false, nil
	}
	stored := s.fitFailure(rec)
	put := s.completePut(nil, rec)
	names, values := maps.Clone(put.ExpressionAttributeNames), put.ExpressionAttributeValues // the names are the store's, shared
	names["#names"], values[":n_steps"] = s.names.StepNames, num(int64(len(rec.Steps)))
	cond := completeCondition + " AND size(#names) = :n_steps AND " + s.untilClause(rec.ExpiresAt, names, values)
	_, err := c.UpdateItem(ctx, s.keepingUpdate(stored, cond, names, values), s.calls.fns...)
	var ccf *types.ConditionalCheckFailedException
	if err == nil || !errors.As(err, &ccf) {
		if err != nil {
			own, err := s.unconfirmed(ctx, op, rec, stored, err)
			return own, true, err
		}
		return stored, true, nil
	}
	item, err := s.blockingItem(ctx, op, ccf, rec.Key)
	if err != nil {
		return core.Record{}, true, err
	}
	var existing core.Record
	if len(item) > 0 {
		if existing, err = s.decode(item); err != nil {
			return core.Record{}, true, core.MarkPermanent(&Error{Op: op, Table: s.table, Err: err})
		}
	}
	switch {
	case len(item) > 0 && core.SameWrite(existing, rec):
		err = s.resolveSteps(ctx, op, item, &existing, rec.Steps)
		return existing, true, err
	case len(item) > 0 && existing.Status == core.StatusInProgress && existing.LeaseToken == rec.LeaseToken && !existing.Expired(rec.UpdatedAt):
		return core.Record{}, false, nil
	}
	return core.Record{}, true, s.leaseLost(rec, existing, len(item) > 0)
}

// sameFailure selects a failure that is the write rec itself
// (core.SameWrite), whose steps Complete returns: a completion retried
// after its answer was lost. (A success has no steps, and its result is
// the caller's: ownLarge.)
func sameFailure(rec core.Record) loadFunc {
	return func(stored core.Record) bool {
		return stored.Status == core.StatusFailed && core.SameWrite(stored, rec)
	}
}

// fitFailure returns rec, a failure, with its message shortened where the
// record, steps included, would not fit the item size limit. The steps take
// at most what they would take kept in the record, and at most their budget
// (stepRoom: RecordStep keeps them within it).
func (s *Store) fitFailure(rec core.Record) core.Record {
	n := &s.names
	steps := rec.Steps
	rec.Steps = nil
	inline := map[string]types.AttributeValue{}
	s.encodeSteps(inline, steps)
	bound := min(ItemSize(inline), s.stepRoom(rec.Key, rec.LeaseToken)+len(n.Steps)+3+len(n.StepNames)+len(n.StepsSize)+
		numberSize("1000000")+len(n.StepsUntil)+numberSize("10000000000000"))
	_, fitted, _, _ := fit.Record(rec, fit.NoCompression, s.maxItem-bound, func(r core.Record, _ []byte, _ string) (struct{}, int) {
		return struct{}{}, ItemSize(s.encode(r, nil, ""))
	})
	fitted.Steps = steps
	return fitted
}
