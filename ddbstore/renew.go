package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

var _ idem.LeaseRenewer = (*Store)(nil)

// renewCondition is core.Renewable (the caller's token on an in-progress
// record whose lease has not ended) and not core.Renewed (the lease does
// not already reach until): a lease is never shortened. A renewal that
// moves the end of retention adds untilClause.
const renewCondition = "#st = :in_progress AND #tok = :tok AND #lease > :now_ms AND #lease < :until_ms"

// RenewLease implements idem.LeaseRenewer with one UpdateItem conditioned on
// the caller's live lease (renewCondition) that sets the lease end
// (milliseconds, rounded up), the TTL attribute (seconds, rounded up) and
// the time of the write, as core.Renew gives them for rec, and returns the
// item as updated (ALL_NEW). A renewal costs one write request unit per KB
// of the item: an in-progress item is well under 1 KB, so one WCU. The
// record returned has its steps: those kept in step items are taken from
// rec.Steps where rec has them, and else read (resolveSteps).
//
// If the condition fails and the stored record (from the error, or one
// consistent GetItem where the server does not return it) already holds the
// caller's lease until until or later (core.Renewed: an earlier try applied
// it, its answer lost), RenewLease returns it with nil. If it is still the
// caller's live lease, the renewal was refused because it would move the
// record's end of retention past that of its step items (a handler that
// runs longer than the retention): their items are written again to end
// later (extendStepItems) and the renewal is made once more. Otherwise the
// error wraps idem.ErrLeaseLost. After a failure that may have been
// applied (a timeout, a 5xx), one consistent GetItem checks the same way.
func (s *Store) RenewLease(ctx context.Context, rec core.Record, until, now time.Time) (core.Record, error) {
	const op = "renew"
	if err := ctx.Err(); err != nil {
		return core.Record{}, err
	}
	if err := s.checkKey(op, rec.Key); err != nil {
		return core.Record{}, err
	}
	if rec.LeaseToken == "" || !until.After(now) {
		return core.Record{}, fmt.Errorf("ddbstore: renew needs the holder's lease token and an end after now, got token %q, until %s, now %s", rec.LeaseToken, until, now)
	}
	renewed := normalize(core.Renew(normalize(rec), until, now))
	for try := 0; ; try++ {
		stored, again, err := s.renewOnce(ctx, rec, renewed, now)
		if !again || err != nil || try >= 1 {
			if again && err == nil {
				err = fmt.Errorf("ddbstore: renew on table %q, key hash %s: %w", s.table, idem.HashKey(rec.Key), idem.ErrLeaseLost)
			}
			return stored, err
		}
	}
}

// renewOnce makes the renewal of rec to renewed at now. again is true when
// it was refused for the steps' end of retention, which it extended.
func (s *Store) renewOnce(ctx context.Context, rec, renewed core.Record, now time.Time) (core.Record, bool, error) {
	const op = "renew"
	out, err := s.client.UpdateItem(ctx, s.renewInput(renewed, now), s.calls.fns...)
	if err == nil {
		stored, err := s.renewedRecord(ctx, out.Attributes, rec)
		return stored, false, err
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t := s.translate(ctx, op, err)
		if t.maybeApplied && ctx.Err() == nil {
			if item, rerr := s.getItem(ctx, op, rec.Key); rerr == nil && len(item) > 0 {
				if stored, err := s.renewedRecord(ctx, item, rec); err == nil && core.Renewed(stored, rec.LeaseToken, renewed.LeaseUntil) {
					return stored, false, nil
				}
			}
		}
		return core.Record{}, false, t.err
	}
	item, err := s.blockingItem(ctx, op, ccf, rec.Key)
	if err != nil || len(item) == 0 {
		return core.Record{}, false, s.renewLost(rec, err)
	}
	existing, err := s.renewedRecord(ctx, item, rec)
	switch {
	case err != nil:
		return core.Record{}, false, err
	case core.Renewed(existing, rec.LeaseToken, renewed.LeaseUntil):
		return existing, false, nil
	case core.Renewable(existing, rec.LeaseToken, now) && s.hasStepRefs(item):
		return core.Record{}, true, s.extendStepItems(ctx, op, item, existing, renewed.ExpiresAt, now)
	}
	return core.Record{}, false, s.renewLost(rec, nil)
}

// renewedRecord decodes a renewal's stored item, its steps resolved with
// the caller's (rec.Steps).
func (s *Store) renewedRecord(ctx context.Context, item map[string]types.AttributeValue, rec core.Record) (core.Record, error) {
	stored, err := s.decode(item)
	if err != nil {
		return core.Record{}, core.MarkPermanent(&Error{Op: "renew", Table: s.table, Err: err})
	}
	if s.hasStepRefs(item) {
		err = s.resolveSteps(ctx, "renew", item, &stored, rec.Steps)
	}
	return stored, err
}

// renewLost is the error of a refused renewal of rec: err if reading the
// stored record failed, else one wrapping idem.ErrLeaseLost.
func (s *Store) renewLost(rec core.Record, err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("ddbstore: renew on table %q, key hash %s: %w", s.table, idem.HashKey(rec.Key), idem.ErrLeaseLost)
}

// renewInput is the UpdateItem of a renewal to renewed (normalized) at now.
func (s *Store) renewInput(renewed core.Record, now time.Time) *dynamodb.UpdateItemInput {
	names := map[string]string{"#st": s.names.Status, "#tok": s.names.LeaseToken, "#lease": s.names.LeaseUntil, "#upd": s.names.UpdatedAt}
	values := map[string]types.AttributeValue{
		":in_progress": &types.AttributeValueMemberS{Value: string(core.StatusInProgress)},
		":tok":         &types.AttributeValueMemberS{Value: renewed.LeaseToken},
		":now_ms":      num(now.UnixMilli()),
		":until_ms":    num(ceilMillis(renewed.LeaseUntil)),
		":upd_ms":      num(renewed.UpdatedAt.UnixMilli()),
	}
	update, cond := "SET #lease = :until_ms, #upd = :upd_ms", renewCondition
	if !renewed.ExpiresAt.IsZero() {
		names["#exp"] = s.ttlAttr
		values[":exp_s"] = num(ceilSeconds(renewed.ExpiresAt))
		update += ", #exp = :exp_s"
		cond += " AND " + s.untilClause(renewed.ExpiresAt, names, values)
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.keyOf(renewed.Key),
		ConditionExpression:                 aws.String(cond),
		UpdateExpression:                    aws.String(update),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}
