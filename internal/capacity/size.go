package capacity

import (
	"strconv"
	"strings"
)

// Size returns the size of item in bytes as DynamoDB counts it for capacity
// units and for its item size limit: for each attribute, the UTF-8 length of
// its name plus the size of its value (ValueSize). A nil item has size 0.
func Size(item Item) int {
	n := 0
	for name, v := range item {
		n += len(name) + ValueSize(v)
	}
	return n
}

// ValueSize returns the size of one attribute value in bytes, without its
// name: a string's UTF-8 length; a binary value's raw length; a number's
// stored size (numberSize); 1 for a boolean or a null; the sum of a set's
// members; 3 bytes for a list or a map, plus 1 byte and the size of each
// element (for a map, with the element's name). The zero Value has size 0.
func ValueSize(v Value) int {
	switch v.Kind {
	case KindS, KindB:
		return len(v.Scalar)
	case KindN:
		return numberSize(v.Scalar)
	case KindBOOL, KindNULL:
		return 1
	case KindSS, KindBS:
		n := 0
		for _, m := range v.Set {
			n += len(m)
		}
		return n
	case KindNS:
		n := 0
		for _, m := range v.Set {
			n += numberSize(m)
		}
		return n
	case KindL:
		n := 3
		for _, e := range v.List {
			n += 1 + ValueSize(e)
		}
		return n
	case KindM:
		n := 3
		for name, e := range v.Map {
			n += 1 + len(name) + ValueSize(e)
		}
		return n
	}
	return 0
}

// numberSize returns the stored size of a number given as text (DynamoDB's
// wire form: an optional sign, digits with an optional decimal point, an
// optional exponent). DynamoDB keeps the significant digits (leading and
// trailing zeros trimmed) in base-100 digits aligned on the decimal point,
// plus one byte of exponent, plus one for a negative number: "12" is 2
// bytes, "123" and "1.2" are 3, "0" is 1. Text that is not a number is
// counted at one byte per two characters plus two, an over-estimate.
func numberSize(text string) int {
	digits, exp, neg, ok := parseNumber(text)
	if !ok {
		return (len(text)+1)/2 + 2
	}
	if digits == "" {
		return 1 // zero
	}
	// The first significant digit has weight 10^exp, the last
	// 10^(exp-len+1); base-100 digits cover the weights (2k+1, 2k).
	last := exp - len(digits) + 1
	n := 1 + floorDiv2(exp) - floorDiv2(last) + 1
	if neg {
		n++
	}
	return n
}

func floorDiv2(x int) int {
	if x >= 0 {
		return x / 2
	}
	return -((-x + 1) / 2)
}

// parseNumber splits a number's text into its significant digits (no
// leading or trailing zeros; "" for zero), the decimal exponent of the first
// of them, and its sign.
func parseNumber(text string) (digits string, exp int, neg bool, ok bool) {
	s := text
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg, s = s[0] == '-', s[1:]
	}
	mant, e := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		x, err := strconv.Atoi(s[i+1:])
		if err != nil {
			return "", 0, false, false
		}
		mant, e = s[:i], x
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" && frac == "" {
		return "", 0, false, false
	}
	all := intPart + frac
	for _, c := range all {
		if c < '0' || c > '9' {
			return "", 0, false, false
		}
	}
	lead := len(all) - len(strings.TrimLeft(all, "0"))
	digits = strings.TrimRight(all[lead:], "0")
	if digits == "" {
		return "", 0, false, true
	}
	// The digit at index i of all has weight 10^(len(intPart)-1-i+e).
	return digits, len(intPart) - 1 - lead + e, neg, true
}
