package main

import (
	"encoding/json"
	"testing"

	"github.com/idemgo/idem/internal/capacity"
)

// ptWritten is an item Powertools 2.35.0 wrote (DynamoDBPersistenceLayer,
// key prefix "bench", payload validation on), read back from dynalite.
const ptWritten = `{"id":{"S":"bench#p17mCC/50YYjlGcLZCBXyQ=="},"expiration":{"N":"1796373315"},"status":{"S":"COMPLETED"},` +
	`"in_progress_expiration":{"N":"1796369744503"},"validation":{"S":"OLPv+Lr1ZidHjsdqcE6bUg=="},` +
	`"data":{"M":{"ok":{"BOOL":true},"id":{"S":"a_unique-seq-1"},"n":{"N":"1"},` +
	`"lines":{"L":[{"M":{"sku":{"S":"SKU-000001"},"qty":{"N":"2"},"price":{"N":"10.5"}}}]},"note":{"NULL":true}}}}`

// TestPtItems checks the model of Powertools' record against the item it
// wrote for the handler's result {ok, id, n, lines, note}.
func TestPtItems(t *testing.T) {
	t.Parallel()
	var written capacity.Item
	if err := json.Unmarshal([]byte(ptWritten), &written); err != nil {
		t.Fatal(err)
	}
	result := []byte(`{"ok": true, "id": "a_unique-seq-1", "n": 1, "lines": [{"sku": "SKU-000001", "qty": 2, "price": 10.50}], "note": null}`)
	in, done, err := ptItems(result, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := capacity.Size(done), capacity.Size(written); got != want {
		t.Errorf("model of the completed item: %d bytes, Powertools wrote %d", got, want)
	}
	for name := range written {
		if _, ok := done[name]; !ok {
			t.Errorf("the model lacks attribute %s", name)
		}
	}
	if _, ok := in["data"]; ok || len(in) != len(written)-1 {
		t.Errorf("the item in progress has %d attributes, want all but data", len(in))
	}
	u, err := ptUnits(jsonResult(4096), false)
	if err != nil {
		t.Fatal(err)
	}
	// A 4 KB JSON result as a map takes less than its text (no quotes,
	// braces or commas; numbers in base 100): the completed item is 2830 bytes.
	if u.ReserveWrite != 1 || u.CompletedBytes != 2830 || u.CompleteWrite != 3 || u.DuplicateWrite != 3 || u.DuplicateRead != 1 {
		t.Errorf("units of a 4 KB result: %+v", u)
	}
}
