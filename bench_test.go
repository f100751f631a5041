package idem_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/memstore"
)

// The runner's own cost per call, over the in-memory store (no network, no
// SDK): what idem adds to a handler before DynamoDB's share. The payload is
// the benchmark workload's event (the Performance section of the README).

func benchEvent(i int) (string, []byte, []byte) {
	id := fmt.Sprintf("a_unique-seq-%d", i)
	return id, fmt.Appendf(nil, `{"id": %q, "n": %d, "amount": %d, "currency": "EUR"}`, id, i, 100+i),
		fmt.Appendf(nil, `{"ok": true, "id": %q, "n": %d}`, id, i)
}

func benchRunner(b *testing.B, opts ...idem.Option) *idem.Runner {
	b.Helper()
	r, err := idem.New(memstore.New(), append([]idem.Option{idem.WithRetention(time.Hour)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkDoFirst measures first executions (new keys): reserve, run,
// complete.
func BenchmarkDoFirst(b *testing.B) {
	r := benchRunner(b)
	ctx := context.Background()
	keys, payloads, results := make([]string, 0, 1024), [][]byte{}, [][]byte{}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		b.StopTimer()
		if i%1024 == 0 {
			keys, payloads, results = keys[:0], payloads[:0], results[:0]
			for j := range 1024 {
				k, p, res := benchEvent(i + j)
				keys, payloads, results = append(keys, k), append(payloads, p), append(results, res)
			}
		}
		k, p, res := keys[i%1024], payloads[i%1024], results[i%1024]
		b.StartTimer()
		if _, err := r.Do(ctx, k, p, func(context.Context) ([]byte, error) { return res, nil }); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkDoDuplicate measures duplicates of a completed key, replayed
// from the store, and with the local cache on.
func BenchmarkDoDuplicate(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []idem.Option
	}{{"store", nil}, {"cache", []idem.Option{idem.WithCache(1024)}}} {
		b.Run(c.name, func(b *testing.B) {
			r := benchRunner(b, c.opts...)
			ctx := context.Background()
			k, p, res := benchEvent(1)
			fn := func(context.Context) ([]byte, error) { return res, nil }
			if _, err := r.Do(ctx, k, p, fn); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				out, err := r.Do(ctx, k, p, fn)
				if err != nil || !out.Replayed {
					b.Fatalf("Do = %+v, %v; want a replay", out, err)
				}
			}
		})
	}
}
