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
	if err := ctx.Err(); err != nil {
		return core.Record{}, nil, err
	}
	item, err := s.checkReservation("acquire", &rec)
	if err != nil {
		return core.Record{}, nil, err
	}
	a := &acquisition{s: s, rec: rec, item: item, now: now, policy: p}
	replaced, own, err := a.run(ctx)
	switch {
	case err != nil:
		return core.Record{}, nil, err
	case own != nil:
		return *own, nil, nil
	case replaced != nil && replaced.Expired(now):
		replaced = nil // a record that counted as absent
	}
	return core.Acquire(rec, replaced, now), replaced, nil
}

// acquisition is one Acquire: the record to write (rec, and its item
// without steps), the time and the policy; and after a refusal by a record
// that core.Acquirable allows, what the next write needs: a new record over
// one past retention (restart), or the step items of a live one extended
// (extend, the blocking record and its item).
type acquisition struct {
	s       *Store
	rec     core.Record
	item    map[string]types.AttributeValue
	now     time.Time
	policy  core.Policy
	restart bool
	extend  *blocked
}

// blocked is a record that refused a write, and its item.
type blocked struct {
	item map[string]types.AttributeValue
	rec  core.Record
}

// run makes the acquisition's writes until one is applied, and returns the
// record it replaced (nil: none), its steps read; or the acquisition as an
// earlier try applied it (own); or the error that answers it.
func (a *acquisition) run(ctx context.Context) (replaced, own *core.Record, err error) {
	s := a.s
	for try := 0; ; try++ {
		if err := a.extendSteps(ctx); err != nil {
			return nil, nil, err
		}
		old, err := a.write(ctx)
		if err == nil {
			replaced, err := s.replaced(ctx, old)
			return replaced, nil, err
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			own, err := a.failed(ctx, err)
			return nil, own, err
		}
		blocking, existing, found, err := s.blockingFor(ctx, "acquire", ccf, a.rec.Key, a.loads)
		switch {
		case err != nil:
			return nil, nil, err
		case found && core.Acquired(existing, a.rec):
			return nil, &existing, nil
		case found && !core.Acquirable(&existing, a.rec.Fingerprint, a.now, a.policy):
			return nil, nil, &idem.ConflictError{Existing: existing}
		case try >= 2:
			return nil, nil, core.MarkTransient(&Error{Op: "acquire", Table: s.table,
				Err: fmt.Errorf("%w: the blocking record changed twice during the acquisition", ErrUnavailable)})
		}
		a.restart, a.extend = found && existing.Expired(a.now), nil
		if found && !a.restart {
			a.extend = &blocked{item: blocking, rec: existing}
		}
	}
}

// extendSteps extends the step items of the live record that refused the
// last write, where they end before the new record would (extendStepItems).
func (a *acquisition) extendSteps(ctx context.Context) error {
	if a.extend == nil {
		return nil
	}
	return a.s.extendStepItems(ctx, "acquire", a.extend.item, a.extend.rec, a.rec.ExpiresAt, a.now)
}

// write makes the acquisition's write: the UpdateItem, answering the item
// it replaced, or Reserve's PutItem over no live record.
func (a *acquisition) write(ctx context.Context) (map[string]types.AttributeValue, error) {
	s := a.s
	if a.restart {
		_, err := s.client.PutItem(ctx, s.freshInput(a.item, a.now), s.calls.fns...)
		return nil, err
	}
	out, err := s.client.UpdateItem(ctx, s.acquireInput(a.item, a.rec, a.now, a.policy), s.calls.fns...)
	if err != nil {
		return nil, err
	}
	s.span.learn(a.rec.ExpiresAt, a.now)
	return out.Attributes, nil
}

// failed is the answer to an acquisition refused otherwise than by its
// condition (err): where it may have been applied, the stored record is
// read first and returned if it is the acquisition (core.Acquired).
func (a *acquisition) failed(ctx context.Context, err error) (*core.Record, error) {
	t := a.s.translate(ctx, "acquire", err)
	if t.maybeApplied {
		if own, ok := a.s.ownWrite(ctx, "acquire", a.rec.Key, a.own, a.own); ok {
			return &own, nil
		}
	}
	return nil, t.err
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

// replaced returns the record an acquisition's write replaced, old (the
// item before it; nil if it was empty: no record, or one it restarted),
// with its steps, read from their step items where it keeps them there.
func (s *Store) replaced(ctx context.Context, old map[string]types.AttributeValue) (*core.Record, error) {
	if len(old) == 0 {
		return nil, nil
	}
	prev, err := s.decode(old)
	if err == nil {
		return &prev, s.resolveSteps(ctx, "acquire", old, &prev, nil)
	}
	// The write was made; only the record it replaced is unreadable.
	return nil, core.MarkPermanent(&Error{Op: "acquire", Table: s.table, Err: err})
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
	values[":new_exp"] = item[s.ttlAttr] // the new end of retention, in seconds
	if values[":new_exp"] == nil {
		values[":new_exp"] = num(math.MaxInt64)
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
