package ddbstore

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ItemKey is the primary key of the item of key, for the tests of package
// ddbstore_test that rewrite items.
func (s *Store) ItemKey(key string) map[string]types.AttributeValue { return s.keyOf(key) }

// AttemptsCarriedAttr is the name of the store's AttrAttemptsCarried.
func (s *Store) AttemptsCarriedAttr() string { return s.names.AttemptsCarried }

// Downgrade rewrites the record of key as the store's previous version
// wrote it: without attempts_carried, and with every step kept in the
// record (the version before step items), for the tests of package
// ddbstore_test (storetest.PreviousEncoding).
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
	inline := map[string]types.AttributeValue{}
	s.encodeSteps(inline, rec.Steps)
	n := &s.names
	names := map[string]string{"#carried": n.AttemptsCarried, "#until": n.StepsUntil}
	update := " REMOVE #carried, #until"
	var values map[string]types.AttributeValue
	if len(rec.Steps) > 0 {
		names["#steps"], names["#size"] = n.Steps, n.StepsSize
		values = map[string]types.AttributeValue{":steps": inline[n.Steps], ":size": inline[n.StepsSize]}
		update = "SET #steps = :steps, #size = :size" + update
	}
	_, err = s.client.(UpdateAPI).UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: s.keyOf(key),
		UpdateExpression:          aws.String(update),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	return err
}
