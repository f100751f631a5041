package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

var _ idem.Acquirer = (*Store)(nil)

// Acquire implements idem.Acquirer with one conditional UpdateItem that
// counts the attempt on the server (attempts = attempts_carried + 1, or 1
// where the item has no attempts_carried), returns the item it replaced
// (ReturnValues ALL_OLD) and, refused, the blocking item
// (ReturnValuesOnConditionCheckFailure ALL_OLD; where the server does not
// return it, one consistent GetItem reads it). The condition, with times at
// the table's resolution, is core.Acquirable:
//
//	attribute_not_exists(key)
//	OR (expires_at <= now_s AND status <> in_progress AND attribute_not_exists(attempts_carried)
//	    AND attribute_not_exists(steps))
//	OR (status = in_progress AND lease_until_ms <= now_ms AND <live>
//	    AND fingerprint = fp AND attempts_carried < max_attempts AND <until>)
//	OR (status = failed AND retryable = true AND <live>
//	    AND fingerprint = fp AND attempts_carried < max_attempts AND <until>)
//
// where <live> is (attribute_not_exists(expires_at) OR expires_at > now_s)
// and <until> is (attribute_not_exists(steps_until) OR steps_until >= the
// new expires_at). The second line replaces an expired record in place and
// restarts the count at 1: only records a new execution restarts from
// (succeeded, permanent failures) lack attempts_carried and steps. The last
// two continue the count, and the steps, of a live record; the steps it
// carries (of a record core.Resumable at now) are read from their step
// items with one BatchGetItem per 100.
//
// The condition leaves two kinds of record that core.Acquirable allows to
// a second request, each rare:
//   - a record past retention that carries a count (an in-progress record
//     or a retryable failure whose retention ended: a crash, or a failure
//     older than the retention): Acquire then writes a new record over it
//     with Reserve's PutItem over no live record (attempt 1, no steps);
//   - a live record whose step items end before the new record would (a
//     retry chain longer than the retention): its step items are written
//     again to end later (extendStepItems), then the UpdateItem is made
//     once more.
//
// A record that changed between a refusal and the read (another caller
// wrote it meanwhile) is acquired anew; after three refusals the answer is
// a transient ErrUnavailable. A refusal by rec itself (core.Acquired: an SDK retry of a write
// whose answer was lost) returns the stored record; after a failure that
// may have been applied, one consistent GetItem checks for it in the same
// way.
func (s *Store) Acquire(ctx context.Context, rec core.Record, now time.Time, p core.Policy) (core.Record, *core.Record, error) {
	const op = "acquire"
	if err := ctx.Err(); err != nil {
		return core.Record{}, nil, err
	}
	item, err := s.checkReservation(op, &rec)
	if err != nil {
		return core.Record{}, nil, err
	}
	a := &acquisition{s: s, rec: rec, item: item, now: now, policy: p}
	for try := 0; ; try++ {
		old, err := a.write(ctx)
		if err == nil {
			return s.acquired(ctx, a, old)
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return a.failed(ctx, err)
		}
		blocking, existing, found, err := s.blockingFor(ctx, op, ccf, rec.Key, a.loads)
		switch {
		case err != nil:
			return core.Record{}, nil, err
		case found && core.Acquired(existing, rec):
			return existing, nil, nil
		case found && !core.Acquirable(&existing, rec.Fingerprint, now, p):
			return core.Record{}, nil, &idem.ConflictError{Existing: existing}
		case try >= 2:
			return core.Record{}, nil, core.MarkTransient(&Error{Op: op, Table: s.table,
				Err: fmt.Errorf("%w: the blocking record changed twice during the acquisition", ErrUnavailable)})
		}
		if err := a.next(ctx, blocking, existing, found); err != nil {
			return core.Record{}, nil, err
		}
	}
}

// acquisition is one Acquire: the record to write (rec, and its item
// without steps), the time and the policy, and whether the next write
// restarts an expired record (Reserve's PutItem) instead of the
// UpdateItem.
type acquisition struct {
	s       *Store
	rec     core.Record
	item    map[string]types.AttributeValue
	now     time.Time
	policy  core.Policy
	restart bool
}

// write makes the acquisition's write: the UpdateItem, answering the item
// it replaced, or Reserve's PutItem over no live record.
func (a *acquisition) write(ctx context.Context) (map[string]types.AttributeValue, error) {
	s := a.s
	if a.restart {
		_, err := s.client.PutItem(ctx, s.reserveInput(a.item, nil, a.now), s.calls.fns...)
		return nil, err
	}
	out, err := s.client.UpdateItem(ctx, s.acquireInput(a.item, a.rec, a.now, a.policy), s.calls.fns...)
	if err != nil {
		return nil, err
	}
	s.span.learn(a.rec.ExpiresAt, a.now)
	return out.Attributes, nil
}

// next prepares the write after a refusal by a record that
// core.Acquirable allows (blocking, the stored item, if found): a new
// record over one past retention, the step items of a live one extended
// where they end too early, or the same write again.
func (a *acquisition) next(ctx context.Context, blocking map[string]types.AttributeValue, existing core.Record, found bool) error {
	a.restart = found && existing.Expired(a.now)
	if !found || a.restart {
		return nil
	}
	return a.s.extendStepItems(ctx, "acquire", blocking, a.rec.ExpiresAt, a.now)
}

// failed is the answer to an acquisition refused otherwise than by its
// condition (err): where it may have been applied, the stored record is
// read first and returned if it is the acquisition (core.Acquired).
func (a *acquisition) failed(ctx context.Context, err error) (core.Record, *core.Record, error) {
	t := a.s.translate(ctx, "acquire", err)
	if t.maybeApplied {
		if own, ok := a.s.ownWrite(ctx, "acquire", a.rec.Key, a.own, a.own); ok {
			return own, nil, nil
		}
	}
	return core.Record{}, nil, t.err
}

// own selects the stored record that is the acquisition itself
// (core.Acquired), whose steps are read.
func (a *acquisition) own(stored core.Record) bool { return core.Acquired(stored, a.rec) }

// loads selects the blocking records whose result or steps kept outside
// the item are read: those a duplicate replays (a live success with the
// acquisition's fingerprint) and the acquisition's own write (an earlier
// try's). A record that blocks the acquisition is answered without its
// steps.
func (a *acquisition) loads(stored core.Record) bool {
	return stored.Status == core.StatusSucceeded && replayOf(a.rec, a.now)(stored) || a.own(stored)
}

// checkReservation checks and normalizes an in-progress record to write
// (Reserve, Acquire): its status, token, key and size. It returns the
// record's item without its steps.
func (s *Store) checkReservation(op string, rec *core.Record) (map[string]types.AttributeValue, error) {
	if rec.Status != core.StatusInProgress {
		return nil, fmt.Errorf("ddbstore: %s needs an in_progress record, got %q", op, rec.Status)
	}
	if rec.LeaseToken == "" {
		return nil, fmt.Errorf("ddbstore: %s needs a lease token", op)
	}
	if err := s.checkKey(op, rec.Key); err != nil {
		return nil, err
	}
	*rec = normalize(*rec)
	rec.Result, rec.ResultOmitted = nil, false
	item := s.encode(*rec, nil, "")
	if size := ItemSize(item); size > s.maxItem {
		return nil, s.fail(op, ErrItemTooLarge, "record is %d bytes, at most %d", size, s.maxItem)
	}
	return item, nil
}

// acquired returns the record an acquisition wrote over old (the item
// before it, empty if there was none or it restarted an expired record)
// and the live record it replaced. The steps the record carries over from
// old (core.Resumable) are read where old keeps them in step items.
func (s *Store) acquired(ctx context.Context, a *acquisition, old map[string]types.AttributeValue) (core.Record, *core.Record, error) {
	if len(old) == 0 {
		return core.Acquire(a.rec, nil, a.now), nil, nil
	}
	prev, err := s.decode(old)
	if err != nil {
		// The write was made; only the record it replaced is unreadable.
		return core.Record{}, nil, core.MarkPermanent(&Error{Op: "acquire", Table: s.table, Err: err})
	}
	if s.hasStepRefs(old) && core.Resumable(&prev, a.rec.Fingerprint, a.now) {
		if err := s.resolveSteps(ctx, "acquire", old, &prev, nil); err != nil {
			return core.Record{}, nil, err
		}
	}
	if prev.Expired(a.now) {
		return core.Acquire(a.rec, &prev, a.now), nil, nil
	}
	return core.Acquire(a.rec, &prev, a.now), &prev, nil
}

// acquireCondition is core.Acquirable as a condition expression (see
// Acquire), over the placeholders of recordPlaceholders: a flat
// disjunction of conjunctions, which servers that parse expressions
// naively (dynalite) evaluate far faster than nested ones.
// The branches that continue a live record also keep its end of retention
// at or before that of its step items (untilClause).
const acquireCondition = "attribute_not_exists(#k)" +
	" OR (#exp <= :now_s AND #st <> :in_progress AND attribute_not_exists(#carried) AND attribute_not_exists(#steps))" +
	" OR (#st = :in_progress AND #lease <= :now_ms" + acquireContinues +
	" OR (#st = :failed AND #retry = :true" + acquireContinues

// acquireContinues ends a branch of acquireCondition that continues a live
// record: within its retention (or without one), the caller's fingerprint,
// attempts below the bound, and step items that do not end before the new
// record (untilClause, with :new_exp the new record's end of retention:
// the largest number for one that never ends, so that only a record
// without step items that end is continued).
const acquireContinues = " AND (attribute_not_exists(#exp) OR #exp > :now_s) AND #fp = :want_fp AND #carried < :max" +
	" AND (attribute_not_exists(#until) OR #until >= :new_exp))"

// acquireCount is the attempt an acquisition writes: one more than the
// count carried, or 1 where the item carries none.
const acquireCount = "if_not_exists(#carried, :zero) + :one"

// acquireSet is the start of every acquisition's update expression: the
// counts, which it computes on the server.
const acquireSet = "SET #att = " + acquireCount + ", #carried = " + acquireCount

// acquireInput is the UpdateItem of an acquisition of rec, whose item
// without its steps (as encode writes it) is item: it sets every attribute
// of the item (but the key, which it addresses, and the counts, which it
// computes) and removes the record's other attributes but the steps'
// (replacement), under acquireCondition.
func (s *Store) acquireInput(item map[string]types.AttributeValue, rec core.Record, now time.Time, p core.Policy) *dynamodb.UpdateItemInput {
	parts := &s.parts
	values := make(map[string]types.AttributeValue, len(parts.acquireValues)+5+len(parts.slots))
	maps.Copy(values, parts.acquireValues)
	values[":now_s"], values[":now_ms"] = num(now.Unix()), num(now.UnixMilli())
	values[":max"] = num(int64(p.AttemptLimit()))
	values[":want_fp"] = &types.AttributeValueMemberS{Value: rec.Fingerprint}
	values[":new_exp"] = num(math.MaxInt64)
	if !rec.ExpiresAt.IsZero() {
		values[":new_exp"] = num(ceilSeconds(rec.ExpiresAt))
	}
	var update strings.Builder
	parts.replacement(&update, item, values, true)
	return &dynamodb.UpdateItemInput{
		TableName:                           parts.table,
		Key:                                 s.keyIn(item),
		UpdateExpression:                    aws.String(update.String()),
		ConditionExpression:                 parts.acquireCondition,
		ExpressionAttributeNames:            parts.acquireNames,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}
