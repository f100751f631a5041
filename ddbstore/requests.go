package ddbstore

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem/core"
)

// requestParts are the parts of the store's requests that are the same in
// every call: expression attribute names, constant expression values and
// the pieces of the update expressions. New builds them once per store.
// The maps are shared by the requests of every call: nothing writes to
// them after New (the SDK reads its input and writes none of it), and a
// request that needs other names or values copies them first.
type requestParts struct {
	// slotNames are the placeholders of a record's attributes that a
	// replacement (replacement) sets or removes: all but the key.
	slotNames map[string]string
	// acquireNames are the placeholders of an acquisition: slotNames, the
	// key, and the steps' attributes, which only its condition reads.
	acquireNames map[string]string
	// acquireValues are an acquisition's constant values.
	acquireValues map[string]types.AttributeValue
	// slots are the attributes of slotNames, in placeholder order.
	slots []updateSlot
	// updateLen bounds the length of a replacement's update expression.
	updateLen int
	// completeNames are the placeholders of completeCondition.
	completeNames map[string]string
	// inProgress is the value of the in_progress status, in conditions.
	inProgress types.AttributeValue
	// table, acquireCondition and completeCondition are the table's name
	// and those conditions, as the SDK's inputs point at them.
	table, acquireCondition, completeCondition *string
}

// updateSlot is one attribute of a replacement: its placeholder, its name
// in the item, the placeholder of the value it is set to, its SET clause,
// and whether it is one of the attempt counts (which an acquisition
// computes on the server).
type updateSlot struct {
	placeholder, attr, value, set string
	count                         bool
}

func newRequestParts(s *Store) requestParts {
	n := &s.names
	inProgress := &types.AttributeValueMemberS{Value: string(core.StatusInProgress)}
	r := requestParts{
		slotNames: s.recordPlaceholders(),
		acquireValues: map[string]types.AttributeValue{
			":in_progress": inProgress,
			":failed":      &types.AttributeValueMemberS{Value: string(core.StatusFailed)},
			":true":        &types.AttributeValueMemberBOOL{Value: true},
			":zero":        num(0), ":one": num(1),
		},
		completeNames: map[string]string{"#st": n.Status, "#tok": n.LeaseToken, "#exp": s.ttlAttr, "#lease": n.LeaseUntil},
		inProgress:    inProgress,
		table:         aws.String(s.table), acquireCondition: aws.String(acquireCondition), completeCondition: aws.String(completeCondition),
	}
	delete(r.slotNames, "#k")
	for _, ph := range slices.Sorted(maps.Keys(r.slotNames)) {
		v := ":set_" + ph[1:]
		r.slots = append(r.slots, updateSlot{placeholder: ph, attr: r.slotNames[ph], value: v, set: ph + " = " + v,
			count: ph == "#att" || ph == "#carried"})
		r.updateLen += len(", ") + len(ph+" = "+v)
	}
	r.updateLen += len(acquireSet) + len(" REMOVE ")
	r.acquireNames = maps.Clone(r.slotNames)
	// In the condition only: the update leaves the steps as they are.
	r.acquireNames["#k"], r.acquireNames["#steps"], r.acquireNames["#until"] = s.keyAttr, n.Steps, n.StepsUntil
	return r
}

// recordPlaceholders returns the expression placeholder of each of a
// record's attributes, its key and TTL attribute included. The steps'
// attributes are not among them: a replacement leaves them as they are.
func (s *Store) recordPlaceholders() map[string]string {
	n := &s.names
	return map[string]string{"#k": s.keyAttr, "#exp": s.ttlAttr, "#st": n.Status, "#fp": n.Fingerprint,
		"#tok": n.LeaseToken, "#lease": n.LeaseUntil, "#att": n.Attempts, "#carried": n.AttemptsCarried,
		"#retry": n.Retryable, "#err": n.Error, "#res": n.Result, "#enc": n.ResultEncoding,
		"#omit": n.ResultOmitted, "#upd": n.UpdatedAt,
		"#ref": n.ResultRef, "#sha": n.ResultSHA256, "#size": n.ResultSize, "#rit": n.ResultItem}
}

// replacement writes to b the update expression that makes a record into
// item (encoded without its steps), leaving the steps' attributes as they
// are: a SET of extra (the counts an acquisition computes, first, where
// serverCounts; then any clauses given) and of every other attribute item
// has, and a REMOVE of the record's other attributes. It adds the values it
// sets.
func (p *requestParts) replacement(b *strings.Builder, item map[string]types.AttributeValue, values map[string]types.AttributeValue, serverCounts bool, extra ...string) {
	b.Grow(p.updateLen)
	sep := "SET "
	if serverCounts {
		b.WriteString(acquireSet)
		sep = ", "
	}
	for _, clause := range extra {
		b.WriteString(sep + clause)
		sep = ", "
	}
	for _, sl := range p.slots {
		if v := item[sl.attr]; v != nil && !(serverCounts && sl.count) {
			b.WriteString(sep + sl.set)
			values[sl.value] = v
			sep = ", "
		}
	}
	sep = " REMOVE "
	for _, sl := range p.slots {
		if item[sl.attr] == nil && !(serverCounts && sl.count) {
			b.WriteString(sep + sl.placeholder)
			sep = ", "
		}
	}
}

// replaceInput is the UpdateItem that makes the record of item (encoded
// without its steps) into it under cond, leaving the steps' attributes as
// they are (replacement, the counts as item has them), with extra SET
// clauses. names and values are cond's and extra's; it adds its own.
func (s *Store) replaceInput(item map[string]types.AttributeValue, cond string, names map[string]string, values map[string]types.AttributeValue, extra ...string) *dynamodb.UpdateItemInput {
	var update strings.Builder
	s.parts.replacement(&update, item, values, false, extra...)
	maps.Copy(names, s.parts.slotNames)
	return &dynamodb.UpdateItemInput{
		TableName:                           s.parts.table,
		Key:                                 s.keyIn(item),
		UpdateExpression:                    aws.String(update.String()),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// freshCondition writes a record where no live record is
// (core.Record.Expired: past retention, and not an in-progress record with
// a live lease).
const freshCondition = "attribute_not_exists(#k) OR (#exp <= :now_s AND (#st <> :in_progress OR #lease <= :now_ms))"

// freshInput is the PutItem of item, a new record, over no live record
// (freshCondition): Reserve's without prev, and an acquisition's over a
// record past retention.
func (s *Store) freshInput(item map[string]types.AttributeValue, now time.Time) *dynamodb.PutItemInput {
	names := map[string]string{"#k": s.keyAttr, "#exp": s.ttlAttr, "#st": s.names.Status, "#lease": s.names.LeaseUntil}
	values := map[string]types.AttributeValue{":now_s": num(now.Unix()), ":now_ms": num(now.UnixMilli()), ":in_progress": s.parts.inProgress}
	return s.putInput(item, freshCondition, names, values)
}

// putInput is the PutItem of item under cond (with its names and values),
// which asks for the blocking item on failure.
func (s *Store) putInput(item map[string]types.AttributeValue, cond string, names map[string]string, values map[string]types.AttributeValue) *dynamodb.PutItemInput {
	return &dynamodb.PutItemInput{
		TableName:                           s.parts.table,
		Item:                                item,
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// prevBranch returns the condition that replaces prev at now and nothing
// else (core.Reservable with prev: core.Replaceable over a live record):
// the stored record is still prev (token, status, number of steps), within
// its retention, and is in progress with an ended lease, or a retryable
// failure; "" where prev allows no replacement (no token, another status).
// Only the branch for prev's own status is sent. It adds its names and
// values.
func (s *Store) prevBranch(prev *core.Record, now time.Time, names map[string]string, values map[string]types.AttributeValue) string {
	if prev.LeaseToken == "" {
		return ""
	}
	var branch string
	switch prev.Status {
	case core.StatusInProgress:
		branch = "#lease <= :now_ms"
		names["#lease"], values[":now_ms"] = s.names.LeaseUntil, num(now.UnixMilli())
	case core.StatusFailed:
		branch = "#retry = :true"
		names["#retry"], values[":true"] = s.names.Retryable, &types.AttributeValueMemberBOOL{Value: true}
	default:
		return ""
	}
	names["#tok"], names["#st"], names["#exp"] = s.names.LeaseToken, s.names.Status, s.ttlAttr
	values[":prev_tok"] = &types.AttributeValueMemberS{Value: prev.LeaseToken}
	values[":prev_st"] = &types.AttributeValueMemberS{Value: string(prev.Status)}
	values[":now_s"] = num(now.Unix())
	return "#tok = :prev_tok AND #st = :prev_st AND " + branch + " AND " + s.stepCount(len(prev.Steps), names, values) +
		" AND (attribute_not_exists(#exp) OR #exp > :now_s)"
}

// stepCount returns the clause that requires the stored record to have n
// steps (no step_names for none, else as many names). It adds the clause's
// names and values.
func (s *Store) stepCount(n int, names map[string]string, values map[string]types.AttributeValue) string {
	names["#names"] = s.names.StepNames
	if n == 0 {
		return "attribute_not_exists(#names)"
	}
	values[":n_steps"] = num(int64(n))
	// (attribute_exists first: some servers, moto, fail size() of an
	// attribute the item lacks instead of evaluating it false.)
	return "(attribute_exists(#names) AND size(#names) = :n_steps)"
}

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
