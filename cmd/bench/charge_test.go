package main

import (
	"context"
	"encoding/json"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem/internal/capacity"
)

// fakeDynamo answers like dynalite: 200 with ConsumedCapacity when asked,
// a ConditionalCheckFailedException for a put whose key it holds (with a
// condition), and the X-Amz-Crc32 header. It keeps the requests it got.
type fakeDynamo struct {
	mu   sync.Mutex
	reqs []string
	keys map[string]bool
}

func (f *fakeDynamo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, string(b))
	f.mu.Unlock()
	var req struct {
		TableName              string
		Item                   map[string]map[string]string
		ConditionExpression    string
		ReturnConsumedCapacity string
	}
	_ = json.Unmarshal(b, &req)
	op := r.Header.Get("X-Amz-Target")
	body := `{}`
	switch {
	case strings.HasSuffix(op, ".DescribeTable"):
		body = `{"Table":{"TableName":"t","KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"TableStatus":"ACTIVE"}}`
	case strings.HasSuffix(op, ".PutItem") && req.ConditionExpression != "" && f.keys[req.Item["pk"]["S"]]:
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(400)
		_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}`)
		return
	case strings.HasSuffix(op, ".PutItem"):
		f.mu.Lock()
		f.keys[req.Item["pk"]["S"]] = true
		f.mu.Unlock()
		if req.ReturnConsumedCapacity == "TOTAL" {
			body = `{"ConsumedCapacity":{"TableName":"t","CapacityUnits":2}}`
		}
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10))
	_, _ = io.WriteString(w, body)
}

// TestChargerThroughTheSDK puts items through a charger in front of
// fakeDynamo with the AWS SDK: the charger learns the table's schema with a
// DescribeTable of its own, asks the server for its units, strips them from
// the answer the SDK (which checks the CRC32) reads, and charges a failed
// condition from its shadow of the item.
func TestChargerThroughTheSDK(t *testing.T) {
	t.Parallel()
	fake := &fakeDynamo{keys: map[string]bool{}}
	up := httptest.NewServer(fake)
	defer up.Close()
	ch := &charger{upstream: up.URL, client: up.Client(), ledger: capacity.NewLedger(), trust: true, totals: capacity.Totals{}}
	prx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := r.Header.Get("X-Amz-Target")
		ch.serve(w, r, target[strings.LastIndexByte(target, '.')+1:])
	}))
	defer prx.Close()
	client := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(prx.URL), RetryMaxAttempts: 1,
		Credentials: aws.AnonymousCredentials{}})
	item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}, "v": &types.AttributeValueMemberB{Value: make([]byte, 1500)}}
	ctx := context.Background()
	out, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: item})
	if err != nil {
		t.Fatal(err)
	}
	if out.ConsumedCapacity != nil {
		t.Errorf("the SDK read ConsumedCapacity %+v it did not ask for", out.ConsumedCapacity)
	}
	_, err = client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)")})
	if err == nil {
		t.Fatal("the conditional put succeeded")
	}
	rep := ch.report()
	want := capacity.Tally{Calls: 2, Write: 4, ComputedWrite: 4, Reported: 1, ConditionFailed: 1}
	if got := rep.Totals["PutItem"]; got != want || rep.Errors != 0 {
		t.Errorf("PutItem tally %+v (errors %d, %s), want %+v", got, rep.Errors, rep.LastError, want)
	}
	if len(fake.reqs) != 3 || !strings.Contains(fake.reqs[0], `"TableName":"t"`) || !strings.Contains(fake.reqs[1], `"ReturnConsumedCapacity":"TOTAL"`) {
		t.Errorf("the server got %q, want a DescribeTable, then the puts asking for their units", fake.reqs)
	}
}

func TestAskAndDropCapacity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		injected   bool
	}{
		{"absent", `{"TableName":"t"}`, true},
		{"NONE", `{"ReturnValues":"NONE","TableName":"t","ReturnConsumedCapacity":"NONE"}`, true},
		{"empty object", `{}`, true},
		{"blanks", " {\n \"TableName\": \"t\"}", true},
		{"asked already", `{"TableName":"t","ReturnConsumedCapacity":"INDEXES"}`, false},
		{"not JSON", `{`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, injected := askCapacity([]byte(tc.body))
			var m map[string]any
			if injected != tc.injected || (!injected && string(out) != tc.body) ||
				(injected && (json.Unmarshal(out, &m) != nil || m["ReturnConsumedCapacity"] != "TOTAL" || strings.Contains(string(out), "NONE") != (m["ReturnValues"] == "NONE"))) {
				t.Errorf("askCapacity(%s) = %s, %v", tc.body, out, injected)
			}
		})
	}
	h := http.Header{}
	h.Set("X-Amz-Crc32", "1")
	out := dropCapacity(h, []byte(`{"Attributes":{"pk":{"S":"<&>"}},"ConsumedCapacity":{"CapacityUnits":1}}`))
	var m map[string]json.RawMessage
	if err := json.Unmarshal(out, &m); err != nil || m["ConsumedCapacity"] != nil || m["Attributes"] == nil {
		t.Errorf("dropCapacity = %s", out)
	}
	if got := h.Get("X-Amz-Crc32"); got != strconv.FormatUint(uint64(crc32.ChecksumIEEE(out)), 10) {
		t.Errorf("CRC32 header %s does not match the new body", got)
	}
	if body := []byte(`{"Item":{}}`); string(dropCapacity(http.Header{}, body)) != string(body) {
		t.Error("dropCapacity changed an answer without ConsumedCapacity")
	}
}
