package core

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// benchPayload returns a JSON order event of at most size bytes: the
// workload's event fields followed by as many line items as fit.
// Keys are deliberately out of order so that canonicalization has sorting
// to do.
func benchPayload(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"id": "bench-seq-1", "n": 1, "amount": 101, "currency": "EUR", "customer": {"name": "Ada Lovelace", "email": "ada@example.com", "country": "GB"}, "items": [`)
	for i := 0; ; i++ {
		item := fmt.Sprintf(`{"sku": "SKU-%06d", "qty": %d, "price": %d.%02d, "title": "item number %d <gift> & co", "tags": ["a", "b"], "gift": %v}`,
			i, i%5+1, 10+i%90, i%100, i, i%2 == 0)
		if i > 0 {
			item = ", " + item
		}
		if b.Len()+len(item)+2 > size {
			break
		}
		b.WriteString(item)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

var (
	benchFP     string
	benchDec    Decision
	benchCanon  []byte
	benchT0     = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	benchPolicy = Policy{MaxAttempts: 5}
)

func benchRecord(fp string) *Record {
	return &Record{Key: "bench-seq-1", Fingerprint: fp, Status: StatusSucceeded, LeaseToken: "0123456789abcdef0123456789abcdef",
		ExpiresAt: benchT0.Add(time.Hour), Attempts: 1, Result: []byte(`{"ok":true,"id":"bench-seq-1","n":1}`), UpdatedAt: benchT0}
}

// BenchmarkDecide measures the decision alone over the table's main rows.
func BenchmarkDecide(b *testing.B) {
	fp := strings.Repeat("ab", 32)
	cases := []struct {
		name string
		rec  *Record
		fp   string
	}{
		{"none", nil, fp},
		{"succeeded", benchRecord(fp), fp},
		{"mismatch", benchRecord(fp), strings.Repeat("cd", 32)},
		{"in_progress_live", &Record{Key: "bench-seq-1", Fingerprint: fp, Status: StatusInProgress, LeaseUntil: benchT0.Add(time.Minute), ExpiresAt: benchT0.Add(time.Hour), Attempts: 1}, fp},
		{"failed_retryable", &Record{Key: "bench-seq-1", Fingerprint: fp, Status: StatusFailed, Retryable: true, ExpiresAt: benchT0.Add(time.Hour), Attempts: 1}, fp},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchDec = Decide("bench-seq-1", tc.rec, tc.fp, benchT0, benchPolicy)
			}
		})
	}
}

// BenchmarkFingerprint measures Fingerprint (canonicalization and SHA-256)
// of 1 KB and 64 KB payloads.
func BenchmarkFingerprint(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		p := benchPayload(size)
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				fp, err := Fingerprint(p)
				if err != nil {
					b.Fatal(err)
				}
				benchFP = fp
			}
		})
	}
}

// BenchmarkCanonicalize measures the canonicalization step alone, to split
// Fingerprint's cost between parsing and hashing.
func BenchmarkCanonicalize(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		p := benchPayload(size)
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				c, err := Canonicalize(p)
				if err != nil {
					b.Fatal(err)
				}
				benchCanon = c
			}
		})
	}
}

// BenchmarkDecideFingerprint1KB measures what a duplicate call costs in
// core before any I/O: fingerprint a 1 KB payload and decide against a
// stored succeeded record. Target: under 5 µs.
func BenchmarkDecideFingerprint1KB(b *testing.B) {
	p := benchPayload(1 << 10)
	fp0, err := Fingerprint(p)
	if err != nil {
		b.Fatal(err)
	}
	rec := benchRecord(fp0)
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		fp, err := Fingerprint(p)
		if err != nil {
			b.Fatal(err)
		}
		benchDec = Decide("bench-seq-1", rec, fp, benchT0, benchPolicy)
	}
	if benchDec.Action != Replay {
		b.Fatalf("action %v, want replay", benchDec.Action)
	}
}

func TestBenchPayloadSize(t *testing.T) {
	for _, size := range []int{1 << 10, 64 << 10} {
		p := benchPayload(size)
		if len(p) > size || len(p) < size-200 {
			t.Errorf("benchPayload(%d) is %d bytes", size, len(p))
		}
		if _, err := Canonicalize(p); err != nil {
			t.Errorf("benchPayload(%d): %v", size, err)
		}
	}
}

// adversarialBodies are 1 MiB bodies any client can send: nesting far past
// MaxDepth (rejected), and valid documents built to be costly.
func adversarialBodies() []struct {
	name string
	body []byte
} {
	const mib = 1 << 20
	// Unsorted objects nested MaxDepth deep around one large member: each
	// level is out of order, so a canonicalizer that reorders each object
	// by copying it copies the large member once per level.
	big := strings.Repeat("x", mib-len(`{"b":`)*(MaxDepth-1)-len(`,"a":0}`)*(MaxDepth-1)-2)
	deepUnsorted := strings.Repeat(`{"b":`, MaxDepth-1) + `"` + big + `"` + strings.Repeat(`,"a":0}`, MaxDepth-1)
	chain := strings.Repeat(`{"b":`, 200) + "0" + strings.Repeat(`,"a":0}`, 200)
	return []struct {
		name string
		body []byte
	}{
		{"open_arrays", []byte(strings.Repeat("[", mib))},
		{"open_objects", []byte(strings.Repeat(`{"a":`, mib/5))},
		{"deep_unsorted_objects", []byte(deepUnsorted)},
		{"unsorted_chains", []byte("[" + strings.Repeat(chain+",", mib/(len(chain)+1)-1) + "0]")},
		{"invalid_utf8", []byte(`"` + strings.Repeat("\xff", mib-2) + `"`)},
	}
}

// BenchmarkFingerprintAdversarial1MiB measures Fingerprint on
// adversarialBodies: time and heap (B/op), and stack-B/op, how much one
// call grows a new goroutine's stack beyond an idle goroutine's (see
// stackGrowth).
func BenchmarkFingerprintAdversarial1MiB(b *testing.B) {
	for _, tc := range adversarialBodies() {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.body)))
			stack := stackGrowth(func() { benchFP, _ = Fingerprint(tc.body) })
			for b.Loop() {
				benchFP, _ = Fingerprint(tc.body)
			}
			b.ReportMetric(float64(stack), "stack-B/op")
		})
	}
}
