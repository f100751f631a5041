package ddbstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem/core"
)

// benchAPI is an API that answers every put and read at once, for
// measuring the store's own work (the calls it does not answer are not
// made by the benchmarks).
type benchAPI struct{ API }

func (benchAPI) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return &dynamodb.PutItemOutput{}, nil
}

func (benchAPI) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}

// benchResult is a JSON result of about size bytes: an order with lines.
func benchResult(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"ok": true, "id": "bench", "lines": [`)
	for i := 0; b.Len() < size-40; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"sku": "SKU-%06d", "qty": %d, "price": %d.%02d}`, i, i%5+1, 10+i%90, i%100)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

func benchRecords() (inProgress, succeeded core.Record) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 123456789, time.UTC)
	fp := strings.Repeat("ab", 32)
	inProgress = core.Reserve("evt:bench-order-1:charge", fp, "0123456789abcdef0123456789abcdef", nil, t0, t0.Add(35*time.Second), time.Hour)
	return normalize(inProgress), normalize(core.Succeed(inProgress, nil, t0.Add(20*time.Millisecond), time.Hour))
}

var (
	benchItem map[string]types.AttributeValue
	benchRec  core.Record
)

// BenchmarkEncode measures the encoding of a record into an item: the
// reservation, and completions with 1 KB, 10 KB (gzip-compressed by
// default) and 10 KB uncompressed results, as Complete builds them
// (compression and size check included).
func BenchmarkEncode(b *testing.B) {
	s, err := New(benchAPI{}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	plainStore, err := New(benchAPI{}, "bench", WithCompressionThreshold(NoCompression))
	if err != nil {
		b.Fatal(err)
	}
	ip, done := benchRecords()
	b.Run("in_progress", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchItem = s.encode(ip, nil, "")
		}
	})
	for _, c := range []struct {
		name string
		st   *Store
		size int
	}{{"succeeded_1KB", s, 1 << 10}, {"succeeded_10KB_gzip", s, 10 << 10}, {"succeeded_10KB_raw", plainStore, 10 << 10}} {
		rec := done
		rec.Result = benchResult(c.size)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(rec.Result)))
			for b.Loop() {
				item, _, err := c.st.fitItem("complete", rec)
				if err != nil {
					b.Fatal(err)
				}
				benchItem = item
			}
		})
	}
}

// BenchmarkDecode measures the decoding of stored items into records.
func BenchmarkDecode(b *testing.B) {
	s, err := New(benchAPI{}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	ip, done := benchRecords()
	items := []struct {
		name string
		item map[string]types.AttributeValue
	}{{"in_progress", s.encode(ip, nil, "")}}
	for _, c := range []struct {
		name string
		size int
	}{{"succeeded_1KB", 1 << 10}, {"succeeded_10KB_gzip", 10 << 10}} {
		rec := done
		rec.Result = benchResult(c.size)
		item, _, err := s.fitItem("complete", rec)
		if err != nil {
			b.Fatal(err)
		}
		items = append(items, struct {
			name string
			item map[string]types.AttributeValue
		}{c.name, item})
	}
	for _, it := range items {
		b.Run(it.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec, err := s.decode(it.item)
				if err != nil {
					b.Fatal(err)
				}
				benchRec = rec
			}
		})
	}
}

// BenchmarkStoreCalls measures Reserve and Complete through the store's
// public methods against an API that answers at once: the request building
// of one first execution, without the SDK and the network.
func BenchmarkStoreCalls(b *testing.B) {
	s, err := New(benchAPI{}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ip, done := benchRecords()
	done.Result = benchResult(1 << 10)
	now := ip.UpdatedAt
	b.Run("Reserve", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Reserve(ctx, ip, nil, now); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Complete_1KB", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Complete(ctx, done); err != nil {
				b.Fatal(err)
			}
		}
	})
}
