package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestSelection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		sel     Selection
		payload string
		want    string // the canonical form; "" with wantErr
		wantErr error
	}{
		{"zero", Selection{}, `{"b":1,"a":2}`, `{"a":2,"b":1}`, nil},
		{"select one", SelectFields("id"), `{"time":"t1","id":"e-1","n":1}`, `{"id":"e-1"}`, nil},
		{"select nested", SelectFields("detail.order.id"), `{"detail":{"order":{"id":7,"at":1},"x":2},"id":"e"}`, `{"detail":{"order":{"id":7}}}`, nil},
		{"select whole subtree", SelectFields("detail"), `{"detail":{"b":[1,{"c":2}],"a":null},"time":"t"}`, `{"detail":{"a":null,"b":[1,{"c":2}]}}`, nil},
		{"select overlapping", SelectFields("a.b", "a"), `{"a":{"b":1,"c":2},"d":3}`, `{"a":{"b":1,"c":2}}`, nil},
		{"select null is present", SelectFields("id"), `{"id":null}`, `{"id":null}`, nil},
		{"select absent", SelectFields("id"), `{"event_id":"e"}`, "", ErrFieldAbsent},
		{"select absent nested", SelectFields("detail.id"), `{"detail":{"other":1}}`, "", ErrFieldAbsent},
		{"select absent in empty object", SelectFields("detail.id"), `{"detail":{}}`, "", ErrFieldAbsent},
		{"select absent at top of empty", SelectFields("id"), `{}`, "", ErrFieldAbsent},
		{"select through arrays", SelectFields("items.sku"), `{"items":[{"sku":"a","at":1},{"sku":"b","at":2}],"t":0}`, `{"items":[{"sku":"a"},{"sku":"b"}]}`, nil},
		{"select through nested arrays", SelectFields("m.k"), `{"m":[[{"k":1,"z":0}],[]]}`, `{"m":[[{"k":1}],[]]}`, nil},
		{"select absent in one element", SelectFields("items.sku"), `{"items":[{"sku":"a"},{"qty":2}]}`, "", ErrFieldAbsent},
		{"select scalar elements kept", SelectFields("items.sku"), `{"items":[{"sku":"a","q":1},5,"x",null]}`, `{"items":[{"sku":"a"},5,"x",null]}`, nil},
		{"select scalar before the path ends", SelectFields("detail.id"), `{"detail":"plain","x":1}`, `{"detail":"plain"}`, nil},
		{"select top-level string", SelectFields("id"), `"just text"`, `"just text"`, nil},
		{"select top-level array", SelectFields("id"), `[{"id":1,"x":2},3]`, `[{"id":1},3]`, nil},
		{"select keeps order canonical", SelectFields("z", "a"), `{"z":1,"m":2,"a":3}`, `{"a":3,"z":1}`, nil},
		{"ignore one", IgnoreFields("time"), `{"time":"t1","id":"e-1"}`, `{"id":"e-1"}`, nil},
		{"ignore absent", IgnoreFields("time"), `{"id":"e-1"}`, `{"id":"e-1"}`, nil},
		{"ignore nested", IgnoreFields("headers.traceparent"), `{"headers":{"traceparent":"00-x","k":"v"},"id":1}`, `{"headers":{"k":"v"},"id":1}`, nil},
		{"ignore through arrays", IgnoreFields("items.at"), `{"items":[{"sku":"a","at":1},{"at":2},7]}`, `{"items":[{"sku":"a"},{},7]}`, nil},
		{"ignore overlapping", IgnoreFields("a", "a.b"), `{"a":{"b":1},"c":2}`, `{"c":2}`, nil},
		{"ignore all members", IgnoreFields("a", "b"), `{"b":{"x":[1]},"a":2}`, `{}`, nil},
		{"ignore last and first", IgnoreFields("a", "z"), `{"a":1,"m":2,"z":3}`, `{"m":2}`, nil},
		{"ignore unsorted", IgnoreFields("m"), `{"z":1,"m":{"q":[{"b":1,"a":2}]},"a":3}`, `{"a":3,"z":1}`, nil},
		{"ignore under a scalar", IgnoreFields("a.b"), `{"a":1}`, `{"a":1}`, nil},
		{"ignored member still checked", IgnoreFields("a"), `{"a":{"x":1,"x":2},"b":1}`, "", ErrInvalidPayload},
		{"duplicate of an ignored key", IgnoreFields("a"), `{"a":1,"b":2,"a":3}`, "", ErrInvalidPayload},
		{"invalid JSON in ignored member", IgnoreFields("a"), `{"a":[1,,2],"b":1}`, "", ErrInvalidPayload},
		{"under", IgnoreFields("time").Under("detail"), `{"source":"s","detail":{"time":1,"id":2}}`, `{"detail":{"id":2},"source":"s"}`, nil},
		{"select under keeps the rest", SelectFields("id").Under("detail"), `{"source":"s","detail":{"time":1,"id":2}}`, `{"detail":{"id":2},"source":"s"}`, nil},
		{"select under absent", SelectFields("id").Under("detail"), `{"source":"s","detail":{"time":1}}`, "", ErrFieldAbsent},
		{"bad path", SelectFields("a..b"), `{}`, "", ErrInvalidSelection},
		{"no select path", SelectFields(), `{}`, "", ErrInvalidSelection},
		{"empty path", IgnoreFields(""), `{}`, "", ErrInvalidSelection},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tc.sel.Canonicalize([]byte(tc.payload))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Canonicalize(%s) = %s, %v; want an error wrapping %v", tc.payload, got, err, tc.wantErr)
				}
				if errors.Is(tc.wantErr, ErrFieldAbsent) && !errors.Is(err, ErrInvalidPayload) {
					t.Fatalf("absent field error %v does not wrap ErrInvalidPayload", err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("Canonicalize(%s) = %s, %v; want %s", tc.payload, got, err, tc.want)
			}
			fp, err := tc.sel.Fingerprint([]byte(tc.payload))
			if want, _ := Fingerprint([]byte(tc.want)); err != nil || fp != want {
				t.Fatalf("Fingerprint = %s, %v; want %s (the fingerprint of the selected part)", fp, err, want)
			}
			app, err := tc.sel.AppendCanonical([]byte("prefix:"), []byte(tc.payload))
			if err != nil || string(app) != "prefix:"+tc.want {
				t.Fatalf("AppendCanonical = %s, %v", app, err)
			}
		})
	}
}

func TestSelectionAbsentError(t *testing.T) {
	t.Parallel()
	_, err := SelectFields("detail.order_id", "detail.b").Fingerprint([]byte(`{"detail":{"orderId":1,"b":2}}`))
	if !errors.Is(err, ErrFieldAbsent) || !strings.Contains(err.Error(), `"detail.order_id"`) {
		t.Fatalf("err = %v; want ErrFieldAbsent naming detail.order_id", err)
	}
}

func TestSelectionString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sel  Selection
		want string
	}{
		{Selection{}, "whole payload"},
		{IgnoreFields(), "whole payload"},
		{SelectFields("b", "a.c", "b"), "select a.c, b"},
		{IgnoreFields("time").Under("detail"), "ignore time under detail"},
		{SelectFields(""), "invalid selection"},
	} {
		if got := tc.sel.String(); got != tc.want {
			t.Errorf("String() = %q want %q", got, tc.want)
		}
	}
	if !(Selection{}).IsZero() || !IgnoreFields().IsZero() || SelectFields("a").IsZero() || SelectFields("").IsZero() {
		t.Error("IsZero is wrong")
	}
}

// An empty payload has the empty fingerprint whatever the selection: only
// another empty payload matches it.
func TestSelectionEmptyPayload(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", "  \n"} {
		if fp, err := SelectFields("id").Fingerprint([]byte(p)); fp != "" || err != nil {
			t.Errorf("Fingerprint(%q) = %q, %v", p, fp, err)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", "<a&b>", "quote\" back\\slash", "ctl\x01\x1f\t\n", "\u2028\u2029", "bad \xff\xfe utf8", "é 日本 🎉", "\xed\xa0\x80"} {
		enc, _ := json.Marshal(s)
		want, err := Fingerprint(enc)
		if err != nil {
			t.Fatal(err)
		}
		if got := FingerprintCanonical(AppendJSONString(nil, s)); got != want {
			t.Errorf("%q: FingerprintCanonical(AppendJSONString) = %s, want %s (Fingerprint of %s)", s, got, want, enc)
		}
	}
}

// FuzzAppendJSONString checks that the canonical encoding of any string
// fingerprints as its JSON encoding does.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "x", "\xff", "<>&", "\u2028", "a\"b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc, _ := json.Marshal(s)
		want, err := Fingerprint(enc)
		if err != nil {
			t.Fatalf("Fingerprint(%s): %v", enc, err)
		}
		if got := FingerprintCanonical(AppendJSONString(nil, s)); got != want {
			t.Fatalf("%q: %s, want %s", s, got, want)
		}
	})
}

// refNode is the reference implementation's selection tree.
type refNode struct {
	children map[string]*refNode
	leaf     bool
}

func refTree(paths []string) *refNode {
	root := &refNode{}
	for _, p := range paths {
		n := root
		for _, name := range strings.Split(p, ".") {
			if n.leaf {
				break
			}
			if n.children == nil {
				n.children = map[string]*refNode{}
			}
			if n.children[name] == nil {
				n.children[name] = &refNode{}
			}
			n = n.children[name]
		}
		n.leaf, n.children = true, nil
	}
	return root
}

var errRefAbsent = errors.New("absent")

// refSelect applies a selection to a decoded document, as Selection's
// documentation says, with encoding/json's values.
func refSelect(v any, n *refNode, ignore bool) (any, error) {
	switch t := v.(type) {
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			var err error
			if out[i], err = refSelect(e, n, ignore); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		out := map[string]any{}
		for k, val := range t {
			child := n.children[k]
			switch {
			case child == nil && ignore:
				out[k] = val
			case child == nil, child.leaf && ignore:
			case child.leaf:
				out[k] = val
			default:
				sub, err := refSelect(val, child, ignore)
				if err != nil {
					return nil, err
				}
				out[k] = sub
			}
		}
		if !ignore {
			for k := range n.children {
				if _, ok := t[k]; !ok {
					return nil, errRefAbsent
				}
			}
		}
		return out, nil
	}
	return v, nil
}

// fuzzPaths turns fuzz input into paths over a small alphabet of names, so
// that they often meet the document's members.
func fuzzPaths(spec string) []string {
	var paths []string
	for _, p := range strings.Split(spec, ",") {
		if p = strings.Trim(p, "."); p != "" && !strings.Contains(p, "..") {
			paths = append(paths, p)
		}
	}
	return paths
}

// FuzzSelection checks that selecting then canonicalizing never panics,
// agrees with a reference implementation over encoding/json, and does not
// depend on the order of the payload's members or of the paths.
func FuzzSelection(f *testing.F) {
	for _, s := range []struct{ doc, paths string }{
		{`{"id":"e-1","time":"t","detail":{"a":1,"b":[{"a":2,"c":3}]}}`, "id,detail.b.a"},
		{`{"a":{"b":{"c":1}},"a2":[1,[{"a":1}]]}`, "a.b,a2.a"},
		{`[{"x":1},{"y":2}]`, "x"},
		{`"text"`, "a"},
		{deepObjects(50), "a.a.a"},
		{`{"b":{"x":1,"x":2}}`, "a"},
		{`{"z":1,"y":{"q":[{"b":1,"a":2}]},"a":3}`, "y.q.a,z"},
	} {
		f.Add([]byte(s.doc), s.paths, false)
		f.Add([]byte(s.doc), s.paths, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, spec string, ignore bool) {
		paths := fuzzPaths(spec)
		if len(paths) == 0 {
			return
		}
		sel := SelectFields(paths...)
		if ignore {
			sel = IgnoreFields(paths...)
		}
		got, err := sel.Canonicalize(data)
		whole, werr := Canonicalize(data)
		if werr != nil {
			if err == nil {
				t.Fatalf("selection accepted %q, which Canonicalize refuses: %v", data, werr)
			}
			if !errors.Is(err, ErrInvalidPayload) {
				t.Fatalf("error %v does not wrap ErrInvalidPayload", err)
			}
			return
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(whole))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		ref, rerr := refSelect(v, refTree(paths), ignore)
		if rerr != nil {
			if !errors.Is(err, ErrFieldAbsent) || !errors.Is(err, ErrInvalidPayload) {
				t.Fatalf("%q under %v: err %v, want ErrFieldAbsent", data, sel, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("%q under %v: %v", data, sel, err)
		}
		refJSON, _ := json.Marshal(ref)
		want, err := Canonicalize(refJSON)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%q under %v:\n got %s\nwant %s (%v)", data, sel, got, want, err)
		}
		// The same document re-encoded (members in another order,
		// indented), and the paths in another order: the same result.
		re, _ := json.MarshalIndent(v, "", " ")
		rev := slices.Clone(paths)
		rand.Shuffle(len(rev), func(i, j int) { rev[i], rev[j] = rev[j], rev[i] })
		sel2 := SelectFields(rev...)
		if ignore {
			sel2 = IgnoreFields(rev...)
		}
		got2, err := sel2.Canonicalize(re)
		if err != nil || !bytes.Equal(got, got2) {
			t.Fatalf("re-encoded %s under %v: %s, %v; want %s", re, sel2, got2, err, got)
		}
	})
}
