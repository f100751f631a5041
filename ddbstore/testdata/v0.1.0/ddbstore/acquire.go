package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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
//	OR (expires_at <= now_s AND status <> in_progress AND attribute_not_exists(attempts_carried))
//	OR (status = in_progress AND lease_until_ms <= now_ms AND expires_at > now_s
//	    AND fingerprint = fp AND attempts_carried < max_attempts)
//	OR (status = failed AND retryable = true AND expires_at > now_s
//	    AND fingerprint = fp AND attempts_carried < max_attempts)
//
// The second line replaces an expired record and restarts the count at 1:
// only records a new execution restarts from (succeeded, permanent
// failures) lack attempts_carried. The last two continue the count of a
// live record. The condition leaves a few records that core.Acquirable
// allows to a second write: an in-progress record or a retryable failure
// past retention (it carries its count), a record without a TTL attribute,
// and a record written before attempts_carried existed. Refused with such
// a record, Acquire reserves with Reserve's PutItem conditioned on it: one
// write more, in cases that need a crash or a failure older than the
// retention, or a table written by an older version. It does the same with
// a client that is not an UpdateAPI and, from then on, after an UpdateItem
// refused with AccessDeniedException (an IAM policy written for an older
// version, which granted PutItem and GetItem only: grant UpdateItem too).
//
// A refusal by rec itself (core.Acquired: an SDK retry of a write whose
// answer was lost) returns the stored record; after a failure that may have
// been applied, one consistent GetItem checks for it in the same way.
func (s *Store) Acquire(ctx context.Context, rec core.Record, now time.Time, p core.Policy) (core.Record, *core.Record, error) {
	if err := ctx.Err(); err != nil {
		return core.Record{}, nil, err
	}
	if err := s.checkReservation("acquire", &rec); err != nil {
		return core.Record{}, nil, err
	}
	api, ok := s.client.(UpdateAPI)
	if !ok || s.noUpdate.Load() {
		return s.acquireByPut(ctx, rec, now, p)
	}
	out, err := api.UpdateItem(ctx, s.acquireInput(rec, now, p), s.calls.fns...)
	if err == nil {
		return s.acquired(rec, out.Attributes, now)
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t := s.translate("acquire", err)
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
	existing, found, err := s.blockingFor(ctx, "acquire", ccf, rec.Key, replayOf(rec, now))
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
	return s.putOver(ctx, rec, stored, now)
}

// checkReservation checks and normalizes an in-progress record to write
// (Reserve, Acquire): its status, token, key and size.
func (s *Store) checkReservation(op string, rec *core.Record) error {
	if rec.Status != core.StatusInProgress {
		return fmt.Errorf("ddbstore: %s needs an in_progress record, got %q", op, rec.Status)
	}
	if rec.LeaseToken == "" {
		return fmt.Errorf("ddbstore: %s needs a lease token", op)
	}
	if err := s.checkKey(op, rec.Key); err != nil {
		return err
	}
	*rec = normalize(*rec)
	rec.Result, rec.ResultOmitted = nil, false
	if size := ItemSize(s.encode(*rec, nil, "")); size > s.maxItem {
		return s.fail(op, ErrItemTooLarge, "record is %d bytes, at most %d", size, s.maxItem)
	}
	return nil
}

// acquired returns the record an UpdateItem wrote over old (the item
// before it, empty if there was none) and the live record it replaced.
func (s *Store) acquired(rec core.Record, old map[string]types.AttributeValue, now time.Time) (core.Record, *core.Record, error) {
	if len(old) == 0 {
		return core.Acquire(rec, nil, now), nil, nil
	}
	prev, err := s.decode(old)
	if err != nil {
		// The write was made; only the record it replaced is unreadable.
		return core.Record{}, nil, core.MarkPermanent(&Error{Op: "acquire", Table: s.table, Err: err})
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
	return s.putOver(ctx, rec, &ce.Existing, now)
}

// putOver writes rec over stored (nil: no record) with Reserve's PutItem
// conditioned on stored, at the attempt core.Acquire gives.
func (s *Store) putOver(ctx context.Context, rec core.Record, stored *core.Record, now time.Time) (core.Record, *core.Record, error) {
	rec = core.Acquire(rec, stored, now)
	var prev *core.Record
	if stored != nil && !stored.Expired(now) {
		prev = stored
	}
	if err := s.Reserve(ctx, rec, prev, now); err != nil {
		return core.Record{}, nil, err
	}
	return rec, prev, nil
}

// ownAcquisition reads the key after an acquisition whose outcome is
// unknown and returns the stored record if it is rec's (core.Acquired).
// Any failure of the read counts as no.
func (s *Store) ownAcquisition(ctx context.Context, rec core.Record) (core.Record, bool) {
	if ctx.Err() != nil {
		return core.Record{}, false
	}
	stored, found, err := s.read(ctx, "acquire", rec.Key)
	return stored, err == nil && found && core.Acquired(stored, rec)
}

// acquireCondition is core.Acquirable as a condition expression (see
// Acquire), over the placeholders of recordPlaceholders: a flat
// disjunction of conjunctions, which servers that parse expressions
// naively (dynalite) evaluate far faster than nested ones.
const acquireCondition = "attribute_not_exists(#k)" +
	" OR (#exp <= :now_s AND #st <> :in_progress AND attribute_not_exists(#carried))" +
	" OR (#st = :in_progress AND #lease <= :now_ms AND #exp > :now_s AND #fp = :want_fp AND #carried < :max)" +
	" OR (#st = :failed AND #retry = :true AND #exp > :now_s AND #fp = :want_fp AND #carried < :max)"

// acquireCount is the attempt an acquisition writes: one more than the
// count carried, or 1 where the item carries none.
const acquireCount = "if_not_exists(#carried, :zero) + :one"

// recordPlaceholders returns the expression placeholder of each of a
// record's attributes, its key and TTL attribute included. The steps'
// attributes are not among them: an acquisition leaves them as they are,
// carried by a takeover or a retry (core.Acquire) and absent from the
// completed records an acquisition restarts from (core.Succeed, core.Fail).
func (s *Store) recordPlaceholders() map[string]string {
	n := &s.names
	return map[string]string{"#k": s.keyAttr, "#exp": s.ttlAttr, "#st": n.Status, "#fp": n.Fingerprint,
		"#tok": n.LeaseToken, "#lease": n.LeaseUntil, "#att": n.Attempts, "#carried": n.AttemptsCarried,
		"#retry": n.Retryable, "#err": n.Error, "#res": n.Result, "#enc": n.ResultEncoding,
		"#omit": n.ResultOmitted, "#upd": n.UpdatedAt,
		"#ref": n.ResultRef, "#sha": n.ResultSHA256, "#size": n.ResultSize}
}

// acquireInput is the UpdateItem of an acquisition: it sets every
// attribute of rec's item as encode writes it (but the key, which it
// addresses, and the counts, which it computes), removes the record's
// other attributes, under acquireCondition.
func (s *Store) acquireInput(rec core.Record, now time.Time, p core.Policy) *dynamodb.UpdateItemInput {
	names := s.recordPlaceholders()
	item := s.encode(rec, nil, "")
	values := map[string]types.AttributeValue{
		":now_s": num(now.Unix()), ":now_ms": num(now.UnixMilli()), ":max": num(int64(p.AttemptLimit())),
		":in_progress": &types.AttributeValueMemberS{Value: string(core.StatusInProgress)},
		":failed":      &types.AttributeValueMemberS{Value: string(core.StatusFailed)},
		":true":        &types.AttributeValueMemberBOOL{Value: true},
		":want_fp":     &types.AttributeValueMemberS{Value: rec.Fingerprint},
		":zero":        num(0), ":one": num(1),
	}
	set := []string{"#att = " + acquireCount, "#carried = " + acquireCount}
	var remove []string
	for _, ph := range slices.Sorted(maps.Keys(names)) {
		switch v := item[names[ph]]; {
		case ph == "#k" || ph == "#att" || ph == "#carried":
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
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.keyOf(rec.Key),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(acquireCondition),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}
