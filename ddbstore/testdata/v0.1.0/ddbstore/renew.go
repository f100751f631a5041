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
// not already reach until): a lease is never shortened.
const renewCondition = "#st = :in_progress AND #tok = :tok AND #lease > :now_ms AND #lease < :until_ms"

// RenewLease implements idem.LeaseRenewer with one UpdateItem conditioned on
// the caller's live lease (renewCondition) that sets the lease end
// (milliseconds, rounded up), the TTL attribute (seconds, rounded up) and
// the time of the write, as core.Renew gives them for rec, and returns the
// item as updated (ALL_NEW). A renewal costs one write request unit per KB
// of the item: an in-progress item is well under 1 KB, so one WCU.
//
// If the condition fails and the stored record (from the error, or one
// consistent GetItem where the server does not return it) already holds the
// caller's lease until until or later (core.Renewed: an earlier try applied
// it, its answer lost), RenewLease returns it with nil; otherwise the error
// wraps idem.ErrLeaseLost. After a failure that may have been applied (a
// timeout, a 5xx), one consistent GetItem checks the same way. The client
// must implement UpdateAPI; otherwise the error wraps errors.ErrUnsupported.
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
	client, ok := s.client.(UpdateAPI)
	if !ok {
		return core.Record{}, &Error{Op: op, Table: s.table,
			Err: fmt.Errorf("client %T has no UpdateItem (ddbstore.UpdateAPI): %w", s.client, errors.ErrUnsupported)}
	}
	renewed := normalize(core.Renew(normalize(rec), until, now))
	out, err := client.UpdateItem(ctx, s.renewInput(renewed, now), s.calls.fns...)
	if err == nil {
		stored, derr := s.decode(out.Attributes)
		if derr != nil {
			return core.Record{}, core.MarkPermanent(&Error{Op: op, Table: s.table, Err: derr})
		}
		return stored, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t := s.translate(op, err)
		if t.maybeApplied && ctx.Err() == nil {
			if stored, found, rerr := s.read(ctx, op, rec.Key); rerr == nil && found && core.Renewed(stored, rec.LeaseToken, renewed.LeaseUntil) {
				return stored, nil
			}
		}
		return core.Record{}, t.err
	}
	existing, found, err := s.blocking(ctx, op, ccf, rec.Key)
	if err != nil {
		return core.Record{}, err
	}
	if found && core.Renewed(existing, rec.LeaseToken, renewed.LeaseUntil) {
		return existing, nil
	}
	return core.Record{}, fmt.Errorf("ddbstore: renew on table %q, key hash %s: %w", s.table, idem.HashKey(rec.Key), idem.ErrLeaseLost)
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
	update := "SET #lease = :until_ms, #upd = :upd_ms"
	if !renewed.ExpiresAt.IsZero() {
		names["#exp"] = s.ttlAttr
		values[":exp_s"] = num(ceilSeconds(renewed.ExpiresAt))
		update += ", #exp = :exp_s"
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.keyOf(renewed.Key),
		ConditionExpression:                 aws.String(renewCondition),
		UpdateExpression:                    aws.String(update),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}
