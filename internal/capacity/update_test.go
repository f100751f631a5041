package capacity

import (
	"errors"
	"reflect"
	"testing"
)

func TestApplyUpdate(t *testing.T) {
	t.Parallel()
	key := Item{"pk": S("k")}
	rec := Item{"pk": S("k"), "status": S("succeeded"), "result": B(make([]byte, 100)), "attempts": N("1"),
		"names": {Kind: KindSS, Set: []string{"a"}}, "steps": {Kind: KindL, List: []Value{S("s1")}}}
	vals := map[string]Value{":st": S("in_progress"), ":one": N("1"), ":zero": N("0"), ":step": {Kind: KindL, List: []Value{S("s2")}},
		":none": {Kind: KindL}, ":names": {Kind: KindSS, Set: []string{"a", "b"}}, ":drop": {Kind: KindSS, Set: []string{"a"}},
		":half": N("0.5")}
	names := map[string]string{"#st": "status", "#res": "result", "#att": "attempts", "#c": "carried", "#steps": "steps", "#names": "names"}
	for _, tc := range []struct {
		name   string
		before Item
		expr   string
		want   Item
	}{
		{"SET a value, REMOVE an attribute", rec, "SET #st = :st REMOVE #res",
			Item{"pk": S("k"), "status": S("in_progress"), "attempts": N("1"), "names": rec["names"], "steps": rec["steps"]}},
		{"if_not_exists + :one, on an absent attribute, from the item before", rec,
			"SET #att = if_not_exists(#c, :zero) + :one, #c = if_not_exists(#c, :zero) + :one",
			merge(rec, Item{"attempts": N("1"), "carried": N("1")})},
		{"arithmetic reads the item before the update", rec, "SET #att = #att + :one, #c = #att - :half",
			merge(rec, Item{"attempts": N("2"), "carried": N("0.5")})},
		{"list_append(if_not_exists(steps, :none), :step) appends", rec,
			"SET #steps = list_append(if_not_exists(#steps, :none), :step)",
			merge(rec, Item{"steps": {Kind: KindL, List: []Value{S("s1"), S("s2")}}})},
		{"list_append on an item with no list", key, "SET #steps = list_append(if_not_exists(#steps, :none), :step)",
			Item{"pk": S("k"), "steps": {Kind: KindL, List: []Value{S("s2")}}}},
		{"ADD to a set keeps members once; ADD to a number sums", rec, "ADD #names :names, #att :one",
			merge(rec, Item{"names": {Kind: KindSS, Set: []string{"a", "b"}}, "attempts": N("2")})},
		{"ADD creates an absent attribute", key, "ADD #att :one", Item{"pk": S("k"), "attempts": N("1")}},
		{"DELETE the last member removes the set", rec, "DELETE #names :drop", without(rec, "names")},
		{"no item before: the update starts from the key", nil, "SET #st = :st", Item{"pk": S("k"), "status": S("in_progress")}},
		{"lower-case keywords, plain names, several clauses", rec, "set status = :st remove result add attempts :one",
			merge(without(rec, "result"), Item{"status": S("in_progress"), "attempts": N("2")})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ApplyUpdate(tc.before, key, Update{Expression: tc.expr, Names: names, Values: vals})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ApplyUpdate(%q)\n got %v\nwant %v", tc.expr, got, tc.want)
			}
		})
	}
}

func TestApplyUpdateErrors(t *testing.T) {
	t.Parallel()
	key := Item{"pk": S("k")}
	u := func(expr string) Update {
		return Update{Expression: expr, Names: map[string]string{"#a": "a"}, Values: map[string]Value{":v": S("x"), ":n": N("1")}}
	}
	for _, tc := range []struct {
		name, expr  string
		unsupported bool
	}{
		{"nested path", "SET a.b = :v", true},
		{"list index", "SET a[0] = :v", true},
		{"unknown function", "SET #a = size(#a)", true},
		{"unknown clause", "UPSERT #a = :v", true},
		{"empty", "", true},
		{"missing =", "SET #a :v", true},
		{"unknown name placeholder", "SET #b = :v", false},
		{"unknown value placeholder", "SET #a = :w", false},
		{"reads an absent attribute", "SET #a = b", false},
		{"arithmetic on a string", "SET #a = :v + :n", false},
		{"list_append of a string", "SET #a = list_append(:v, :v)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ApplyUpdate(nil, key, u(tc.expr))
			if err == nil {
				t.Fatalf("ApplyUpdate(%q): no error", tc.expr)
			}
			if got := errors.Is(err, ErrUnsupported); got != tc.unsupported {
				t.Errorf("ApplyUpdate(%q) = %v; errors.Is(ErrUnsupported) = %v, want %v", tc.expr, err, got, tc.unsupported)
			}
		})
	}
}

func merge(a, b Item) Item {
	out := Item{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func without(a Item, name string) Item {
	out := merge(a, nil)
	delete(out, name)
	return out
}
