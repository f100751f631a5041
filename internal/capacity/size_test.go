package capacity

import (
	"encoding/json"
	"strings"
	"testing"
)

// The rules of the Developer Guide's "Item sizes and formats", one case each.
func TestSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		item Item
		want int
	}{
		{"string: name and value, UTF-8 bytes", Item{"id": S("abc")}, 2 + 3},
		{"string: multi-byte UTF-8", Item{"név": S("€")}, 4 + 3},
		{"binary: raw length, not base64", Item{"b": B([]byte{0, 1, 2, 3, 4})}, 1 + 5},
		{"boolean: 1 byte", Item{"ok": {Kind: KindBOOL, Scalar: "true"}}, 2 + 1},
		{"null: 1 byte", Item{"n": {Kind: KindNULL}}, 1 + 1},
		{"number: 1 byte per two significant digits plus 1", Item{"n": N("1234")}, 1 + 3},
		{"empty list: 3 bytes", Item{"l": {Kind: KindL}}, 1 + 3},
		{"empty map: 3 bytes", Item{"m": {Kind: KindM}}, 1 + 3},
		{"list: 3 bytes, 1 per element", Item{"l": {Kind: KindL, List: []Value{S("ab"), S("c")}}}, 1 + 3 + (1 + 2) + (1 + 1)},
		{"map: 3 bytes, 1 per element, element names", Item{"m": {Kind: KindM, Map: Item{"k": S("v"), "kk": N("5")}}},
			1 + 3 + (1 + 1 + 1) + (1 + 2 + 2)},
		{"string set: sum of members", Item{"ss": {Kind: KindSS, Set: []string{"a", "bc"}}}, 2 + 3},
		{"number set: sum of members' sizes", Item{"ns": {Kind: KindNS, Set: []string{"1", "12345"}}}, 2 + 2 + 4},
		{"binary set: raw lengths", Item{"bs": {Kind: KindBS, Set: []string{"\x00\x01", "\x02"}}}, 2 + 3},
		{"nested list in map", Item{"m": {Kind: KindM, Map: Item{"l": {Kind: KindL, List: []Value{{Kind: KindNULL}}}}}},
			1 + 3 + (1 + 1 + (3 + 1 + 1))},
		{"nil item", nil, 0},
		{"an item as a store writes it", Item{"pk": S("evt:order-1:charge"), "status": S("in_progress"),
			"lease_until_ms": N("1764676830000"), "expires_at": N("1764680400"), "attempts": N("1")},
			(2 + 18) + (6 + 11) + (14 + 6) + (10 + 5) + (8 + 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Size(tc.item); got != tc.want {
				t.Errorf("Size = %d, want %d", got, tc.want)
			}
		})
	}
}

// Numbers: significant digits in base-100 digits aligned on the decimal
// point, plus 1 byte, plus 1 for a negative number.
func TestNumberSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text string
		want int
	}{
		{"0", 1}, {"0.000", 1}, {"-0", 1},
		{"5", 2}, {"12", 2}, {"10", 2}, {"100", 2}, {"1000000", 2},
		{"123", 3}, {"1234", 3}, {"12345", 4},
		{"1.2", 3}, {"0.12", 2}, {".5", 2}, {"0.5", 2}, {"1.23", 3}, {"12.3", 3},
		{"-5", 3}, {"-1234", 4},
		{"1e5", 2}, {"1.5E+3", 2}, {"15e-1", 3}, {"+7", 2},
		{"007", 2}, {"7.000", 2},
		{"1764676830000", 6}, // an epoch in milliseconds
		{"1764680400", 5},    // an epoch in seconds
		{"99999999999999999999999999999999999999", 20},
		{"abc", 4}, {"", 2}, {"1e", 3}, // not numbers: over-estimated
	} {
		t.Run(tc.text, func(t *testing.T) {
			if got := numberSize(tc.text); got != tc.want {
				t.Errorf("numberSize(%q) = %d, want %d", tc.text, got, tc.want)
			}
		})
	}
}

// The examples of the Developer Guide ("DynamoDB read and write operations",
// "Managing settings on DynamoDB provisioned capacity tables") and of the
// pricing pages' key terms.
func TestUnitsDocumentedExamples(t *testing.T) {
	t.Parallel()
	const kb = 1024
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		{"reading a 3,500-byte item consumes the same as a 4 KB item", ReadUnits(3500, true), 1},
		{"8 KB strongly consistent: 2 read units", ReadUnits(8*kb, true), 2},
		{"8 KB eventually consistent: 1 read unit", ReadUnits(8*kb, false), 1},
		{"8 KB transactional: 4 read units", TransactionFactor * ReadUnits(8*kb, true), 4},
		{"GetItem of 10 KB is rounded to 12 KB", ReadUnits(10*kb, true), 3},
		{"BatchGetItem of 1.5 KB and 6.5 KB items: 4 KB + 8 KB", ReadUnits(3*kb/2, true) + ReadUnits(13*kb/2, true), 3},
		{"Query of 10 items, 40.8 KB in all: 44 KB", ReadUnits(408*kb/10, true), 11},
		{"Query of 1500 items of 64 bytes: 96 KB", ReadUnits(1500*64, true), 24},
		{"eventually consistent reads of 80 KB: 10 units", ReadUnits(80*kb, false), 10},
		{"an item that does not exist: 1 unit strongly consistent", ReadUnits(0, true), 1},
		{"an item that does not exist: 0.5 unit eventually consistent", ReadUnits(0, false), 0.5},
		{"writing a 500-byte item consumes the same as 1 KB", WriteUnits(500), 1},
		{"512 bytes / 1 KB = 0.5, or 1", WriteUnits(512), 1},
		{"put or delete of 1.6 KB is rounded to 2 KB", WriteUnits(1638), 2},
		{"BatchWriteItem of 500 bytes and 3.5 KB: 1 KB + 4 KB", WriteUnits(500) + WriteUnits(3584), 5},
		{"a standard write of 3 KB: 3 write units", WriteUnits(3 * kb), 3},
		{"a transactional write of 3 KB: 6 write units", TransactionFactor * WriteUnits(3*kb), 6},
		{"exactly 1 KB is one unit", WriteUnits(kb), 1},
		{"1 KB and a byte is two", WriteUnits(kb + 1), 2},
		{"exactly 4 KB is one read unit", ReadUnits(4*kb, true), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %g units, want %g", tc.got, tc.want)
			}
		})
	}
}

func TestValueWireFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, json string
		want       int // ValueSize
		kind       Kind
	}{
		{"S", `{"S":"héllo"}`, 6, KindS},
		{"N", `{"N":"-12.5"}`, 4, KindN},
		{"B base64", `{"B":"AAECAw=="}`, 4, KindB},
		{"BOOL", `{"BOOL":false}`, 1, KindBOOL},
		{"NULL", `{"NULL":true}`, 1, KindNULL},
		{"SS", `{"SS":["a","bb"]}`, 3, KindSS},
		{"NS", `{"NS":["1","22"]}`, 4, KindNS},
		{"BS", `{"BS":["AA==","AAE="]}`, 3, KindBS},
		{"empty L", `{"L":[]}`, 3, KindL},
		{"L", `{"L":[{"S":"x"},{"N":"1"}]}`, 3 + 2 + 3, KindL},
		{"M", `{"M":{"k":{"S":"v"}}}`, 3 + 1 + 1 + 1, KindM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v Value
			if err := json.Unmarshal([]byte(tc.json), &v); err != nil {
				t.Fatal(err)
			}
			if v.Kind != tc.kind || ValueSize(v) != tc.want {
				t.Errorf("%s: kind %s size %d, want %s %d", tc.json, v.Kind, ValueSize(v), tc.kind, tc.want)
			}
		})
	}
	for _, bad := range []string{`{}`, `{"S":"a","N":"1"}`, `{"X":"a"}`, `{"B":"!!"}`, `{"S":1}`, `[]`} {
		var v Value
		if err := json.Unmarshal([]byte(bad), &v); err == nil {
			t.Errorf("%s decoded as %+v, want an error", bad, v)
		}
	}
}

func TestKindString(t *testing.T) {
	t.Parallel()
	var names []string
	for k := KindS; k <= KindM; k++ {
		names = append(names, k.String())
	}
	if got := strings.Join(names, " "); got != "S N B BOOL NULL SS NS BS L M" {
		t.Errorf("kinds: %s", got)
	}
	if Kind(0).String() != "?" || Kind(99).String() != "?" {
		t.Error("invalid kinds must print ?")
	}
}
