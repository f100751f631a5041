package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
)

// Documents nested d deep, the innermost array or object at depth d.
func deepArrays(d int) string { return strings.Repeat("[", d) + strings.Repeat("]", d) }

func deepObjects(d int) string {
	return strings.Repeat(`{"a":`, d-1) + "{}" + strings.Repeat("}", d-1)
}

// deepMixed alternates arrays and objects, the innermost holding a 0.
func deepMixed(d int) string {
	var open, closing strings.Builder
	for i := range d {
		if i%2 == 0 {
			open.WriteString("[")
		} else {
			open.WriteString(`{"k":`)
		}
	}
	for i := d - 1; i >= 0; i-- {
		if i%2 == 0 {
			closing.WriteString("]")
		} else {
			closing.WriteString("}")
		}
	}
	return open.String() + "0" + closing.String()
}

// repeatTo repeats s up to n bytes.
func repeatTo(s string, n int) []byte { return []byte(strings.Repeat(s, n/len(s))) }

// wantDepthError checks that err reports nesting past MaxDepth at offset.
func wantDepthError(t *testing.T, err error, offset int) {
	t.Helper()
	if !errors.Is(err, ErrInvalidPayload) {
		t.Fatalf("err = %v, want ErrInvalidPayload", err)
	}
	var de *depthError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v, want a depth error", err)
	}
	if de.offset != offset {
		t.Fatalf("depth error at offset %d, want %d", de.offset, offset)
	}
}

// TestFingerprintDepth checks the nesting limit, and that it is
// encoding/json's (json.Valid agrees).
func TestFingerprintDepth(t *testing.T) {
	tests := []struct {
		name   string
		doc    string
		offset int // of the depth error; -1: accepted
	}{
		{"arrays 9999", deepArrays(MaxDepth - 1), -1},
		{"arrays 10000", deepArrays(MaxDepth), -1},
		{"arrays 10001", deepArrays(MaxDepth + 1), MaxDepth},
		{"arrays 10000 with a value inside", strings.Repeat("[", MaxDepth) + "1" + strings.Repeat("]", MaxDepth), -1},
		{"objects 9999", deepObjects(MaxDepth - 1), -1},
		{"objects 10000", deepObjects(MaxDepth), -1},
		{"objects 10001", deepObjects(MaxDepth + 1), 5 * MaxDepth},
		{"mixed 9999", deepMixed(MaxDepth - 1), -1},
		{"mixed 10000", deepMixed(MaxDepth), -1},
		{"mixed 10001", deepMixed(MaxDepth + 1), 3 * MaxDepth},
		{"arrays 10001 spaced", strings.Repeat("[ ", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), 2 * MaxDepth},
		{"arrays 10001 unclosed", strings.Repeat("[", MaxDepth+1), MaxDepth},
		{"arrays 10000 unclosed", strings.Repeat("[", MaxDepth), -2},
		{"siblings at 10000", "[" + deepArrays(MaxDepth-1) + "," + deepArrays(MaxDepth-1) + "]", -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Canonicalize([]byte(tc.doc))
			if valid := json.Valid([]byte(tc.doc)); valid != (err == nil) {
				t.Fatalf("Canonicalize err = %v, but json.Valid = %v", err, valid)
			}
			switch {
			case tc.offset >= 0:
				wantDepthError(t, err, tc.offset)
			case tc.offset == -2:
				if !errors.Is(err, ErrInvalidPayload) || errors.As(err, new(*depthError)) {
					t.Fatalf("err = %v, want an end of input error", err)
				}
			case err != nil || string(got) != tc.doc: // each is in canonical form
				t.Fatalf("Canonicalize = %.40q…, %v; want the document", got, err)
			}
			fp, ferr := Fingerprint([]byte(tc.doc))
			if (ferr == nil) != (err == nil) || (ferr == nil) != (fp != "") {
				t.Fatalf("Fingerprint = %q, %v; Canonicalize err %v", fp, ferr, err)
			}
		})
	}
}

// TestFingerprintHostileBodies checks bodies any client can send: each is
// rejected as soon as its nesting passes MaxDepth.
func TestFingerprintHostileBodies(t *testing.T) {
	tests := []struct {
		name   string
		body   []byte
		offset int
	}{
		{"1 MiB of [", repeatTo("[", 1<<20), MaxDepth},
		{"5.5 MB of [", repeatTo("[", 5_500_000), MaxDepth},
		{`1 MiB of {"a":`, repeatTo(`{"a":`, 1<<20), 5 * MaxDepth},
		{`5.5 MB of {"a":`, repeatTo(`{"a":`, 5_500_000), 5 * MaxDepth},
		{`1 MiB of [{"":`, repeatTo(`[{"":`, 1<<20), 5 * MaxDepth / 2},
		{"1 MiB of [ and newlines", repeatTo("[\n", 1<<20), 2 * MaxDepth},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fp, err := Fingerprint(tc.body)
			wantDepthError(t, err, tc.offset)
			if fp != "" {
				t.Fatalf("fingerprint %q with an error", fp)
			}
			_, err = Canonicalize(tc.body)
			wantDepthError(t, err, tc.offset)
		})
	}
}

// TestFingerprintHostileConcurrent fingerprints ten 1 MiB hostile bodies at
// once, as a Lambda function does with an SQS batch.
func TestFingerprintHostileConcurrent(t *testing.T) {
	bodies := [][]byte{repeatTo("[", 1<<20), repeatTo(`{"a":`, 1<<20), repeatTo(`[{"":`, 1<<20)}
	errs := make([]error, 10)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = Fingerprint(bodies[i%len(bodies)]) }()
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ErrInvalidPayload) || !errors.Is(err, ErrTooDeep) || !errors.As(err, new(*depthError)) {
			t.Errorf("body %d: err = %v, want a depth error wrapping ErrInvalidPayload", i, err)
		}
	}
}

// stackGrowth runs f on a new goroutine and returns by how much more the
// goroutine stacks grew than for a goroutine that does nothing (whose
// starting stack the runtime sizes from the stacks it has seen), measured
// before the goroutine ends. Other goroutines' stacks change too: it
// returns the least of three runs, and 0 for less than an idle goroutine.
func stackGrowth(f func()) int64 {
	g := goroutineStack(f) - goroutineStack(func() {})
	for range 2 {
		g = min(g, goroutineStack(f)-goroutineStack(func() {}))
	}
	return max(g, 0)
}

func goroutineStack(f func()) int64 {
	read := func() int64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}}
		metrics.Read(s)
		return int64(s[0].Value.Uint64())
	}
	before := read()
	after := make(chan int64)
	go func() {
		f()
		after <- read()
	}()
	return <-after - before
}

// TestFingerprintStack checks that the deepest documents accepted, and the
// hostile ones, leave the goroutine's stack at its starting size (a
// recursive canonicalizer grows it to 2 MiB at depth 10,000 and to 256 MiB
// on 1 MiB of '[').
func TestFingerprintStack(t *testing.T) {
	tests := []struct {
		name string
		doc  []byte
	}{
		{"arrays 10000", []byte(deepArrays(MaxDepth))},
		{"objects 10000", []byte(deepObjects(MaxDepth))},
		{"mixed 10000", []byte(deepMixed(MaxDepth))},
		{"1 MiB of [", repeatTo("[", 1<<20)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if g := stackGrowth(func() { _, _ = Fingerprint(tc.doc) }); g > 64<<10 {
				t.Fatalf("goroutine stacks grew by %d bytes more than an idle goroutine's, want at most 64 KiB", g)
			}
		})
	}
}

// TestFingerprintHostileValid checks valid documents built to be costly
// against the reference, and documents how strings are decoded.
func TestFingerprintHostileValid(t *testing.T) {
	var manyKeys, dupKeys strings.Builder
	for i := 20_000; i > 0; i-- {
		fmt.Fprintf(&manyKeys, `,"k%d":%d`, i, i)
		fmt.Fprintf(&dupKeys, `,"k%d":%d`, i%19_999, i)
	}
	big := strings.Repeat("x", 16<<10)
	tests := []struct {
		name  string
		doc   string
		valid bool
	}{
		{"1 MiB string", `"` + strings.Repeat("x", 1<<20) + `"`, true},
		{"escaped string", `"` + strings.Repeat(`\u00e9\n\"\ud83d\ude00`, 1<<14) + `"`, true},
		{"1 MiB of digits", strings.Repeat("7", 1<<20), true},
		{"long fraction and exponent", "-0." + strings.Repeat("1", 1<<19) + "e+" + strings.Repeat("9", 1<<10), true},
		{"invalid UTF-8", "\"" + strings.Repeat("\xff\xc3", 1<<16) + "\"", true},
		{"lone surrogates", `["\ud800","\udfff","\ud800\ud800","\udc00\ud800x"]`, true},
		{"20000 keys in reverse", "{" + manyKeys.String()[1:] + "}", true},
		{"duplicate among 20000 keys", "{" + dupKeys.String()[1:] + "}", false},
		{"deep unsorted objects around a large member", strings.Repeat(`{"b":`, 1000) + `"` + big + `"` + strings.Repeat(`,"a":0}`, 1000), true},
		{"deep unsorted objects around a duplicate", strings.Repeat(`{"b":`, 1000) + `{"a":1,"a":2}` + strings.Repeat(`,"a":0}`, 1000), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkAgainstReference(t, 0, []byte(tc.doc))
			if _, err := Fingerprint([]byte(tc.doc)); (err == nil) != tc.valid {
				t.Fatalf("Fingerprint err = %v, want valid %v", err, tc.valid)
			}
		})
	}
}

// TestFingerprintStringDecoding pins what the canonical form does with
// invalid UTF-8 and unpaired surrogates: like encoding/json, it decodes
// them to U+FFFD, so they match the escape of U+FFFD.
func TestFingerprintStringDecoding(t *testing.T) {
	tests := []struct {
		name string
		a, b string
	}{
		{"invalid byte", "\"\xff\"", `"\ufffd"`},
		{"truncated sequence", "\"a\xc3\"", `"a\ufffd"`},
		{"encoded surrogate", "\"\xed\xa0\x80\"", `"\ufffd\ufffd\ufffd"`},
		{"lone high surrogate", `"\ud800"`, `"\ufffd"`},
		{"lone low surrogate", `"\udc00"`, `"\ufffd"`},
		{"reversed pair", `"\udc00\ud800"`, `"\ufffd\ufffd"`},
		{"surrogate pair", `"\ud83d\ude00"`, "\"\U0001F600\""},
		{"surrogate in a key", `{"\ud800":1}`, `{"\ufffd":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fa, err := Fingerprint([]byte(tc.a))
			if err != nil {
				t.Fatal(err)
			}
			if fb, err := Fingerprint([]byte(tc.b)); err != nil || fa != fb {
				t.Fatalf("Fingerprint(%q) = %q, Fingerprint(%q) = %q, %v; want equal", tc.a, fa, tc.b, fb, err)
			}
		})
	}
}

// randomDoc writes a random document whose objects, keys out of order,
// are often larger than maxReorderInPlace and nested in one another.
func randomDoc(r *rand.Rand, b *strings.Builder, depth int) {
	switch k := r.IntN(10); {
	case depth > 0 && k < 4:
		n := r.IntN(6)
		b.WriteString("{")
		for i, key := range r.Perm(n + 1)[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(b, `"%c\u00e9%d":`, 'a'+key%3, key)
			randomDoc(r, b, depth-1)
		}
		b.WriteString("}")
	case depth > 0 && k < 6:
		b.WriteString("[")
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteString(",")
			}
			randomDoc(r, b, depth-1)
		}
		b.WriteString("]")
	case k < 8:
		fmt.Fprintf(b, `"%s\n"`, strings.Repeat("s", r.IntN(700)))
	default:
		fmt.Fprintf(b, "%d.%d", r.IntN(1000), r.IntN(10))
	}
}

// TestCanonicalizeLargeObjectsMatchReference checks the objects put in key
// order after the whole document is read (assemble) against the reference,
// and that the documents do exercise that path, nested.
func TestCanonicalizeLargeObjectsMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	deferred, nested := 0, 0
	for i := range 400 {
		var b strings.Builder
		randomDoc(r, &b, 1+i%7)
		doc := []byte(b.String())
		checkAgainstReference(t, i, doc)
		c := new(canonicalizer)
		if _, err := c.run(doc, nil, nil); err == nil && len(c.defers) > 0 {
			deferred++
			if hasNestedDefers(c.defers) {
				nested++
			}
		}
	}
	if deferred < 50 || nested < 10 {
		t.Fatalf("%d documents with deferred objects, %d nested: the generator no longer exercises assemble", deferred, nested)
	}
}

// hasNestedDefers reports whether one of ds, in the order closed, is
// inside another: closed first and opened after.
func hasNestedDefers(ds []deferred) bool {
	for i := range ds {
		for _, outer := range ds[i+1:] {
			if outer.open < ds[i].open {
				return true
			}
		}
	}
	return false
}

// TestCanonicalizeReorderThreshold checks objects on either side of
// maxReorderInPlace, alone and nested in an unsorted object.
func TestCanonicalizeReorderThreshold(t *testing.T) {
	for _, size := range []int{maxReorderInPlace - 1, maxReorderInPlace, maxReorderInPlace + 1} {
		// {"b":"x…","a":0}: the members "b":"…" and "a":0 with a comma.
		inner := `{"b":"` + strings.Repeat("x", size-len(`"b":"",`)-len(`"a":0`)) + `","a":0}`
		for name, doc := range map[string]string{"alone": inner, "nested": `{"z":` + inner + `,"y":[` + inner + `]}`} {
			t.Run(fmt.Sprintf("%d %s", size, name), func(t *testing.T) {
				checkAgainstReference(t, size, []byte(doc))
				c := new(canonicalizer)
				if _, err := c.run([]byte(inner), nil, nil); err != nil || (len(c.defers) > 0) != (size > maxReorderInPlace) {
					t.Fatalf("%d bytes of members: %d deferred objects, %v", size, len(c.defers), err)
				}
			})
		}
	}
}

// TestCanonicalizeLargeResultIsTheCallers checks that a later call does
// not write into a result assembled from deferred objects.
func TestCanonicalizeLargeResultIsTheCallers(t *testing.T) {
	doc := []byte(`{"b":"` + strings.Repeat("x", 2*maxReorderInPlace) + `","a":[1]}`)
	got, err := Canonicalize(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := string(got)
	for range 10 {
		if _, err := Fingerprint(doc); err != nil {
			t.Fatal(err)
		}
		if _, err := Canonicalize([]byte(`{"d":"` + strings.Repeat("y", 2*maxReorderInPlace) + `","c":2}`)); err != nil {
			t.Fatal(err)
		}
	}
	if string(got) != want {
		t.Fatalf("an earlier result changed")
	}
}

func TestDepthErrorMessage(t *testing.T) {
	_, err := Fingerprint([]byte(deepArrays(MaxDepth + 1)))
	if got, want := err.Error(), "idem: invalid payload: nesting deeper than 10000 at offset 10000"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
}
