package ddbstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fit"
)

// completeCondition requires the caller's lease on a record that is not
// Expired (core.Record.Expired) at the completion's time.
const completeCondition = "#st = :in_progress AND #tok = :tok AND (#exp > :now_s OR #lease > :now_ms)"

// Complete implements idem.Store.Complete with one write conditioned on
// the caller's lease (completeCondition):
//
//   - a success, a permanent failure or a retryable failure without steps
//     is one PutItem, which replaces the whole item (and so drops any step
//     references);
//   - a retryable failure with steps (which it keeps, so that the retry
//     resumes after them) is one UpdateItem that sets every attribute but
//     the steps', which stay in their step items, conditioned also on the
//     record holding rec's number of steps and on the steps' end of
//     retention (untilClause). Refused by the caller's own record, where it
//     lacks steps that rec has (steps whose writes the caller could not
//     confirm, and which were not applied), their step items are written
//     (putStepItem) and the update appends their references; where its step
//     items end before the failure's retention, they are extended
//     (extendStepItems); then the update is made once more.
//
// A result of more than the compression threshold is stored gzip-compressed
// when that makes it smaller. A result that would still make the record
// pass a write unit (RecordUnit) it would not pass with a reference is
// kept in a result item of its own, written first with one PutItem, so
// that the record's later writes cost what a record without it costs. If
// even the result item would exceed the item size limit, a succeeded record
// is stored without its result and the returned record has ResultOmitted
// set, unless WithLargeResults keeps the result in a blob store. A result
// item or an object is written before the record; a failure to write it
// fails the completion (wrapped in idem.ErrCommitRefused; ErrLargeResult
// for the blob store) and writes no record. A failed record's error
// message is shortened. Completion never fails for size.
//
// If the condition fails and the stored record (from the error, or one
// consistent GetItem where the server does not return it) is this very
// completion, applied by an earlier try whose answer was lost, Complete
// returns it as success. Otherwise the error wraps idem.ErrLeaseLost.
// Transport failures, throttling and 5xx are transient: retrying a
// completion is safe because of that check. After a failure that may have
// been applied (a timeout, a reset, a 5xx, a reply cut short at any
// status), one consistent GetItem checks for this very completion in the
// same way before the error is returned.
func (s *Store) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	const op = "complete"
	if err := ctx.Err(); err != nil {
		return core.Record{}, err
	}
	if rec.Status != core.StatusSucceeded && rec.Status != core.StatusFailed {
		return core.Record{}, fmt.Errorf("ddbstore: complete needs a succeeded or failed record, got %q", rec.Status)
	}
	if err := s.checkKey(op, rec.Key); err != nil {
		return core.Record{}, err
	}
	rec = normalize(rec)
	rec.Error = strings.ToValidUTF8(rec.Error, "\uFFFD")
	if len(rec.Steps) > 0 {
		return s.completeKeeping(ctx, rec)
	}
	c, err := s.fitComplete(op, rec)
	if err == nil {
		err = s.writeApart(ctx, op, c)
	}
	if err != nil {
		return core.Record{}, refusedCommit(rec, err) // no record written
	}
	stored := c.stored
	put := s.completePut(c.item, rec)
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: put.TableName, Item: put.Item, ConditionExpression: put.ConditionExpression,
		ExpressionAttributeNames: put.ExpressionAttributeNames, ExpressionAttributeValues: put.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: put.ReturnValuesOnConditionCheckFailure,
	}, s.calls.fns...)
	if err == nil {
		return stored, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return s.unconfirmed(ctx, op, rec, stored, err)
	}
	_, existing, found, rerr := s.blockingFor(ctx, op, ccf, rec.Key, sameFailure(rec))
	if rerr != nil {
		// The lease was lost or the outcome is ours; we cannot tell which.
		return core.Record{}, rerr
	}
	if found && core.SameWrite(existing, rec) {
		return ownLarge(existing, stored), nil
	}
	return core.Record{}, s.leaseLost(rec, existing, found)
}

// completeKeeping writes rec, a retryable failure with steps, with the
// UpdateItem that keeps its steps (see Complete).
func (s *Store) completeKeeping(ctx context.Context, rec core.Record) (core.Record, error) {
	const op = "complete"
	stored := s.fitFailure(rec)
	var missing []core.Step
	var ttl int64
	for try := 0; ; try++ {
		_, err := s.client.UpdateItem(ctx, s.keepingInput(stored, missing, ttl), s.calls.fns...)
		var ccf *types.ConditionalCheckFailedException
		if err == nil {
			return stored, nil
		}
		if !errors.As(err, &ccf) {
			return s.unconfirmed(ctx, op, rec, stored, err)
		}
		item, existing, found, err := s.blockingFor(ctx, op, ccf, rec.Key, sameFailure(rec))
		switch {
		case err != nil:
			return core.Record{}, err
		case found && core.SameWrite(existing, rec):
			return existing, nil
		case !found || existing.Status != core.StatusInProgress || existing.LeaseToken != rec.LeaseToken || existing.Expired(rec.UpdatedAt):
			return core.Record{}, s.leaseLost(rec, existing, found)
		case try >= 2:
			return core.Record{}, core.MarkTransient(&Error{Op: op, Table: s.table,
				Err: fmt.Errorf("%w: the record's steps changed during the completion", ErrUnavailable)})
		}
		if err = s.dropUnknownSteps(ctx, item, existing, rec); err != nil {
			return core.Record{}, err
		}
		if missing, ttl, err = s.unreferenced(ctx, item, existing, rec); err != nil {
			return core.Record{}, err
		}
	}
}

// dropUnknownSteps removes from the caller's record, stored (its item,
// item), the steps that rec, a retryable failure with steps, does not
// carry: steps whose write was applied but whose answer the holder never
// had. The failure replaces the record, its steps included (idem.Store's
// Complete); their step items end with their retention. One UpdateItem,
// conditioned on the caller's lease and on the steps as read; nothing is
// sent where the record holds none of them.
func (s *Store) dropUnknownSteps(ctx context.Context, item map[string]types.AttributeValue, stored, rec core.Record) error {
	const op = "complete"
	st, err := s.storedStepsOf(item)
	if err != nil {
		return core.MarkPermanent(&Error{Op: op, Table: s.table, Err: err})
	}
	known := map[string]bool{}
	for _, step := range rec.Steps {
		known[step.Name] = true
	}
	var drop []int
	var dropNames []string
	cost := 0
	for i, e := range st.entries {
		switch {
		case e.isRef && !slices.ContainsFunc(rec.Steps, func(step core.Step) bool { return refOf(step) == e.ref }):
			drop = append(drop, i)
		case !e.isRef && !slices.ContainsFunc(rec.Steps, func(step core.Step) bool { return step.Name == e.step.Name && bytes.Equal(step.Result, e.step.Result) }):
			drop, cost = append(drop, i), cost+stepCostV010(e.step)
			dropNames = append(dropNames, e.step.Name)
		}
	}
	for name := range st.names {
		if !known[name] && !slices.Contains(dropNames, name) {
			dropNames, cost = append(dropNames, name), cost+refCost(core.Step{Name: name})
		}
	}
	if len(drop) == 0 {
		return nil
	}
	if len(dropNames) != len(drop) {
		return core.MarkTransient(&Error{Op: op, Table: s.table,
			Err: fmt.Errorf("%w: the record holds %d steps the completion does not carry, under %d names", ErrUnavailable, len(drop), len(dropNames))})
	}
	_, err = s.client.UpdateItem(ctx, s.dropInput(stored, st, drop, dropNames, cost), s.calls.fns...)
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return s.translate(ctx, op, err).err
	}
	return nil // applied, or the record changed: the completion reads it again
}

// dropInput is dropUnknownSteps' UpdateItem: it removes the entries drop
// of the steps list, the names dropNames and their cost from the record
// stored, whose steps st were read, under the caller's lease.
func (s *Store) dropInput(stored core.Record, st storedSteps, drop []int, dropNames []string, cost int) *dynamodb.UpdateItemInput {
	names := maps.Clone(s.parts.completeNames)
	names["#steps"], names["#ssize"] = s.names.Steps, s.names.StepsSize
	values := s.completeValues(stored)
	values[":drop_names"], values[":drop_cost"] = &types.AttributeValueMemberSS{Value: dropNames}, num(int64(-cost))
	cond := completeCondition + " AND " + s.stepCount(len(st.names), names, values)
	removes := make([]string, len(drop))
	for i, idx := range drop {
		removes[i] = fmt.Sprintf("#steps[%d]", idx)
	}
	return &dynamodb.UpdateItemInput{
		TableName:                 s.parts.table,
		Key:                       s.keyOf(stored.Key),
		UpdateExpression:          aws.String("REMOVE " + strings.Join(removes, ", ") + " DELETE #names :drop_names ADD #ssize :drop_cost"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}
}

// keepingInput is the UpdateItem of stored, a retryable failure with
// steps, that keeps the steps the record references and appends the
// references of missing, whose step items end at ttl (none when 0).
func (s *Store) keepingInput(stored core.Record, missing []core.Step, ttl int64) *dynamodb.UpdateItemInput {
	bare := stored
	bare.Steps = nil
	names := maps.Clone(s.parts.completeNames)
	values := s.completeValues(stored)
	cond := completeCondition + " AND " + s.stepCount(len(stored.Steps)-len(missing), names, values) +
		" AND " + s.untilClause(stored.ExpiresAt, names, values)
	if len(missing) == 0 {
		return s.replaceInput(s.encode(bare, nil, ""), cond, names, values)
	}
	refs := make([]types.AttributeValue, len(missing))
	stepNames := make([]string, len(missing))
	cost := 0
	for i, st := range missing {
		ref := refOf(st)
		refs[i], stepNames[i] = &types.AttributeValueMemberB{Value: ref[:]}, st.Name
		cost += refCost(st)
	}
	names["#steps"], names["#ssize"] = s.names.Steps, s.names.StepsSize
	values[":none"], values[":refs"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{}}, &types.AttributeValueMemberL{Value: refs}
	values[":add_names"], values[":cost"] = &types.AttributeValueMemberSS{Value: stepNames}, num(int64(cost))
	extra := []string{"#steps = list_append(if_not_exists(#steps, :none), :refs)"}
	if ttl > 0 {
		values[":ttl"] = num(ttl)
		extra = append(extra, "#until = if_not_exists(#until, :ttl)")
	}
	in := s.replaceInput(s.encode(bare, nil, ""), cond, names, values, extra...)
	*in.UpdateExpression += " ADD #names :add_names, #ssize :cost"
	return in
}

// unreferenced makes the caller's record, stored (its item, item), ready
// for rec, a retryable
// failure with steps, whose keeping UpdateItem it refused: where item
// lacks references of rec's steps, it writes their step items (to end at
// ttl, no earlier than the record and its other step items) and returns
// them, to be appended; where it has them all, it extends its step items
// that end before rec's retention (extendStepItems) and returns none.
func (s *Store) unreferenced(ctx context.Context, item map[string]types.AttributeValue, stored, rec core.Record) ([]core.Step, int64, error) {
	const op = "complete"
	st, err := s.storedStepsOf(item)
	if err != nil {
		return nil, 0, core.MarkPermanent(&Error{Op: op, Table: s.table, Err: err})
	}
	var missing []core.Step
	cost := 0
	for _, step := range rec.Steps {
		if !st.holds(step, refOf(step)) {
			missing, cost = append(missing, step), cost+refCost(step)
		}
	}
	if len(missing) == 0 {
		return nil, 0, s.extendStepItems(ctx, op, item, stored, rec.ExpiresAt, rec.UpdatedAt)
	}
	if int(st.size)+cost > s.stepRoom(rec.Key, rec.LeaseToken) {
		return nil, 0, s.fail(op, ErrItemTooLarge, "the references of %d steps not recorded before the failure pass the item size limit %d", len(missing), s.maxItem)
	}
	var ttl int64
	if !rec.ExpiresAt.IsZero() {
		ttl = max(s.span.ttl(rec.UpdatedAt), st.until, ceilSeconds(rec.ExpiresAt))
	}
	for _, step := range missing {
		if err := s.checkStepItem(op, rec.Key, step); err != nil {
			return nil, 0, err
		}
		if err := s.putStepItem(ctx, op, rec.Key, step, ttl); err != nil {
			return nil, 0, err
		}
	}
	return missing, ttl, nil
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

// fitFailure returns rec, a failure with steps, with its message shortened
// where the record, steps included, would not fit the item size limit.
// The steps take at most what each takes kept in the record (stepCostV010,
// more than a reference), and at most their budget (stepRoom: RecordStep
// keeps them within it).
func (s *Store) fitFailure(rec core.Record) core.Record {
	n := &s.names
	steps := rec.Steps
	rec.Steps = nil
	size := 0
	for _, st := range steps {
		size += stepCostV010(st)
	}
	overhead := len(n.Steps) + 3 + len(n.StepNames) + len(n.StepsSize) + numberSize("1000000") + len(n.StepsUntil) + numberSize("10000000000000")
	bound := min(size, s.stepRoom(rec.Key, rec.LeaseToken)) + overhead
	_, fitted, _, _ := fit.Record(rec, fit.NoCompression, s.maxItem-bound, func(r core.Record, _ []byte, _ string) (struct{}, int) {
		return struct{}{}, ItemSize(s.encode(r, nil, ""))
	})
	fitted.Steps = steps
	return fitted
}

// unconfirmed is the answer to a completion of rec (meant to be stored as
// stored) that failed with err, not by its condition: if err leaves it
// unknown whether the write was applied, the stored record is read first
// (ownWrite), and if it is the completion, it is returned as success.
func (s *Store) unconfirmed(ctx context.Context, op string, rec, stored core.Record, err error) (core.Record, error) {
	t := s.translate(ctx, op, err)
	if t.maybeApplied {
		if existing, own := s.ownWrite(ctx, op, rec.Key, sameWrite(rec), sameFailure(rec)); own {
			return ownLarge(existing, stored), nil
		}
	}
	return core.Record{}, t.err
}

// refusedCommit marks err, the failure of the completion of rec that
// certainly wrote nothing because of what it commits (a result that cannot
// be kept, staged writes refused as a whole), as the commit refused
// (idem.ErrCommitRefused) if rec is a success; a failure's is left as it
// is.
func refusedCommit(rec core.Record, err error) error {
	if rec.Status != core.StatusSucceeded {
		return err
	}
	return fmt.Errorf("%w: %w", idem.ErrCommitRefused, err)
}

// leaseLost is the error of a completion of rec refused by its condition,
// describing the stored record (existing, if found).
func (s *Store) leaseLost(rec, existing core.Record, found bool) error {
	what := "no record"
	if found {
		what = fmt.Sprintf("a %s record (attempt %d) with another lease", existing.Status, existing.Attempts)
		if existing.LeaseToken == rec.LeaseToken {
			what = fmt.Sprintf("a %s record (attempt %d) with this lease", existing.Status, existing.Attempts)
		}
	}
	return fmt.Errorf("ddbstore: complete on table %q, key hash %s: %w: table holds %s",
		s.table, idem.HashKey(rec.Key), idem.ErrLeaseLost, what)
}

// fitItem encodes a completed record within the item size limit, compressing
// the result or, failing that, dropping it (succeeded) or shortening the
// error message (failed). It returns the item and the record as stored.
func (s *Store) fitItem(op string, rec core.Record) (map[string]types.AttributeValue, core.Record, error) {
	item, stored, size, ok := fit.Record(rec, s.compressAbove, s.maxItem, func(rec core.Record, body []byte, encoding string) (map[string]types.AttributeValue, int) {
		item := s.encode(rec, body, encoding)
		return item, ItemSize(item)
	})
	if !ok {
		return nil, core.Record{}, s.fail(op, ErrItemTooLarge, "record without result is %d bytes, at most %d", size, s.maxItem)
	}
	return item, stored, nil
}
