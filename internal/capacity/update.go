package capacity

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// ErrUnsupported is wrapped by the errors of ApplyUpdate for an update
// expression it cannot apply (nested paths, unknown functions). Checked with
// errors.Is.
var ErrUnsupported = errors.New("capacity: unsupported update expression")

// Update is an UpdateItem's expression and its placeholders, as sent.
type Update struct {
	Expression string
	Names      map[string]string
	Values     map[string]Value
}

// ApplyUpdate returns the item an update makes of before (nil: no item; the
// update then starts from key). Every operand is read from before, as
// DynamoDB does. It supports SET (with if_not_exists, list_append, + and -),
// REMOVE, ADD (numbers and sets) and DELETE (sets), on top-level attributes.
func ApplyUpdate(before, key Item, u Update) (Item, error) {
	clauses, err := parseUpdate(u.Expression)
	if err != nil {
		return nil, err
	}
	src := before
	if src == nil {
		src = key
	}
	after := make(Item, len(src)+4)
	for k, v := range src {
		after[k] = v
	}
	for _, c := range clauses {
		for _, a := range c.actions {
			if err := applyAction(c.verb, a, src, after, u); err != nil {
				return nil, err
			}
		}
	}
	return after, nil
}

func applyAction(verb string, a action, src, after Item, u Update) error {
	name, err := u.name(a.path)
	if err != nil {
		return err
	}
	if verb == "REMOVE" {
		delete(after, name)
		return nil
	}
	v, err := u.eval(a.value, src)
	if err != nil {
		return err
	}
	switch verb {
	case "SET":
		after[name] = v
		return nil
	case "ADD":
		cur, ok := src[name]
		if !ok {
			after[name] = v
			return nil
		}
		sum, err := add(cur, v)
		after[name] = sum
		return err
	}
	cur, ok := src[name] // DELETE
	if !ok {
		return nil
	}
	rest := Value{Kind: cur.Kind}
	for _, m := range cur.Set {
		if !slices.Contains(v.Set, m) {
			rest.Set = append(rest.Set, m)
		}
	}
	if len(rest.Set) == 0 {
		delete(after, name)
	} else {
		after[name] = rest
	}
	return nil
}

// name resolves a path token (an attribute name or a #placeholder).
func (u Update) name(tok string) (string, error) {
	if strings.HasPrefix(tok, "#") {
		n, ok := u.Names[tok]
		if !ok {
			return "", fmt.Errorf("capacity: no expression attribute name %s", tok)
		}
		return n, nil
	}
	if strings.ContainsAny(tok, ".[]") {
		return "", fmt.Errorf("%w: nested path %s", ErrUnsupported, tok)
	}
	return tok, nil
}

// eval computes an operand against src.
func (u Update) eval(o *operand, src Item) (Value, error) {
	switch {
	case o.value != "":
		v, ok := u.Values[o.value]
		if !ok {
			return Value{}, fmt.Errorf("capacity: no expression attribute value %s", o.value)
		}
		return v, nil
	case o.fn == "if_not_exists":
		name, err := u.name(o.args[0].path)
		if err != nil {
			return Value{}, err
		}
		if v, ok := src[name]; ok {
			return v, nil
		}
		return u.eval(o.args[1], src)
	case o.fn == "list_append", o.fn == "+", o.fn == "-":
		a, err := u.eval(o.args[0], src)
		if err != nil {
			return Value{}, err
		}
		b, err := u.eval(o.args[1], src)
		if err != nil {
			return Value{}, err
		}
		return combine(o.fn, a, b)
	case o.path != "":
		name, err := u.name(o.path)
		if err != nil {
			return Value{}, err
		}
		v, ok := src[name]
		if !ok {
			return Value{}, fmt.Errorf("capacity: the update reads %s, which the item does not have", name)
		}
		return v, nil
	}
	return Value{}, fmt.Errorf("%w: function %s", ErrUnsupported, o.fn)
}

func combine(fn string, a, b Value) (Value, error) {
	switch fn {
	case "list_append":
		if a.Kind != KindL || b.Kind != KindL {
			return Value{}, errors.New("capacity: list_append of a non-list")
		}
		return Value{Kind: KindL, List: append(slices.Clip(a.List), b.List...)}, nil
	case "-":
		x, y, err := rats(a, b)
		if err != nil {
			return Value{}, err
		}
		return N(ratText(x.Sub(x, y))), nil
	}
	if a.Kind != KindN || b.Kind != KindN {
		return Value{}, errors.New("capacity: arithmetic on a non-number")
	}
	return add(a, b)
}

// rats parses two number values.
func rats(a, b Value) (*big.Rat, *big.Rat, error) {
	if a.Kind != KindN || b.Kind != KindN {
		return nil, nil, errors.New("capacity: arithmetic on a non-number")
	}
	x, okx := new(big.Rat).SetString(a.Scalar)
	y, oky := new(big.Rat).SetString(b.Scalar)
	if !okx || !oky {
		return nil, nil, fmt.Errorf("capacity: %q or %q is not a number", a.Scalar, b.Scalar)
	}
	return x, y, nil
}

// add is ADD's (and +'s) sum of two numbers, or union of two sets.
func add(a, b Value) (Value, error) {
	if a.Kind != b.Kind {
		return Value{}, fmt.Errorf("capacity: cannot add %s and %s", a.Kind, b.Kind)
	}
	switch a.Kind {
	case KindN:
		x, y, err := rats(a, b)
		if err != nil {
			return Value{}, err
		}
		return N(ratText(x.Add(x, y))), nil
	case KindSS, KindNS, KindBS:
		out := Value{Kind: a.Kind, Set: slices.Clone(a.Set)}
		for _, m := range b.Set {
			if !slices.Contains(out.Set, m) {
				out.Set = append(out.Set, m)
			}
		}
		return out, nil
	}
	return Value{}, fmt.Errorf("capacity: cannot add values of type %s", a.Kind)
}

// ratText writes r in decimal: exact for the sums of decimal numbers (their
// denominators divide a power of ten), at most 38 decimals otherwise.
func ratText(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	s := strings.TrimRight(r.FloatString(38), "0")
	return strings.TrimSuffix(s, ".")
}
