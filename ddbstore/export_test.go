package ddbstore

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem/core"
)

// ItemKey is the primary key of the item of key, for the tests of package
// ddbstore_test that rewrite items.
func (s *Store) ItemKey(key string) map[string]types.AttributeValue { return s.keyOf(key) }

// AttemptsCarriedAttr is the name of the store's AttrAttemptsCarried.
func (s *Store) AttemptsCarriedAttr() string { return s.names.AttemptsCarried }

// Downgrade rewrites the record of key as v0.1.0, the previous release,
// wrote it: every step kept in the record (stepOfV010), no steps_until,
// for the tests of package ddbstore_test (storetest.PreviousEncoding).
func (s *Store) Downgrade(ctx context.Context, key string) error {
	item, err := s.getItem(ctx, "downgrade", key)
	if err != nil || len(item) == 0 {
		return err
	}
	rec, err := s.decode(item)
	if err == nil {
		err = s.resolveSteps(ctx, "downgrade", item, &rec, nil)
	}
	if err != nil {
		return err
	}
	inline := s.stepsV010(rec.Steps)
	n := &s.names
	names := map[string]string{"#until": n.StepsUntil}
	update := " REMOVE #until"
	var values map[string]types.AttributeValue
	if len(rec.Steps) > 0 {
		names["#steps"], names["#size"] = n.Steps, n.StepsSize
		values = map[string]types.AttributeValue{":steps": inline[n.Steps], ":size": inline[n.StepsSize]}
		update = "SET #steps = :steps, #size = :size" + update
	}
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: s.keyOf(key),
		UpdateExpression:          aws.String(update),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	return err
}

// stepsV010 returns the steps attributes of a record as v0.1.0 wrote them
// (none when there are no steps): each step a map kept in the record, its
// name in the set of names, budgeted at stepCostV010.
func (s *Store) stepsV010(steps []core.Step) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{}
	if len(steps) == 0 {
		return item
	}
	list := make([]types.AttributeValue, len(steps))
	names := make([]string, len(steps))
	size := 0
	for i, st := range steps {
		list[i], names[i] = stepValue(st), st.Name
		size += stepCostV010(st)
	}
	item[s.names.Steps] = &types.AttributeValueMemberL{Value: list}
	item[s.names.StepNames] = &types.AttributeValueMemberSS{Value: names}
	item[s.names.StepsSize] = num(int64(size))
	return item
}

// encodeV010 returns the item of rec as v0.1.0 wrote it: encode's, with
// its steps kept in the record (stepsV010).
func (s *Store) encodeV010(rec core.Record, body []byte, encoding string) map[string]types.AttributeValue {
	item := s.encode(rec, body, encoding)
	for k, v := range s.stepsV010(rec.Steps) {
		item[k] = v
	}
	return item
}

// encodeWithSteps returns the item of rec as this release writes it, with
// the references of its steps, and the step items they name (to end at
// ttl, none when 0), to be written first.
func (s *Store) encodeWithSteps(rec core.Record, ttl int64) (map[string]types.AttributeValue, []map[string]types.AttributeValue) {
	item := s.encode(rec, nil, "")
	if len(rec.Steps) == 0 {
		return item, nil
	}
	refs := make([]types.AttributeValue, len(rec.Steps))
	names := make([]string, len(rec.Steps))
	stepItems := make([]map[string]types.AttributeValue, len(rec.Steps))
	size := 0
	for i, st := range rec.Steps {
		ref := refOf(st)
		refs[i], names[i], stepItems[i] = &types.AttributeValueMemberB{Value: ref[:]}, st.Name, s.stepItem(rec.Key, st, ttl)
		size += refCost(st)
	}
	item[s.names.Steps] = &types.AttributeValueMemberL{Value: refs}
	item[s.names.StepNames] = &types.AttributeValueMemberSS{Value: names}
	item[s.names.StepsSize] = num(int64(size))
	if ttl > 0 {
		item[s.names.StepsUntil] = num(ttl)
	}
	return item, stepItems
}

// ItemV010 returns the item of rec as v0.1.0 wrote it (encodeV010, times
// normalized), for the tests of package ddbstore_test that write records
// of the previous release.
func (s *Store) ItemV010(rec core.Record) map[string]types.AttributeValue {
	return s.encodeV010(normalize(rec), rec.Result, "")
}
