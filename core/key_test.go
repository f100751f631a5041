package core

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateKey(t *testing.T) {
	tests := []struct {
		name string
		key  string
		ok   bool
	}{
		{"event key", "evt:order-42:charge", true},
		{"eight chars", "abcdefgh", true},
		{"seven chars", "abcdefg", false},
		{"empty", "", false},
		{"128 chars", strings.Repeat("a", 128), true},
		{"129 chars", strings.Repeat("a", 129), false},
		{"space", "evt:order 42", false},
		{"slash", "evt/order/42", false},
		{"unicode", "evt:commandé-1", false},
		{"underscore", "evt_order_42_x", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := ValidateKey(tc.key)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidKey)) {
				t.Fatalf("ValidateKey(%q) = %v, want ok=%v", tc.key, err, tc.ok)
			}
		})
	}
}

func TestDeriveKey(t *testing.T) {
	k1, err := DeriveKey("tenant-a", "POST /orders", "header-value")
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateKey(k1); err != nil || !strings.HasPrefix(k1, DerivedKeyPrefix) || len(k1) != len(DerivedKeyPrefix)+64 {
		t.Fatalf("derived key %q invalid: %v", k1, err)
	}
	k2, _ := DeriveKey("tenant-b", "POST /orders", "header-value")
	if k1 == k2 {
		t.Fatal("different scopes gave the same key")
	}
	a, _ := DeriveKey("ab", "c")
	b, _ := DeriveKey("a", "bc")
	if a == b {
		t.Fatal("part boundaries are not part of the key")
	}
	again, _ := DeriveKey("tenant-a", "POST /orders", "header-value")
	if again != k1 {
		t.Fatal("DeriveKey is not deterministic")
	}
	for name, parts := range map[string][]string{
		"no parts":  nil,
		"empty":     {"a", ""},
		"control":   {"a\nb"},
		"too large": {strings.Repeat("x", MaxSourceLen+1)},
	} {
		if _, err := DeriveKey(parts...); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("%s: err = %v, want ErrInvalidKey", name, err)
		}
	}
}
