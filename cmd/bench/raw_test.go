package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// sdkBody is an SDK HTTP client that keeps the request body and answers
// with an error, so that nothing after serialization matters.
type sdkBody struct{ body []byte }

func (s *sdkBody) Do(r *http.Request) (*http.Response, error) {
	s.body, _ = io.ReadAll(r.Body)
	return &http.Response{StatusCode: 400, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader([]byte(`{"__type":"x#Stop"}`))), Request: r}, nil
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

// The raw sender's body is the SDK's, member for member.
func TestRawBodyIsTheSDKs(t *testing.T) {
	item := map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "a_unique-seq-1 \"quoted\" \\ \n\t\x01 é \xff"},
		"n":  &types.AttributeValueMemberN{Value: "12"}, "b": &types.AttributeValueMemberB{Value: []byte{0, 1, 2, 250}},
		"t": &types.AttributeValueMemberBOOL{Value: true}, "z": &types.AttributeValueMemberNULL{Value: true},
		"l":  &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "x"}, &types.AttributeValueMemberN{Value: "1"}}},
		"m":  &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}}},
		"ss": &types.AttributeValueMemberSS{Value: []string{"a", "b"}}, "ns": &types.AttributeValueMemberNS{Value: []string{"1", "2"}},
		"bs": &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}},
	}
	for _, tc := range []struct {
		name string
		in   any
	}{
		{"PutItem", &dynamodb.PutItemInput{TableName: aws.String("idem_bench"), Item: item,
			ConditionExpression:                 aws.String("attribute_not_exists(#k) OR #exp <= :now_s"),
			ExpressionAttributeNames:            map[string]string{"#k": "pk", "#exp": "expires_at"},
			ExpressionAttributeValues:           map[string]types.AttributeValue{":now_s": &types.AttributeValueMemberN{Value: "1764676800"}},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
		{"UpdateItem", &dynamodb.UpdateItemInput{TableName: aws.String("idem_bench"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}},
			UpdateExpression: aws.String("SET #st = :st"), ConditionExpression: aws.String("#tok = :tok"),
			ExpressionAttributeNames: map[string]string{"#st": "status", "#tok": "lease_token"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":st": &types.AttributeValueMemberS{Value: "succeeded"},
				":tok": &types.AttributeValueMemberS{Value: "t"}},
			ReturnValues: types.ReturnValueAllNew, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
	} {
		hc := &sdkBody{}
		c := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:1"), RetryMaxAttempts: 1,
			Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), HTTPClient: hc})
		var err error
		var wantOp string
		switch in := tc.in.(type) {
		case *dynamodb.PutItemInput:
			_, err = c.PutItem(context.Background(), in)
			wantOp = "PutItem"
		case *dynamodb.UpdateItemInput:
			_, err = c.UpdateItem(context.Background(), in)
			wantOp = "UpdateItem"
		}
		if err == nil || len(hc.body) == 0 {
			t.Fatalf("%s: the SDK sent no body (err %v)", tc.name, err)
		}
		op, body, err := rawBody(tc.in)
		if err != nil || op != wantOp {
			t.Fatalf("%s: rawBody = %q, %v", tc.name, op, err)
		}
		if got, want := decode(t, body), decode(t, hc.body); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: raw body\n%s\nSDK body\n%s", tc.name, body, hc.body)
		}
	}
}

// The raw sender signs and sends: the server sees the operation, a SigV4
// Authorization header and the body; a non-200 answer is a *rawError.
func TestRawSenderSends(t *testing.T) {
	var got http.Header
	var gotBody []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, gotBody = r.Header.Clone(), must(io.ReadAll(r.Body))
		if bytes.Contains(gotBody, []byte("fail")) {
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"}`))
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	s := newRawSender(srv.URL)
	if err := s.send(context.Background(), "PutItem", []byte(`{"TableName":"t"}`)); err != nil {
		t.Fatal(err)
	}
	if got.Get("X-Amz-Target") != "DynamoDB_20120810.PutItem" || !bytes.HasPrefix([]byte(got.Get("Authorization")), []byte("AWS4-HMAC-SHA256 Credential=test/")) ||
		string(gotBody) != `{"TableName":"t"}` {
		t.Errorf("server got headers %v, body %s", got, gotBody)
	}
	err := s.send(context.Background(), "PutItem", []byte(`{"fail":1}`))
	var re *rawError
	if !errors.As(err, &re) || re.Status != 400 || re.Type != "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException" {
		t.Errorf("send = %v, want the 400 as a *rawError", err)
	}
}

func must[T any](v T, _ error) T { return v }
