package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/idemgo/idem"
)

// BenchmarkRunner measures idem.Runner over the store against the test
// server: a first run (reserve and complete, two round trips), a duplicate
// of a completed key (one), and first runs from parallel goroutines.
func BenchmarkRunner(b *testing.B) {
	integration(b)
	s := newStore(b, newClient(b, "", nil))
	r, err := idem.New(s)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	payload := []byte(`{"amount":1200}`)
	handler := func(context.Context) ([]byte, error) { return []byte(`{"charge":"ch_1"}`), nil }
	var n atomic.Int64
	run := func(b *testing.B, key string) {
		if _, err := r.Do(ctx, key, payload, handler); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("first_run", func(b *testing.B) {
		for b.Loop() {
			run(b, fmt.Sprintf("evt:bench:%d", n.Add(1)))
		}
	})
	run(b, "evt:bench:duplicate")
	b.Run("duplicate", func(b *testing.B) {
		for b.Loop() {
			run(b, "evt:bench:duplicate")
		}
	})
	b.Run("first_run_parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				run(b, fmt.Sprintf("evt:bench:%d", n.Add(1)))
			}
		})
	})
}
