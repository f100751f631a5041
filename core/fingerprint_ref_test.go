package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"
)

// refCanonicalize is the json.Decoder-based canonicalizer that the one-pass
// canonicalizer replaced, kept as the reference it must agree with. The
// decoder's Token method has no depth limit: json.Valid applies
// encoding/json's, which MaxDepth matches.
func refCanonicalize(payload []byte) ([]byte, error) {
	if !json.Valid(payload) {
		return nil, fmt.Errorf("%w: rejected by json.Valid", ErrInvalidPayload)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var buf bytes.Buffer
	if err := refValue(dec, &buf); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the JSON value", ErrInvalidPayload)
	}
	return buf.Bytes(), nil
}

func refValue(dec *json.Decoder, buf *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			type kv struct {
				key string
				val []byte
			}
			var members []kv
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					return err
				}
				k, ok := tok.(string)
				if !ok {
					return fmt.Errorf("object key %v is not a string", tok)
				}
				var vb bytes.Buffer
				if err := refValue(dec, &vb); err != nil {
					return err
				}
				members = append(members, kv{k, vb.Bytes()})
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			sort.Slice(members, func(i, j int) bool { return members[i].key < members[j].key })
			buf.WriteByte('{')
			for i, m := range members {
				if i > 0 {
					if members[i-1].key == m.key {
						return errors.New("duplicate object key")
					}
					buf.WriteByte(',')
				}
				refString(buf, m.key)
				buf.WriteByte(':')
				buf.Write(m.val)
			}
			buf.WriteByte('}')
			return nil
		case '[':
			buf.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					buf.WriteByte(',')
				}
				if err := refValue(dec, buf); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			buf.WriteByte(']')
			return nil
		}
		return fmt.Errorf("unexpected %v", t)
	case string:
		refString(buf, t)
	case json.Number:
		buf.WriteString(string(t))
	case bool:
		fmt.Fprint(buf, t)
	case nil:
		buf.WriteString("null")
	}
	return nil
}

func refString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	buf.Truncate(buf.Len() - 1)
}

// canonCases are documents on the edges of the grammar and of string
// decoding, valid and invalid.
var canonCases = []string{
	`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"b":{"d":1,"c":2},"a":[3,{"z":0,"y":1}]}`,
	`{"é":1,"e":2,"\u00e9x":3}`, `{"":1," ":2}`, `{}`, `[]`, ` [ ] `, `{ }`, `[1,]`, `{"a":1,}`, `[1 2]`, `{"a" 1}`,
	`{"a":1 "b":2}`, `{,}`, `{"a"}`, `{1:2}`, `[`, `{`, `{"a":`, `"abc`, `"\`, `"\u12`, `"\u12x4"`, `"\x"`, `"\'"`,
	`"a\"b\\c\/d\be\ff\ng\rh\ti"`, `"\u0000\u001f\u007f\u0080"`, "\"\u2028\u2029\"", `"\u2028"`, `"<>&"`,
	`"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`, `"\ud83dx"`, `"\ud83d\u0041"`, `"\ude00\ud83d\ude00"`, `"\ud83d\ud83d\ude00"`,
	`"\ud83d\u12"`, "\"\xff\"", "\"a\xc3\"", "\"\xed\xa0\x80\"", "\"\xef\xbf\xbd\"", "\"\x7f\"", "\"\x01\"", "\"\t\"",
	`0`, `-0`, `01`, `-`, `-a`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1E-7`, `1e5x`, `12345678901234567890123456789`, `-0.0e-0`,
	`true`, `tru`, `truex`, `false`, `null`, `nul`, `nulll`, `[true,false,null]`, `1 2`, `{"a":1} {"b":2}`, `{"a":1}}`,
	"\v1", "1\v", " \t\n\r1 \t\n\r", `[[[[[]]]]]`, `[{"b":[{"d":4,"c":3}],"a":1}]`, `{"a":{"a":{"a":1,"a":2}}}`,
	`{"b":1,"a":2,"b":3}`, `{"z":1,"y":2,"x":3,"w":4,"v":5,"u":6,"t":7,"s":8,"r":9,"q":10,"p":11,"o":12,"n":13}`,
}

// TestCanonicalizeMatchesReference checks the canonicalizer against the
// json.Decoder-based reference on the edge cases and the bench payloads.
func TestCanonicalizeMatchesReference(t *testing.T) {
	docs := append([]string(nil), canonCases...)
	docs = append(docs, string(benchPayload(1<<10)), string(benchPayload(64<<10)), strings.Repeat("[", 5000)+strings.Repeat("]", 5000))
	for i, d := range docs {
		checkAgainstReference(t, i, []byte(d))
	}
}

// TestCanonicalizeResultIsTheCallers checks that a later call does not
// write into a result already returned (the buffers are pooled).
func TestCanonicalizeResultIsTheCallers(t *testing.T) {
	got, err := Canonicalize([]byte(`{"b":1,"a":[1,2,3]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := string(got)
	for range 10 {
		if _, err := Fingerprint([]byte(`{"x":9}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := Canonicalize([]byte(`[7]`)); err != nil {
			t.Fatal(err)
		}
	}
	if string(got) != want {
		t.Fatalf("an earlier result changed to %s, want %s", got, want)
	}
}

func checkAgainstReference(t *testing.T, i int, doc []byte) {
	t.Helper()
	got, err := Canonicalize(doc)
	want, werr := refCanonicalize(doc)
	if (err == nil) != (werr == nil) {
		t.Fatalf("case %d: Canonicalize(%q) err = %v, reference err = %v", i, doc, err, werr)
	}
	if err != nil {
		if !errors.Is(err, ErrInvalidPayload) {
			t.Fatalf("case %d: Canonicalize(%q) err = %v, want ErrInvalidPayload", i, doc, err)
		}
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("case %d: Canonicalize(%q) = %q, reference %q", i, doc, got, want)
	}
}

// FuzzCanonicalizeMatchesReference checks that the canonicalizer accepts
// exactly what the reference accepts and gives the same canonical form.
func FuzzCanonicalizeMatchesReference(f *testing.F) {
	for _, d := range canonCases {
		f.Add([]byte(d))
	}
	// Nesting at and past MaxDepth. (Deep objects are slow in the
	// reference, which copies each level's members into the level above.)
	for _, d := range []string{deepArrays(MaxDepth), deepArrays(MaxDepth + 1), deepMixed(300), deepObjects(MaxDepth + 1), deepMixed(MaxDepth + 1), strings.Repeat(`{"a":`, 1<<14)} {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkAgainstReference(t, 0, doc)
	})
}

// BenchmarkCanonicalizeReference measures the replaced canonicalizer, for
// comparison with BenchmarkCanonicalize in the same run.
func BenchmarkCanonicalizeReference(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		p := benchPayload(size)
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				c, err := refCanonicalize(p)
				if err != nil {
					b.Fatal(err)
				}
				benchCanon = c
			}
		})
	}
}
