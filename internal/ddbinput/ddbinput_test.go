package ddbinput

import (
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestFresh(t *testing.T) {
	t.Parallel()
	item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}, "n": &types.AttributeValueMemberN{Value: "7"},
		"b": &types.AttributeValueMemberB{Value: []byte("r")}, "t": &types.AttributeValueMemberBOOL{Value: true}}
	names := map[string]string{"#k": "pk"}
	tests := []struct {
		name string
		in   any
		maps func(any) []any
	}{
		{"PutItem", &dynamodb.PutItemInput{TableName: aws.String("t"), Item: item, ExpressionAttributeNames: names, ExpressionAttributeValues: item},
			func(in any) []any {
				p := in.(*dynamodb.PutItemInput)
				return []any{p.Item, p.ExpressionAttributeNames, p.ExpressionAttributeValues}
			}},
		{"UpdateItem", &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: item, ExpressionAttributeNames: names, ExpressionAttributeValues: item},
			func(in any) []any {
				u := in.(*dynamodb.UpdateItemInput)
				return []any{u.Key, u.ExpressionAttributeNames, u.ExpressionAttributeValues}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Fresh(tt.in)
			if !reflect.DeepEqual(got, tt.in) {
				t.Fatalf("Fresh = %+v, want a copy of %+v", got, tt.in)
			}
			for i, m := range tt.maps(got) {
				if reflect.ValueOf(m).UnsafePointer() == reflect.ValueOf(tt.maps(tt.in)[i]).UnsafePointer() {
					t.Errorf("map %d is shared with the captured input", i)
				}
			}
			if v := tt.maps(got)[0].(map[string]types.AttributeValue)["pk"]; v == item["pk"] {
				t.Error("attribute value shared with the captured input")
			}
		})
	}
}
