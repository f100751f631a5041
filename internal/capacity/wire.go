package capacity

import (
	"encoding/json"
	"strings"
)

// itemRequest is the part of a request on one item (GetItem, PutItem,
// UpdateItem, DeleteItem, and each action of a transaction).
type itemRequest struct {
	TableName                 string
	Key                       Item
	Item                      Item
	UpdateExpression          string
	ExpressionAttributeNames  map[string]string
	ExpressionAttributeValues map[string]Value
	AttributeUpdates          json.RawMessage
	ConsistentRead            bool
}

// key returns the item's key: Key, or for a put the Item (whose key
// attributes the table picks).
func (ir *itemRequest) key() Item {
	if ir.Key != nil {
		return ir.Key
	}
	return ir.Item
}

// writeRequest is one request of a BatchWriteItem.
type writeRequest struct {
	PutRequest    *struct{ Item Item }
	DeleteRequest *struct{ Key Item }
}

// keysAndAttributes is one table's part of a BatchGetItem.
type keysAndAttributes struct {
	Keys           []Item
	ConsistentRead bool
}

// transactItem is one action of a TransactWriteItems or TransactGetItems.
type transactItem struct {
	Put, Update, Delete, ConditionCheck, Get *itemRequest
}

// keySchemaElement is one element of a table's key schema.
type keySchemaElement struct {
	AttributeName, KeyType string
}

// request is every request field the Ledger reads.
type request struct {
	itemRequest
	RequestItems  json.RawMessage
	TransactItems []transactItem
	KeySchema     []keySchemaElement
}

// batchWrites decodes a BatchWriteItem's RequestItems.
func (r *request) batchWrites() map[string][]writeRequest {
	var m map[string][]writeRequest
	_ = json.Unmarshal(r.RequestItems, &m)
	return m
}

// batchGets decodes a BatchGetItem's RequestItems.
func (r *request) batchGets() map[string]keysAndAttributes {
	var m map[string]keysAndAttributes
	_ = json.Unmarshal(r.RequestItems, &m)
	return m
}

// items returns the item requests of a request, one per item it touches.
func (r *request) items(op string) []*itemRequest {
	var out []*itemRequest
	switch op {
	case "GetItem", "PutItem", "UpdateItem", "DeleteItem":
		out = append(out, &r.itemRequest)
	case "BatchWriteItem":
		for name, reqs := range r.batchWrites() {
			for _, w := range reqs {
				switch {
				case w.PutRequest != nil:
					out = append(out, &itemRequest{TableName: name, Item: w.PutRequest.Item})
				case w.DeleteRequest != nil:
					out = append(out, &itemRequest{TableName: name, Key: w.DeleteRequest.Key})
				}
			}
		}
	case "BatchGetItem":
		for name, ka := range r.batchGets() {
			for _, k := range ka.Keys {
				out = append(out, &itemRequest{TableName: name, Key: k})
			}
		}
	case "TransactWriteItems", "TransactGetItems":
		for _, ti := range r.TransactItems {
			if ir := ti.one(); ir != nil {
				out = append(out, ir)
			}
		}
	}
	return out
}

// one returns the action's item request.
func (ti transactItem) one() *itemRequest {
	for _, ir := range []*itemRequest{ti.Put, ti.Update, ti.Delete, ti.ConditionCheck, ti.Get} {
		if ir != nil {
			return ir
		}
	}
	return nil
}

// answer is every answer field the Ledger reads, for a success or an error.
type answer struct {
	status           int
	Type             string          `json:"__type"`
	Item             json.RawMessage // decoded only where the shadow lacks the item
	Items            []Item
	Count            int
	ScannedCount     int
	UnprocessedItems map[string][]writeRequest
	UnprocessedKeys  map[string]keysAndAttributes
	ConsumedCapacity json.RawMessage
	Table            *struct {
		TableName string
		KeySchema []keySchemaElement
	}
	CancellationReasons []struct{ Code string }
}

// outcome is what became of a write.
type outcome int

const (
	applied         outcome = iota + 1 // HTTP 200
	conditionFailed                    // charged, not applied
	notCharged                         // throttled, invalid, unknown: neither
)

func (a *answer) outcome() outcome {
	if a.status == 200 {
		return applied
	}
	switch errorName(a.Type) {
	case "ConditionalCheckFailedException":
		return conditionFailed
	case "TransactionCanceledException":
		for _, r := range a.CancellationReasons {
			if r.Code != "" && r.Code != "None" && r.Code != "ConditionalCheckFailed" {
				return notCharged
			}
		}
		return conditionFailed
	}
	return notCharged
}

// errorName is an error's __type without its namespace
// ("com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException").
func errorName(t string) string {
	if i := strings.LastIndexByte(t, '#'); i >= 0 {
		return t[i+1:]
	}
	return t
}

// reported sums the answer's ConsumedCapacity: one object, or a list of them
// (one per table).
func (a *answer) reported() (float64, bool) {
	type cc struct{ CapacityUnits *float64 }
	raw := a.ConsumedCapacity
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false
	}
	var list []cc
	if raw[0] != '[' {
		var one cc
		if json.Unmarshal(raw, &one) != nil {
			return 0, false
		}
		list = []cc{one}
	} else if json.Unmarshal(raw, &list) != nil {
		return 0, false
	}
	sum, found := 0.0, false
	for _, c := range list {
		if c.CapacityUnits != nil {
			sum, found = sum+*c.CapacityUnits, true
		}
	}
	return sum, found
}
