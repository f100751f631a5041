package capacity

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// Wire-format helpers.
func ws(s string) map[string]any { return map[string]any{"S": s} }
func wn(s string) map[string]any { return map[string]any{"N": s} }
func wb(n int) map[string]any {
	return map[string]any{"B": base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", n)))}
}

func js(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const ccf = `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}`

// step is one request of a scripted timeline and the charge it must get.
type step struct {
	op       string
	req      any
	resp     string
	status   int
	read     float64
	write    float64
	failed   bool
	approx   bool
	reported float64 // with hasRep
	hasRep   bool
}

func run(t *testing.T, l *Ledger, steps []step) {
	t.Helper()
	for i, s := range steps {
		status := s.status
		if status == 0 {
			status = 200
		}
		resp := s.resp
		if resp == "" {
			resp = "{}"
		}
		c, err := l.Charge(s.op, js(t, s.req), []byte(resp), status)
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, s.op, err)
		}
		if c.Read != s.read || c.Write != s.write || c.ConditionFailed != s.failed || c.Approximate != s.approx ||
			c.HasReport != s.hasRep || c.Reported != s.reported {
			t.Errorf("step %d (%s): charge %+v, want read %g write %g failed %v approx %v report %v %g",
				i, s.op, c, s.read, s.write, s.failed, s.approx, s.hasRep, s.reported)
		}
	}
}

func createTable(name string) step {
	return step{op: "CreateTable", req: map[string]any{"TableName": name,
		"KeySchema": []map[string]string{{"AttributeName": "pk", "KeyType": "HASH"}}}}
}

// A record's life: reserved, refused, completed with a 1.5 KB result, read,
// refused again (now billed on the larger completed item), deleted.
func TestLedgerRecordLife(t *testing.T) {
	t.Parallel()
	l := NewLedger()
	key := map[string]any{"pk": ws("k1")}
	acquire := map[string]any{"TableName": "t", "Key": key,
		"UpdateExpression":          "SET #st = :st, #att = if_not_exists(#att, :zero) + :one",
		"ExpressionAttributeNames":  map[string]string{"#st": "status", "#att": "attempts"},
		"ExpressionAttributeValues": map[string]any{":st": ws("in_progress"), ":zero": wn("0"), ":one": wn("1")},
		"ConditionExpression":       "attribute_not_exists(pk)"}
	complete := map[string]any{"TableName": "t", "Item": map[string]any{"pk": ws("k1"), "status": ws("succeeded"), "result": wb(1500)}}
	run(t, l, []step{
		createTable("t"),
		{op: "UpdateItem", req: acquire, write: 1},
		{op: "UpdateItem", req: acquire, resp: ccf, status: 400, write: 1, failed: true},
		{op: "PutItem", req: complete, write: 2, resp: `{"ConsumedCapacity":{"TableName":"t","CapacityUnits":2}}`, hasRep: true, reported: 2},
		{op: "GetItem", req: map[string]any{"TableName": "t", "Key": key, "ConsistentRead": true}, read: 1},
		{op: "GetItem", req: map[string]any{"TableName": "t", "Key": key}, read: 0.5},
		{op: "UpdateItem", req: acquire, resp: ccf, status: 400, write: 2, failed: true},
		{op: "DeleteItem", req: map[string]any{"TableName": "t", "Key": key}, write: 2},
		{op: "DeleteItem", req: map[string]any{"TableName": "t", "Key": key}, write: 1},
		{op: "GetItem", req: map[string]any{"TableName": "t", "Key": key, "ConsistentRead": true}, read: 1},
		// An item the ledger never saw written: charged as answered, approximate.
		{op: "GetItem", req: map[string]any{"TableName": "t", "Key": map[string]any{"pk": ws("elsewhere")}},
			resp: `{"Item":{"pk":{"S":"elsewhere"},"v":{"B":"` + base64.StdEncoding.EncodeToString(make([]byte, 5000)) + `"}}}`, read: 1, approx: true},
		{op: "PutItem", req: complete, status: 400, resp: `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"}`},
		{op: "PutItem", req: complete, status: 400, resp: `{"__type":"com.amazon.coral.validate#ValidationException"}`},
	})
	if n := l.Items("t"); n != 0 {
		t.Errorf("%d items shadowed after the delete and the failed puts, want 0", n)
	}
}

// Each step appends to a list: the write is billed on the item after it,
// which grows with every step.
func TestLedgerStepsGrow(t *testing.T) {
	t.Parallel()
	l := NewLedger()
	steps := []step{createTable("t"), {op: "PutItem", req: map[string]any{"TableName": "t",
		"Item": map[string]any{"pk": ws("k"), "status": ws("in_progress")}}, write: 1}}
	// Each step adds 1 + (3 + 1+1+1 + 1+1+600) bytes: 609. Item: 2+1 + 6+11 = 20, list 5+3.
	size := 20 + 8
	for i := 1; i <= 5; i++ {
		size += 1 + 3 + (1 + 1 + 1) + (1 + 1 + 600)
		steps = append(steps, step{op: "UpdateItem", req: map[string]any{"TableName": "t", "Key": map[string]any{"pk": ws("k")},
			"UpdateExpression":         "SET #steps = list_append(if_not_exists(#steps, :none), :step)",
			"ExpressionAttributeNames": map[string]string{"#steps": "steps"},
			"ExpressionAttributeValues": map[string]any{":none": map[string]any{"L": []any{}},
				":step": map[string]any{"L": []any{map[string]any{"M": map[string]any{"n": ws("a"), "r": wb(600)}}}}}},
			write: WriteUnits(size)})
	}
	run(t, l, steps)
	if got := steps[len(steps)-1].write; got != 4 {
		t.Fatalf("the fifth step costs %g write units, want 4 (the script is wrong)", got)
	}
}

func TestLedgerBatchesQueriesAndTransactions(t *testing.T) {
	t.Parallel()
	l := NewLedger()
	put := func(pk string, n int) map[string]any {
		return map[string]any{"PutRequest": map[string]any{"Item": map[string]any{"pk": ws(pk), "v": wb(n)}}}
	}
	run(t, l, []step{
		createTable("t"),
		// 500 bytes and 3.5 KB: 1 KB + 4 KB (the Developer Guide's example).
		{op: "BatchWriteItem", req: map[string]any{"RequestItems": map[string]any{"t": []any{put("a", 500-3), put("b", 3584-3)}}}, write: 5},
		// One of two left unprocessed is neither charged nor applied.
		{op: "BatchWriteItem", req: map[string]any{"RequestItems": map[string]any{"t": []any{put("c", 10), put("d", 10)}}},
			resp: `{"UnprocessedItems":{"t":[{"PutRequest":{"Item":{"pk":{"S":"d"},"v":{"B":"AA=="}}}}]}}`, write: 1},
		{op: "BatchGetItem", req: map[string]any{"RequestItems": map[string]any{"t": map[string]any{"ConsistentRead": true,
			"Keys": []any{map[string]any{"pk": ws("a")}, map[string]any{"pk": ws("b")}, map[string]any{"pk": ws("d")}}}}}, read: 3},
		{op: "Query", req: map[string]any{"TableName": "t", "ConsistentRead": false},
			resp: `{"Count":2,"ScannedCount":2,"Items":[{"pk":{"S":"a"},"v":{"B":"` + base64.StdEncoding.EncodeToString(make([]byte, 4090)) + `"}},{"pk":{"S":"b"}}]}`,
			read: 1},
		{op: "Scan", req: map[string]any{"TableName": "t"}, resp: `{"Count":0,"ScannedCount":3,"Items":[]}`, read: 0.5, approx: true},
		// A transaction: twice each item's units; a ConditionCheck costs the item checked.
		{op: "TransactWriteItems", req: map[string]any{"TransactItems": []any{
			map[string]any{"Put": map[string]any{"TableName": "t", "Item": map[string]any{"pk": ws("r"), "v": wb(1500)}}},
			map[string]any{"Delete": map[string]any{"TableName": "t", "Key": map[string]any{"pk": ws("c")}}},
			map[string]any{"ConditionCheck": map[string]any{"TableName": "t", "Key": map[string]any{"pk": ws("b")}}},
		}}, write: 2*2 + 2*1 + 2*4, resp: `{"ConsumedCapacity":[]}`},
		// Cancelled by a failed condition: charged, not applied.
		{op: "TransactWriteItems", req: map[string]any{"TransactItems": []any{
			map[string]any{"Put": map[string]any{"TableName": "t", "Item": map[string]any{"pk": ws("x"), "v": wb(10)}}},
		}}, status: 400, resp: `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","CancellationReasons":[{"Code":"ConditionalCheckFailed"}]}`,
			write: 2, failed: true},
		// Cancelled for another reason, or unknown to the server: not charged.
		{op: "TransactWriteItems", req: map[string]any{"TransactItems": []any{
			map[string]any{"Put": map[string]any{"TableName": "t", "Item": map[string]any{"pk": ws("x")}}},
		}}, status: 400, resp: `{"__type":"TransactionCanceledException","CancellationReasons":[{"Code":"TransactionConflict"}]}`},
		{op: "TransactWriteItems", req: map[string]any{"TransactItems": []any{}}, status: 400,
			resp: `{"__type":"com.amazon.coral.service#UnknownOperationException"}`},
		{op: "TransactGetItems", req: map[string]any{"TransactItems": []any{
			map[string]any{"Get": map[string]any{"TableName": "t", "Key": map[string]any{"pk": ws("r")}}},
			map[string]any{"Get": map[string]any{"TableName": "t", "Key": map[string]any{"pk": ws("x")}}},
		}}, read: 2 + 2},
	})
	if n := l.Items("t"); n != 3 { // a, b, r (c deleted, d unprocessed, x cancelled)
		t.Errorf("%d items shadowed, want 3", n)
	}
}

func TestLedgerSchemaAndKeys(t *testing.T) {
	t.Parallel()
	l := NewLedger()
	get := js(t, map[string]any{"TableName": "t2", "Key": map[string]any{"PK": ws("a"), "SK": ws("b")}})
	var ute *UnknownTableError
	if _, err := l.Charge("GetItem", get, []byte(`{}`), 200); !errors.As(err, &ute) || ute.Table != "t2" {
		t.Fatalf("GetItem on an unknown table: %v, want *UnknownTableError for t2", err)
	}
	pr, err := ParseRequest("GetItem", get)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Keys(pr); !errors.As(err, &ute) {
		t.Fatalf("Keys on an unknown table: %v, want *UnknownTableError", err)
	}
	desc := `{"Table":{"TableName":"t2","KeySchema":[{"AttributeName":"PK","KeyType":"HASH"},{"AttributeName":"SK","KeyType":"RANGE"}]}}`
	if _, err := l.Charge("DescribeTable", js(t, map[string]string{"TableName": "t2"}), []byte(desc), 200); err != nil || !l.Known("t2") {
		t.Fatalf("DescribeTable did not teach the schema: %v", err)
	}
	batch := js(t, map[string]any{"RequestItems": map[string]any{"t2": []any{
		map[string]any{"PutRequest": map[string]any{"Item": map[string]any{"PK": ws("a"), "SK": ws("2"), "x": ws("y")}}},
		map[string]any{"DeleteRequest": map[string]any{"Key": map[string]any{"PK": ws("a"), "SK": ws("1")}}},
		map[string]any{"PutRequest": map[string]any{"Item": map[string]any{"PK": ws("a"), "SK": ws("2")}}},
	}}})
	pr, err = ParseRequest("BatchWriteItem", batch)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := l.Keys(pr)
	if err != nil || len(keys) != 2 || keys[0] >= keys[1] || !strings.HasPrefix(keys[0], "t2\x00") {
		t.Fatalf("Keys = %q, %v; want 2 sorted keys of t2", keys, err)
	}
	if _, err := l.Charge("DeleteTable", js(t, map[string]string{"TableName": "t2"}), []byte(`{}`), 200); err != nil || l.Known("t2") {
		t.Fatalf("DeleteTable did not forget the table: %v", err)
	}
	if c, err := l.Charge("ListTables", []byte(`{}`), []byte(`{}`), 200); err != nil || c.Units() != 0 {
		t.Fatalf("ListTables: %+v, %v; want nothing charged", c, err)
	}
	if _, err := l.Charge("PutItem", []byte(`{`), nil, 200); err == nil {
		t.Fatal("a request that is not JSON: no error")
	}
	if _, err := l.Charge("GetItem", js(t, map[string]any{"TableName": "t", "Key": map[string]any{"pk": ws("a")}}), []byte(`{"Item":`), 200); err == nil {
		t.Fatal("an answer that is not JSON: no error")
	}
}

func TestTally(t *testing.T) {
	t.Parallel()
	ts := Totals{}
	ts.Add(Charge{Op: "PutItem", Write: 2, Reported: 2, HasReport: true}, true)
	ts.Add(Charge{Op: "PutItem", Write: 1, Reported: 0.5, HasReport: true}, false) // untrusted: computed
	ts.Add(Charge{Op: "UpdateItem", Write: 1, ConditionFailed: true}, true)
	ts.Add(Charge{Op: "GetItem", Read: 1, Reported: 2, HasReport: true}, true) // a mismatch: the report is the figure
	before := Totals{"PutItem": {Calls: 1, Write: 2, ComputedWrite: 2, Reported: 1}}
	d := ts.Sub(before)
	want := Tally{Calls: 3, Read: 2, Write: 2, ComputedRead: 1, ComputedWrite: 2, Reported: 1, Mismatches: 1, ConditionFailed: 1}
	if got := d.Sum(); got != want {
		t.Errorf("Sum of the difference = %+v, want %+v", got, want)
	}
	if _, ok := ts.Sub(ts)["PutItem"]; ok {
		t.Error("Sub keeps operations of no calls")
	}
}

// BenchmarkLedgerCharge is the proxy's cost per request: a conditional
// UpdateItem that reserves a key and the PutItem that completes it, as the
// DynamoDB store sends them (about 600 and 700 bytes of JSON).
func BenchmarkLedgerCharge(b *testing.B) {
	l := NewLedger()
	l.Learn("t", "pk", "")
	reserve := []byte(`{"TableName":"t","Key":{"pk":{"S":"KEY"}},"UpdateExpression":"SET #att = if_not_exists(#carried, :zero) + :one, #carried = if_not_exists(#carried, :zero) + :one, #exp = :set_exp, #fp = :set_fp, #lease = :set_lease, #st = :set_st, #tok = :set_tok, #upd = :set_upd REMOVE #enc, #err, #omit, #ref, #res, #retry, #sha, #size","ConditionExpression":"attribute_not_exists(#k) OR (#exp <= :now_s AND #st <> :in_progress AND attribute_not_exists(#carried))","ExpressionAttributeNames":{"#att":"attempts","#carried":"attempts_carried","#enc":"result_encoding","#err":"error","#exp":"expires_at","#fp":"fingerprint","#k":"pk","#lease":"lease_until_ms","#omit":"result_omitted","#ref":"result_ref","#res":"result","#retry":"retryable","#sha":"result_sha256","#size":"result_size","#st":"status","#tok":"lease_token","#upd":"updated_at_ms"},"ExpressionAttributeValues":{":zero":{"N":"0"},":one":{"N":"1"},":now_s":{"N":"1764676800"},":in_progress":{"S":"in_progress"},":set_exp":{"N":"1764680400"},":set_fp":{"S":"3f2a9c0e5b7d41a8c6e2f0b9d8a7c6e5f4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9"},":set_lease":{"N":"1764676835000"},":set_st":{"S":"in_progress"},":set_tok":{"S":"0f1e2d3c4b5a69788796a5b4c3d2e1f0"},":set_upd":{"N":"1764676800000"}},"ReturnValues":"ALL_OLD"}`)
	complete := []byte(`{"TableName":"t","Item":{"pk":{"S":"KEY"},"status":{"S":"succeeded"},"fingerprint":{"S":"3f2a9c0e5b7d41a8c6e2f0b9d8a7c6e5f4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9"},"lease_token":{"S":"0f1e2d3c4b5a69788796a5b4c3d2e1f0"},"attempts":{"N":"1"},"expires_at":{"N":"1764680400"},"updated_at_ms":{"N":"1764676800004"},"result":{"B":"eyJvayI6IHRydWUsICJpZCI6ICJhX3VuaXF1ZS1zZXEtMSIsICJuIjogMX0="}},"ConditionExpression":"#st = :in_progress AND #tok = :tok","ExpressionAttributeNames":{"#st":"status","#tok":"lease_token"},"ExpressionAttributeValues":{":in_progress":{"S":"in_progress"},":tok":{"S":"0f1e2d3c4b5a69788796a5b4c3d2e1f0"}}}`)
	ok := []byte(`{"ConsumedCapacity":{"TableName":"t","CapacityUnits":1}}`)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		key := []byte(strings.Repeat("k", 8) + strconv.Itoa(i))
		r := bytes.Replace(reserve, []byte("KEY"), key, 1)
		c := bytes.Replace(complete, []byte("KEY"), key, 1)
		if _, err := l.Charge("UpdateItem", r, ok, 200); err != nil {
			b.Fatal(err)
		}
		if _, err := l.Charge("PutItem", c, ok, 200); err != nil {
			b.Fatal(err)
		}
	}
}
