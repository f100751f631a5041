package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestFingerprintCanonical(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"key order", `{"a":1,"b":2}`, `{"b":2,"a":1}`, true},
		{"whitespace", `{"a":[1, 2,{"c":null}]}`, "{ \"a\" : [ 1,2 , { \"c\" : null } ] }\n", true},
		{"nested order", `{"x":{"b":true,"a":false}}`, `{"x":{"a":false,"b":true}}`, true},
		{"escapes", `{"s":"\u00e9<>&"}`, `{"s":"é<>&"}`, true},
		{"numbers as sent", `{"n":1}`, `{"n":1.0}`, false},
		{"exponent as sent", `{"n":100}`, `{"n":1e2}`, false},
		{"different value", `{"amount":100}`, `{"amount":101}`, false},
		{"array order matters", `[1,2]`, `[2,1]`, false},
		{"string vs number", `{"n":"1"}`, `{"n":1}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fa, err := Fingerprint([]byte(tc.a))
			if err != nil {
				t.Fatal(err)
			}
			fb, err := Fingerprint([]byte(tc.b))
			if err != nil {
				t.Fatal(err)
			}
			if (fa == fb) != tc.same {
				t.Fatalf("Fingerprint(%s) == Fingerprint(%s) is %v, want %v", tc.a, tc.b, fa == fb, tc.same)
			}
			if len(fa) != 64 {
				t.Fatalf("fingerprint %q is not 64 hex digits", fa)
			}
		})
	}
}

func TestCanonicalizeForm(t *testing.T) {
	got, err := Canonicalize([]byte(` {"b": [true, false, null, "x"], "a": {"z": 1.50, "y": -0}} `))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":{"y":-0,"z":1.50},"b":[true,false,null,"x"]}`
	if string(got) != want {
		t.Fatalf("Canonicalize = %s want %s", got, want)
	}
}

func TestFingerprintInvalid(t *testing.T) {
	for name, in := range map[string]string{
		"truncated":     `{"a":`,
		"trailing data": `{"a":1} {"b":2}`,
		"duplicate key": `{"a":1,"a":2}`,
		"bare word":     `hello`,
		"bad close":     `[1,2}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Fingerprint([]byte(in)); !errors.Is(err, ErrInvalidPayload) {
				t.Fatalf("Fingerprint(%q) err = %v, want ErrInvalidPayload", in, err)
			}
		})
	}
}

func TestFingerprintEmpty(t *testing.T) {
	for _, in := range []string{"", "  \n"} {
		fp, err := Fingerprint([]byte(in))
		if err != nil || fp != "" {
			t.Fatalf("Fingerprint(%q) = %q, %v; want empty, nil", in, fp, err)
		}
	}
}

// FuzzFingerprint checks that re-encoding a document (key order and
// whitespace changed) keeps its fingerprint, and that changing a value
// changes it.
func FuzzFingerprint(f *testing.F) {
	for _, s := range []string{`{"id":"evt-1","n":1,"amount":101,"currency":"EUR"}`, `[1,{"a":"b"},null]`, `"x"`, `{"a":{"b":{"c":[1.5e3]}}}`, `{}`} {
		f.Add([]byte(s))
	}
	// Deep nesting: just under and past MaxDepth. (The re-encoding below
	// indents each level, so a valid seed stays shallow.)
	for _, s := range []string{deepArrays(100), deepMixed(101), deepArrays(MaxDepth + 1), deepObjects(MaxDepth + 1), deepMixed(MaxDepth + 1), strings.Repeat("[", 1<<16)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fp, err := Fingerprint(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidPayload) {
				t.Fatalf("error %v does not wrap ErrInvalidPayload", err)
			}
			return
		}
		if fp == "" {
			return
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			t.Fatalf("Fingerprint accepted %q that encoding/json rejects", data)
		}
		// Re-encode with Go's map ordering and indentation: same document.
		re, err := json.MarshalIndent(v, "", "   ")
		if err != nil {
			t.Fatal(err)
		}
		fp2, err := Fingerprint(re)
		if err != nil || fp2 != fp {
			t.Fatalf("re-encoded %q: fingerprint %q, %v; want %q", re, fp2, err, fp)
		}
		// Wrapping in an object with a value changes the fingerprint.
		other, _ := Fingerprint([]byte(`{"wrapped":` + string(re) + `}`))
		if other == fp {
			t.Fatalf("wrapping did not change the fingerprint of %q", data)
		}
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			for k := range m {
				m[k] = "changed-" + strings.Repeat("x", 3)
				break
			}
			ch, _ := json.Marshal(m)
			if fch, _ := Fingerprint(ch); fch == fp && !bytes.Equal(ch, data) {
				// A changed value must give another fingerprint unless
				// the value was already exactly that string.
				orig, _ := Canonicalize(data)
				c2, _ := Canonicalize(ch)
				if !bytes.Equal(orig, c2) {
					t.Fatalf("changed value kept fingerprint: %q vs %q", data, ch)
				}
			}
		}
	})
}
