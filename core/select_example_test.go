package core_test

import (
	"fmt"

	"github.com/idemgo/idem/core"
)

// An event published twice differs only in its envelope's fields: with
// those ignored, both have one fingerprint.
func ExampleIgnoreFields() {
	sel := core.IgnoreFields("published_at", "trace.id", "items.scanned_at")
	a, _ := sel.Canonicalize([]byte(`{"order":"o-1","published_at":"2030-01-02T03:04:05Z","trace":{"id":"t-1","sampled":true},` +
		`"items":[{"sku":"mug","scanned_at":1},{"sku":"pen","scanned_at":2}]}`))
	b, _ := sel.Canonicalize([]byte(`{"items":[{"scanned_at":7,"sku":"mug"},{"sku":"pen","scanned_at":8}],` +
		`"trace":{"sampled":true,"id":"t-2"},"published_at":"2030-01-02T04:00:00Z","order":"o-1"}`))
	fmt.Println(string(a))
	fmt.Println(string(a) == string(b))
	// Output:
	// {"items":[{"sku":"mug"},{"sku":"pen"}],"order":"o-1","trace":{"sampled":true}}
	// true
}

// Only the named fields count; a payload without one of them is refused.
func ExampleSelectFields() {
	sel := core.SelectFields("order_id", "lines.sku", "lines.qty")
	c, err := sel.Canonicalize([]byte(`{"order_id":"o-1","note":"leave at door","lines":[{"sku":"mug","qty":2,"price":900}]}`))
	fmt.Println(string(c), err)
	_, err = sel.Fingerprint([]byte(`{"orderId":"o-1","lines":[]}`))
	fmt.Println(err)
	// Output:
	// {"lines":[{"qty":2,"sku":"mug"}],"order_id":"o-1"} <nil>
	// idem: invalid payload: selected field "order_id" is absent from the object that ends at offset 27
}
