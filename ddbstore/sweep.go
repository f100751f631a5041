package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// A sweep deletes the store's items past their retention, for tables
// whose Time to Live does not (a global table in multi-Region strong
// consistency has none; a table whose TTL is off). Such items already
// count as absent in every read and condition of the store: a sweep
// changes no decision, only what the table holds and costs. ScanExpired
// reads a page of them; DeleteExpired deletes one, conditioned on its
// still being past retention at that moment, so an item renewed or
// rewritten since the scan read it is left as it is. The idem command's
// sweep and the template's scheduled sweeper run them page by page.

// Expired is one of the store's items past its retention, as ScanExpired
// read it: a record (core.Record.Expired), or a step item (see AttrSteps)
// or a result item (a result kept apart from its record, see Complete)
// whose own end of retention has passed.
type Expired struct {
	// Key is the record's key (without the store's prefix); for a step
	// item, the key of the record it belongs to.
	Key string
	// Step reports a step item of Key's record, not the record.
	Step bool
	// Result reports a result item of Key's record, not the record.
	Result bool
	// Record is the record as read (its result not loaded from a blob
	// store); zero for a step item.
	Record core.Record
	// ExpiresAt is the end of the item's retention.
	ExpiresAt time.Time

	key map[string]types.AttributeValue // the item's primary key
}

// ExpiredPage is one page of ScanExpired.
type ExpiredPage struct {
	// Items are the page's items past retention, in the table's order.
	Items []Expired
	// Next continues the scan (ListInput.Next); empty once the table has
	// been read to its end. A page may be empty and still have a Next.
	Next string
	// Scanned is the number of items DynamoDB evaluated (ScannedCount).
	Scanned int
	// Live is the number of the store's items returned that are not past
	// retention at the scan's time (an in-progress record under a live
	// lease); Corrupt, of its records that did not decode (left alone).
	Live, Corrupt int
	// ConsumedRCU is the read capacity the call consumed, as DynamoDB
	// reported it; 0 where the server reports none.
	ConsumedRCU float64
}

// ScanExpired reads one page of the table with one Scan whose filter keeps
// the store's items whose end of retention is at or before now, and
// returns those past retention at now: records for which
// core.Record.Expired(now) holds (an in-progress record under a live lease
// is not), and step and result items past their own. in.Status must be
// empty. The Scan is eventually
// consistent: an item written a moment ago may be missing or old, which
// DeleteExpired's condition settles. The client must implement AdminAPI;
// otherwise the error wraps errors.ErrUnsupported.
func (s *Store) ScanExpired(ctx context.Context, in ListInput, now time.Time) (ExpiredPage, error) {
	const op = "sweep"
	if err := ctx.Err(); err != nil {
		return ExpiredPage{}, err
	}
	if in.Status != "" {
		return ExpiredPage{}, &Error{Op: op, Table: s.table, Err: errors.New("a sweep reads every status: ListInput.Status must be empty")}
	}
	scan, err := s.scanInput(in)
	if err != nil {
		return ExpiredPage{}, &Error{Op: op, Table: s.table, Err: err}
	}
	expr, names, values := s.sweepFilter(now)
	scan.FilterExpression, scan.ExpressionAttributeNames, scan.ExpressionAttributeValues = aws.String(expr), names, values
	out, sp, err := s.scan(ctx, op, scan)
	if err != nil {
		return ExpiredPage{}, err
	}
	page := ExpiredPage{Next: sp.next, Scanned: sp.scanned, ConsumedRCU: sp.rcu}
	for _, item := range out.Items {
		s.sortExpired(&page, item, now)
	}
	return page, nil
}

// sortExpired adds item to page: to Items if it is past retention at now,
// else to the counts. Items that are not the store's are left out.
func (s *Store) sortExpired(page *ExpiredPage, item map[string]types.AttributeValue, now time.Time) {
	if step, result := s.isStepItem(item), s.isResultItem(item); step || result {
		s.sortExpiredChild(page, item, result, now)
		return
	}
	if !s.owns(item) {
		return
	}
	rec, err := s.decode(item)
	switch {
	case err != nil:
		page.Corrupt++
	case rec.Expired(now):
		page.Items = append(page.Items, Expired{Key: rec.Key, Record: rec, ExpiresAt: rec.ExpiresAt, key: s.keyIn(item)})
	default:
		page.Live++
	}
}

// sortExpiredChild adds item, a step item or (result) a result item, to
// page: to Items if its own end of retention has passed at now, else to
// the counts.
func (s *Store) sortExpiredChild(page *ExpiredPage, item map[string]types.AttributeValue, result bool, now time.Time) {
	growth := stepKeyGrowth
	if result {
		growth = resultKeyGrowth
	}
	key, ok := s.childOwner(item, growth)
	r := itemReader{item: item}
	ttl, has := r.num(s.ttlAttr)
	switch {
	case !ok || r.err != nil:
	case has && ttl <= now.Unix():
		page.Items = append(page.Items, Expired{Key: key, Step: !result, Result: result, ExpiresAt: time.Unix(ttl, 0), key: s.keyIn(item)})
	default:
		page.Live++
	}
}

// childOwner returns the key of the record whose step or result item item
// is (its key grown by growth), if item is one of the store's by its key
// (the store's prefix and, with a sort key, the sort key the store gives
// that record).
func (s *Store) childOwner(item map[string]types.AttributeValue, growth int) (string, bool) {
	pk, _ := item[s.keyAttr].(*types.AttributeValueMemberS)
	if pk == nil {
		return "", false
	}
	key, ok := strings.CutPrefix(pk.Value, s.prefix)
	if !ok {
		return "", false
	}
	if s.sortAttr == "" {
		if len(key) <= growth {
			return "", false
		}
		return key[:len(key)-growth], true
	}
	sk, _ := item[s.sortAttr].(*types.AttributeValueMemberS)
	return key, sk != nil && key != "" && len(sk.Value) >= growth && sk.Value[:len(sk.Value)-growth] == s.sortKey(key)
}

// sweepFilter is ScanExpired's filter: the store's items (its prefix; a
// fixed sort key value, or that value followed by a step or result item's
// suffix)
// whose end of retention is at or before now.
func (s *Store) sweepFilter(now time.Time) (string, map[string]string, map[string]types.AttributeValue) {
	conds := []string{"#exp <= :now_s"}
	names := map[string]string{"#exp": s.ttlAttr}
	values := map[string]types.AttributeValue{":now_s": num(now.Unix())}
	if s.prefix != "" {
		conds = append(conds, "begins_with(#k, :prefix)")
		names["#k"], values[":prefix"] = s.keyAttr, &types.AttributeValueMemberS{Value: s.prefix}
	}
	if s.sortAttr != "" && s.sortFunc == nil {
		conds = append(conds, "(#sk = :sk OR begins_with(#sk, :sk_step) OR begins_with(#sk, :sk_result))")
		names["#sk"] = s.sortAttr
		values[":sk"] = &types.AttributeValueMemberS{Value: s.sortValue}
		values[":sk_step"] = &types.AttributeValueMemberS{Value: s.sortValue + stepSuffix}
		values[":sk_result"] = &types.AttributeValueMemberS{Value: s.sortValue + resultSuffix}
	}
	return strings.Join(conds, " AND "), names, values
}

// expiredCondition deletes a record only if it is past retention
// (core.Record.Expired, as freshCondition's second branch), and a step or
// result item only if its end of retention has passed.
const (
	expiredRecordCondition = "#exp <= :now_s AND (#st <> :in_progress OR #lease <= :now_ms)"
	expiredStepCondition   = "#exp <= :now_s AND attribute_not_exists(#st)"
)

// DeleteExpired deletes e, an item ScanExpired returned, with one
// DeleteItem conditioned on its still being past retention at now: a
// record that is core.Record.Expired(now), whatever it holds (a record
// renewed, taken over or written anew since the scan is not), or a step
// or result item whose end of retention is at or before now. Refused, nothing is
// deleted and the error wraps idem.ErrRecordChanged (the item is live
// again, or gone). Other failures are translated as the store's other
// calls' are.
func (s *Store) DeleteExpired(ctx context.Context, e Expired, now time.Time) error {
	const op = "delete expired"
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.key == nil {
		return &Error{Op: op, Table: s.table, Err: errors.New("an Expired is deleted as ScanExpired returned it")}
	}
	in := &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.table),
		Key:                       e.key,
		ConditionExpression:       aws.String(expiredRecordCondition),
		ExpressionAttributeNames:  map[string]string{"#exp": s.ttlAttr, "#st": s.names.Status, "#lease": s.names.LeaseUntil},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now_s": num(now.Unix()), ":now_ms": num(now.UnixMilli()), ":in_progress": s.parts.inProgress},
	}
	if e.Step || e.Result {
		in.ConditionExpression = aws.String(expiredStepCondition)
		delete(in.ExpressionAttributeNames, "#lease")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":now_s": num(now.Unix())}
	}
	_, err := s.client.DeleteItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		return fmt.Errorf("ddbstore: %s on table %q, key hash %s: %w: no longer past its retention (renewed or written anew), or gone",
			op, s.table, idem.HashKey(e.Key), idem.ErrRecordChanged)
	}
	return s.translate(ctx, op, err).err
}
