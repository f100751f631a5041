package capacity

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Kind is an attribute value's DynamoDB data type.
type Kind uint8

// The data types, named as in DynamoDB's JSON wire format.
const (
	KindS Kind = iota + 1
	KindN
	KindB
	KindBOOL
	KindNULL
	KindSS
	KindNS
	KindBS
	KindL
	KindM
)

// kindNames are the wire names of the kinds, in Kind order from KindS.
var kindNames = [...]string{"S", "N", "B", "BOOL", "NULL", "SS", "NS", "BS", "L", "M"}

// String returns the kind's wire name ("S", "N", ...), or "?" for the zero Kind.
func (k Kind) String() string {
	if k < KindS || int(k) > len(kindNames) {
		return "?"
	}
	return kindNames[k-1]
}

// Value is one attribute value. The zero Value is invalid (Kind 0).
type Value struct {
	// Kind is the data type.
	Kind Kind
	// Scalar is an S value's text, an N value's text as sent, a B value's
	// raw bytes (not base64), or a BOOL value's "true" or "false".
	Scalar string
	// Set holds the members of an SS, NS or BS value (BS: raw bytes).
	Set []string
	// List holds the elements of an L value.
	List []Value
	// Map holds the elements of an M value.
	Map map[string]Value
}

// Item is an item or a key: attribute name to value.
type Item map[string]Value

// S returns a string Value.
func S(s string) Value { return Value{Kind: KindS, Scalar: s} }

// N returns a number Value of the given text.
func N(text string) Value { return Value{Kind: KindN, Scalar: text} }

// B returns a binary Value of raw bytes b.
func B(b []byte) Value { return Value{Kind: KindB, Scalar: string(b)} }

// errShape is returned for a wire value that is not exactly one data type.
var errShape = errors.New("capacity: an attribute value must have exactly one data type")

// UnmarshalJSON decodes v from DynamoDB's JSON wire format, for example
// {"S": "abc"}, {"N": "12.5"}, {"B": "<base64>"}, {"L": [{"S": "x"}]}.
func (v *Value) UnmarshalJSON(b []byte) error {
	var w map[string]json.RawMessage
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if len(w) != 1 {
		return errShape
	}
	for name, raw := range w {
		return v.decode(name, raw)
	}
	return nil
}

// decode sets v to the value of wire type name whose JSON is raw.
func (v *Value) decode(name string, raw json.RawMessage) error {
	var err error
	switch name {
	case "S", "N":
		var s string
		err = json.Unmarshal(raw, &s)
		*v = Value{Kind: KindS, Scalar: s}
		if name == "N" {
			v.Kind = KindN
		}
	case "B":
		var b []byte // encoding/json decodes base64 into []byte
		err = json.Unmarshal(raw, &b)
		*v = B(b)
	case "BOOL":
		var t bool
		err = json.Unmarshal(raw, &t)
		*v = Value{Kind: KindBOOL, Scalar: fmt.Sprint(t)}
	case "NULL":
		*v = Value{Kind: KindNULL}
	case "SS", "NS":
		*v = Value{Kind: KindSS}
		if name == "NS" {
			v.Kind = KindNS
		}
		err = json.Unmarshal(raw, &v.Set)
	case "BS":
		var set [][]byte
		err = json.Unmarshal(raw, &set)
		*v = Value{Kind: KindBS, Set: make([]string, len(set))}
		for i, m := range set {
			v.Set[i] = string(m)
		}
	case "L":
		*v = Value{Kind: KindL}
		err = json.Unmarshal(raw, &v.List)
	case "M":
		*v = Value{Kind: KindM}
		err = json.Unmarshal(raw, &v.Map)
	default:
		return fmt.Errorf("capacity: unknown attribute value type %q", name)
	}
	if err != nil {
		return fmt.Errorf("capacity: %s value: %w", name, err)
	}
	return nil
}

// FromAttributeValue converts an AWS SDK attribute value (nil gives the zero
// Value).
func FromAttributeValue(av types.AttributeValue) Value {
	switch a := av.(type) {
	case *types.AttributeValueMemberS:
		return S(a.Value)
	case *types.AttributeValueMemberN:
		return N(a.Value)
	case *types.AttributeValueMemberB:
		return B(a.Value)
	case *types.AttributeValueMemberBOOL:
		return Value{Kind: KindBOOL, Scalar: fmt.Sprint(a.Value)}
	case *types.AttributeValueMemberNULL:
		return Value{Kind: KindNULL}
	case *types.AttributeValueMemberSS:
		return Value{Kind: KindSS, Set: a.Value}
	case *types.AttributeValueMemberNS:
		return Value{Kind: KindNS, Set: a.Value}
	case *types.AttributeValueMemberBS:
		set := make([]string, len(a.Value))
		for i, m := range a.Value {
			set[i] = string(m)
		}
		return Value{Kind: KindBS, Set: set}
	case *types.AttributeValueMemberL:
		list := make([]Value, len(a.Value))
		for i, e := range a.Value {
			list[i] = FromAttributeValue(e)
		}
		return Value{Kind: KindL, List: list}
	case *types.AttributeValueMemberM:
		return Value{Kind: KindM, Map: FromItem(a.Value)}
	}
	return Value{}
}

// FromItem converts an AWS SDK item.
func FromItem(item map[string]types.AttributeValue) Item {
	out := make(Item, len(item))
	for name, av := range item {
		out[name] = FromAttributeValue(av)
	}
	return out
}
