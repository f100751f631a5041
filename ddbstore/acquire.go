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

// UpdateAPI is the part of the DynamoDB client that Store.Acquire,
// RecordStep and RenewLease call beyond API: UpdateItem. A
// *dynamodb.Client satisfies it. The store asks its client for it with a
// type assertion when those run, so a client (or a test's fake) with API's
// methods alone still serves the idem.Store methods: Acquire then reserves
// with PutItem as Reserve does, and RecordStep and RenewLease fail (see
// them).
type UpdateAPI interface {
	API
	// UpdateItem updates some attributes of an item, conditionally.
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

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
//	OR (status = in_progress AND lease_until_ms <= now_ms AND expires_at > now_s
//	    AND fingerprint = fp AND attempts_carried < max_attempts AND <until>)
//	OR (status = failed AND retryable = true AND expires_at > now_s
//	    AND fingerprint = fp AND attempts_carried < max_attempts AND <until>)
//
// where <until> is (attribute_not_exists(steps_until) OR steps_until >=
// the new expires_at): a record continued keeps its steps, and its step
// items must not end before it.
// The second line replaces an expired record in place and restarts the
// count at 1: only records a new execution restarts from (succeeded,
// permanent failures) lack attempts_carried, and the update leaves the
// steps' attributes as they are, so the record must have none (a fresh
// execution carries no step: core.Acquire). The last two continue the
// count, and the steps, of a live record; the steps it carries (of a
// record core.Resumable at now) are read from their step items with one
// BatchGetItem per 100. The condition leaves a few records that
// core.Acquirable allows to a second write: an in-progress record or a
// retryable failure past retention (it carries its count), a record without
// a TTL attribute, a record written before attempts_carried existed, an
// expired one with steps (a retryable failure of that encoding), and one
// whose step items end before the new record would (a retry chain longer
// than the retention). Refused with such a record, Acquire reserves with a
// PutItem conditioned on that record alone (Reserve's prev branch; a live
// record) or on there being none (an expired one), which writes the whole
// item, steps included: one write more, in cases that need a crash or a
// failure older than the retention, or a table written by an older
// version. It does the same with a client that is not an UpdateAPI and,
// from then on, after an UpdateItem refused with AccessDeniedException (an
// IAM policy written for an older version, which granted PutItem and
// GetItem only: grant UpdateItem too). If the record changed before that
// PutItem into one core.Acquirable allows too (a retryable failure written
// in between), it puts over that one, and if it went (released), it
// reserves afresh, once more: a *idem.ConflictError holds only a record
// that blocks the acquisition, and the attempt is counted over the record
// replaced.
//
// A refusal by rec itself (core.Acquired: an SDK retry of a write whose
// answer was lost) returns the stored record; after a failure that may have
// been applied, one consistent GetItem checks for it in the same way.
func (s *Store) Acquire(ctx context.Context, rec core.Record, now time.Time, p core.Policy) (core.Record, *core.Record, error) {
	if err := ctx.Err(); err != nil {
		return core.Record{}, nil, err
	}
	item, err := s.checkReservation("acquire", &rec)
	if err != nil {
		return core.Record{}, nil, err
	}
	api, ok := s.client.(UpdateAPI)
	if !ok || s.noUpdate.Load() {
		return s.acquireByPut(ctx, rec, now, p)
	}
	out, err := api.UpdateItem(ctx, s.acquireInput(item, rec, now, p), s.calls.fns...)
	if err == nil {
		s.steps.span.learn(rec.ExpiresAt, now)
		return s.acquired(ctx, rec, out.Attributes, now)
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t := s.translate(ctx, "acquire", err)
		if errors.Is(t.err, ErrAccessDenied) {
			s.noUpdate.Store(true)
			return s.acquireByPut(ctx, rec, now, p)
		}
		if t.maybeApplied {
			if own, ok := s.ownAcquisition(ctx, rec); ok {
				return own, nil, nil
			}
		}
		return core.Record{}, nil, t.err
	}
	existing, found, err := s.blockingFor(ctx, "acquire", ccf, rec.Key, acquireLoads(rec, now, p))
	if err != nil {
		return core.Record{}, nil, err
	}
	if found && core.Acquired(existing, rec) {
		return existing, nil, nil
	}
	if found && !core.Acquirable(&existing, rec.Fingerprint, now, p) {
		return core.Record{}, nil, &idem.ConflictError{Existing: existing}
	}
	// A record the condition leaves to a second write, or one that
	// changed or went between the refusal and the read.
	var stored *core.Record
	if found {
		stored = &existing
	}
	return s.putOver(ctx, rec, stored, now, p)
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
	bare := *rec
	bare.Steps = nil
	item := s.encode(bare, nil, "")
	if size := ItemSize(item); size > s.maxItem {
		return nil, s.fail(op, ErrItemTooLarge, "record is %d bytes, at most %d", size, s.maxItem)
	}
	return item, nil
}

// acquireLoads selects the blocking records of an acquisition of rec at now
// under p whose result or steps kept outside the item are read: those a
// duplicate replays (replayOf), the caller's own reservation (an earlier
// try's), and those the condition left to a second write that carries
// their steps (core.Acquirable and core.Resumable). A record that blocks
// the acquisition is answered without its steps.
func acquireLoads(rec core.Record, now time.Time, p core.Policy) loadFunc {
	replay := replayOf(rec, now)
	return func(stored core.Record) bool {
		return replay(stored) && stored.Status == core.StatusSucceeded || core.Acquired(stored, rec) ||
			core.Resumable(&stored, rec.Fingerprint, now) && core.Acquirable(&stored, rec.Fingerprint, now, p)
	}
}

// acquired returns the record an UpdateItem wrote over old (the item
// before it, empty if there was none) and the live record it replaced. The
// steps the record carries over from old (core.Resumable) are read where
// old keeps them in step items.
func (s *Store) acquired(ctx context.Context, rec core.Record, old map[string]types.AttributeValue, now time.Time) (core.Record, *core.Record, error) {
	if len(old) == 0 {
		return core.Acquire(rec, nil, now), nil, nil
	}
	prev, err := s.decode(old)
	if err != nil {
		// The write was made; only the record it replaced is unreadable.
		return core.Record{}, nil, core.MarkPermanent(&Error{Op: "acquire", Table: s.table, Err: err})
	}
	if s.hasStepRefs(old) && core.Resumable(&prev, rec.Fingerprint, now) {
		if err := s.resolveSteps(ctx, "acquire", old, &prev, nil); err != nil {
			return core.Record{}, nil, err
		}
	}
	rec = core.Acquire(rec, &prev, now)
	if prev.Expired(now) {
		return rec, nil, nil
	}
	return rec, &prev, nil
}

// acquireByPut acquires with Reserve's PutItem, for a client without
// UpdateItem: a reservation at attempt 1, and where the record that blocks
// it may be replaced, a second one conditioned on that record.
func (s *Store) acquireByPut(ctx context.Context, rec core.Record, now time.Time, p core.Policy) (core.Record, *core.Record, error) {
	rec = core.Acquire(rec, nil, now)
	err := s.Reserve(ctx, rec, nil, now)
	var ce *idem.ConflictError
	if !errors.As(err, &ce) {
		if err != nil {
			return core.Record{}, nil, err
		}
		return rec, nil, nil
	}
	if core.Acquired(ce.Existing, rec) {
		return ce.Existing, nil, nil
	}
	if !core.Acquirable(&ce.Existing, rec.Fingerprint, now, p) {
		return core.Record{}, nil, err
	}
	return s.putOver(ctx, rec, &ce.Existing, now, p)
}

// putOver writes rec over stored (nil: no record) at the attempt
// core.Acquire gives: over a live stored record, with a write conditioned on
// that record alone (replaceOnly); over none or an expired one, with
// Reserve's PutItem without prev. If the record changed before the write
// into one that may be replaced too (core.Acquirable: a retryable failure
// written in between), or went (released, or past retention by now), it
// writes over what there is then, once: a conflict answers only a record
// that blocks the acquisition, and the attempt and the record replaced are
// those of the record the write replaced.
func (s *Store) putOver(ctx context.Context, rec core.Record, stored *core.Record, now time.Time, p core.Policy) (core.Record, *core.Record, error) {
	for try := 0; ; try++ {
		acq := core.Acquire(rec, stored, now)
		var prev *core.Record
		var err error
		if stored != nil && !stored.Expired(now) {
			prev = stored
			err = s.replaceOnly(ctx, acq, prev, now)
		} else {
			err = s.Reserve(ctx, acq, nil, now)
		}
		var ce *idem.ConflictError
		switch {
		case errors.Is(err, errPrevGone):
			stored = nil
		case errors.As(err, &ce) && core.Acquirable(&ce.Existing, rec.Fingerprint, now, p):
			stored = &ce.Existing
		case err != nil:
			return core.Record{}, nil, err
		default:
			return acq, prev, nil
		}
		if try >= 1 {
			return core.Record{}, nil, core.MarkTransient(&Error{Op: "acquire", Table: s.table,
				Err: fmt.Errorf("%w: the blocking record changed twice during the acquisition", ErrUnavailable)})
		}
	}
}

// errPrevGone: the record a reservation was to replace is no longer
// stored (released, or past retention).
var errPrevGone = errors.New("ddbstore: the record to replace is gone")

// replaceOnly writes rec, a reservation, over prev, a live record, and
// over nothing else: Reserve's write conditioned on prevBranch alone (and
// reserveKeepingSteps's where rec carries prev's steps). Refused, it
// returns nil where the stored record is rec (a retried write), a
// *idem.ConflictError holding the live record that refused it, or
// errPrevGone where there is none.
func (s *Store) replaceOnly(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	const op = "acquire"
	if done, err := s.prepareReservation(ctx, op, &rec, prev, now); done {
		return err
	}
	cond, names, values := s.prevOnly(prev, now)
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: s.encode(rec, nil, ""), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, s.calls.fns...)
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		t := s.translate(ctx, op, err)
		if t.maybeApplied && s.ownReservation(ctx, rec) {
			return nil
		}
		return t.err
	}
	if err == nil {
		return nil
	}
	existing, found, err := s.blockingFor(ctx, op, ccf, rec.Key, replayOf(rec, now))
	switch {
	case err != nil:
		return err
	case found && core.SameWrite(existing, rec):
		return nil
	case found && !existing.Expired(now):
		return &idem.ConflictError{Existing: existing}
	}
	return errPrevGone
}

// ownAcquisition reads the key after an acquisition whose outcome is
// unknown and returns the stored record if it is rec's (core.Acquired; see
// ownWrite).
func (s *Store) ownAcquisition(ctx context.Context, rec core.Record) (core.Record, bool) {
	acquired := func(stored core.Record) bool { return core.Acquired(stored, rec) }
	return s.ownWrite(ctx, "acquire", rec.Key, acquired, acquired)
}

// acquireCondition is core.Acquirable as a condition expression (see
// Acquire), over the placeholders of recordPlaceholders: a flat
// disjunction of conjunctions, which servers that parse expressions
// naively (dynalite) evaluate far faster than nested ones.
// The branches that continue a live record also keep its end of retention
// at or before that of its step items (untilClause).
const acquireCondition = "attribute_not_exists(#k)" +
	" OR (#exp <= :now_s AND #st <> :in_progress AND attribute_not_exists(#carried) AND attribute_not_exists(#steps))" +
	" OR (#st = :in_progress AND #lease <= :now_ms AND #exp > :now_s AND #fp = :want_fp AND #carried < :max" + acquireUntil +
	" OR (#st = :failed AND #retry = :true AND #exp > :now_s AND #fp = :want_fp AND #carried < :max" + acquireUntil

// acquireUntil ends a continuing branch of acquireCondition: untilClause,
// with :new_exp the new record's end of retention (the largest number for
// one that never ends, so that only a record without step items that end
// is continued).
const acquireUntil = " AND (attribute_not_exists(#until) OR #until >= :new_exp))"

// acquireCount is the attempt an acquisition writes: one more than the
// count carried, or 1 where the item carries none.
const acquireCount = "if_not_exists(#carried, :zero) + :one"

// recordPlaceholders returns the expression placeholder of each of a
// record's attributes, its key and TTL attribute included. The steps'
// attributes are not among them: an acquisition leaves them as they are,
// carried by a takeover or a retry (core.Acquire), and restarts in place
// only from a record without them (acquireCondition).
func (s *Store) recordPlaceholders() map[string]string {
	n := &s.names
	return map[string]string{"#k": s.keyAttr, "#exp": s.ttlAttr, "#st": n.Status, "#fp": n.Fingerprint,
		"#tok": n.LeaseToken, "#lease": n.LeaseUntil, "#att": n.Attempts, "#carried": n.AttemptsCarried,
		"#retry": n.Retryable, "#err": n.Error, "#res": n.Result, "#enc": n.ResultEncoding,
		"#omit": n.ResultOmitted, "#upd": n.UpdatedAt,
		"#ref": n.ResultRef, "#sha": n.ResultSHA256, "#size": n.ResultSize}
}

// acquireInput is the UpdateItem of an acquisition of rec, whose item
// without its steps (as encode writes it) is item: it sets every attribute
// of the item (but the key, which it addresses, and the counts, which it
// computes) and removes the record's other attributes but the steps', under
// acquireCondition. It makes the update replaceUpdate makes, from the
// store's constant parts.
func (s *Store) acquireInput(item map[string]types.AttributeValue, rec core.Record, now time.Time, p core.Policy) *dynamodb.UpdateItemInput {
	parts := &s.parts
	values := make(map[string]types.AttributeValue, len(parts.acquireValues)+5+len(parts.acquireSlots))
	maps.Copy(values, parts.acquireValues)
	values[":now_s"], values[":now_ms"] = num(now.Unix()), num(now.UnixMilli())
	values[":max"] = num(int64(p.AttemptLimit()))
	values[":want_fp"] = &types.AttributeValueMemberS{Value: rec.Fingerprint}
	values[":new_exp"] = num(math.MaxInt64)
	if !rec.ExpiresAt.IsZero() {
		values[":new_exp"] = num(ceilSeconds(rec.ExpiresAt))
	}
	var update strings.Builder
	update.Grow(parts.updateLen)
	update.WriteString(acquireSet)
	for _, sl := range parts.acquireSlots {
		if v := item[sl.attr]; v != nil {
			update.WriteString(", ")
			update.WriteString(sl.set)
			values[sl.value] = v
		}
	}
	sep := " REMOVE "
	for _, sl := range parts.acquireSlots {
		if item[sl.attr] == nil {
			update.WriteString(sep)
			update.WriteString(sl.placeholder)
			sep = ", "
		}
	}
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
