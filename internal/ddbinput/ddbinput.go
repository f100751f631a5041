// Package ddbinput sends and copies DynamoDB request inputs, for the
// benchmarks that send the store's requests through the SDK alone: a copy
// is the input a caller building it per call would send.
package ddbinput

import (
	"context"
	"fmt"
	"maps"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Fresh returns a copy of in, a *dynamodb.PutItemInput or
// *dynamodb.UpdateItemInput, with maps and attribute values of its own (see
// Item); any other value is returned as it is.
func Fresh(in any) any {
	switch in := in.(type) {
	case *dynamodb.PutItemInput:
		c := *in
		c.Item, c.ExpressionAttributeNames, c.ExpressionAttributeValues = Item(in.Item), maps.Clone(in.ExpressionAttributeNames), Item(in.ExpressionAttributeValues)
		return &c
	case *dynamodb.UpdateItemInput:
		c := *in
		c.Key, c.ExpressionAttributeNames, c.ExpressionAttributeValues = Item(in.Key), maps.Clone(in.ExpressionAttributeNames), Item(in.ExpressionAttributeValues)
		return &c
	}
	return in
}

// Item returns a copy of item with attribute values of its own, of the
// kinds the store writes (S, N, B, BOOL); values of other kinds are shared.
func Item(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	out := make(map[string]types.AttributeValue, len(item))
	for k, v := range item {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			out[k] = &types.AttributeValueMemberS{Value: v.Value}
		case *types.AttributeValueMemberN:
			out[k] = &types.AttributeValueMemberN{Value: v.Value}
		case *types.AttributeValueMemberB:
			out[k] = &types.AttributeValueMemberB{Value: v.Value}
		case *types.AttributeValueMemberBOOL:
			out[k] = &types.AttributeValueMemberBOOL{Value: v.Value}
		default:
			out[k] = v
		}
	}
	return out
}

// Send sends reqs, each a *dynamodb.PutItemInput or
// *dynamodb.UpdateItemInput, through client in order, each copied first
// (Fresh) when fresh is set; it stops at the first error.
func Send(ctx context.Context, client *dynamodb.Client, reqs []any, fresh bool) error {
	for _, in := range reqs {
		if fresh {
			in = Fresh(in)
		}
		var err error
		switch in := in.(type) {
		case *dynamodb.PutItemInput:
			_, err = client.PutItem(ctx, in)
		case *dynamodb.UpdateItemInput:
			_, err = client.UpdateItem(ctx, in)
		default:
			err = fmt.Errorf("ddbinput: cannot send %T", in)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
