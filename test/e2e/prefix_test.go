package e2e

import (
	"maps"
	"strings"
	"testing"

	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/examples/orders"
)

// The three functions share one idempotency table, each under its own key
// prefix (orders.KeyPrefix, the prefix the template's dynamodb:LeadingKeys
// condition grants it): after an order placed, its message consumed and its
// stream record audited, every item of the table begins with the prefix of
// the function that wrote it, and each function's store reads its own
// records only.
func TestSharedTableKeyPrefixes(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	api, consumer, stream := s.start("orders-api"), s.start("orders-consumer"), s.start("orders-stream")

	if resp := s.http(api, apiEvent("5f1c2b3a-7777-4c2e-9d1a-000000000001", orderBody, nil)); resp.StatusCode != 201 {
		t.Fatalf("POST /orders: %d %s", resp.StatusCode, resp.Body)
	}
	if got := s.sqsBatch(consumer, record("m-1", event("evt_prefix", ""), 1)); len(got) != 0 {
		t.Fatalf("consumer: failures %v, want none", got)
	}
	if got := s.checkpoints(stream, orderInsert(1, "ord_prefix", nil)); len(got) != 0 {
		t.Fatalf("stream: checkpoints %v, want none", got)
	}

	functions := []string{"orders-api", "orders-consumer", "orders-stream"}
	byFunction := map[string]int{}
	for _, it := range s.scan(s.idemTable) {
		pk := it[ddbstore.DefaultKeyAttribute]
		owner := ""
		for _, fn := range functions {
			if strings.HasPrefix(pk, orders.KeyPrefix(fn)) {
				owner = fn
			}
		}
		if owner == "" {
			t.Errorf("item %q begins with no function's prefix: an IAM policy with dynamodb:LeadingKeys would refuse its writes", pk)
		}
		byFunction[owner]++
	}
	if want := map[string]int{"orders-api": 1, "orders-consumer": 1, "orders-stream": 1}; !maps.Equal(byFunction, want) {
		t.Errorf("records by function = %v, want %v", byFunction, want)
	}
	for _, fn := range functions {
		page, err := s.storeOf(fn).List(t.Context(), ddbstore.ListInput{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Records) != 1 {
			t.Errorf("%s's store lists %d records, want its own one", fn, len(page.Records))
		}
	}
}
