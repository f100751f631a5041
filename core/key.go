package core

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

const (
	// MinKeyLen is the shortest key accepted verbatim.
	MinKeyLen = 8
	// MaxKeyLen is the longest key accepted verbatim.
	MaxKeyLen = 128
	// MaxSourceLen is the longest free-form key source DeriveKey accepts, in
	// bytes, summed over its parts.
	MaxSourceLen = 1024
	// DerivedKeyPrefix starts every key made by DeriveKey.
	DerivedKeyPrefix = "sha256:"
)

// ValidateKey reports whether key may be used verbatim: 8 to 128 characters
// of [A-Za-z0-9:_-]. The error wraps ErrInvalidKey.
func ValidateKey(key string) error {
	if len(key) < MinKeyLen || len(key) > MaxKeyLen {
		return fmt.Errorf("%w: length %d, want %d to %d characters", ErrInvalidKey, len(key), MinKeyLen, MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if !keyChar(key[i]) {
			return fmt.Errorf("%w: character %q at offset %d, want [A-Za-z0-9:_-]", ErrInvalidKey, key[i], i)
		}
	}
	return nil
}

func keyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == ':' || c == '_' || c == '-'
}

// DeriveKey turns free-form sources (a header value, a body field, a caller
// identity, an action name) into a fixed-length key, so that no user data is
// stored in the table's key. Every part must be non-empty and free of control
// characters, and the parts together at most MaxSourceLen bytes; otherwise
// the error wraps ErrInvalidKey. Parts are length-prefixed before hashing, so
// ("ab","c") and ("a","bc") give different keys. The result is
// DerivedKeyPrefix followed by 64 hex digits, itself a valid key.
func DeriveKey(parts ...string) (string, error) {
	if len(parts) == 0 {
		return "", fmt.Errorf("%w: no key source", ErrInvalidKey)
	}
	total := 0
	h := sha256.New()
	var prefix [21]byte // a part's length in decimal and ':'
	for i, p := range parts {
		if p == "" {
			return "", fmt.Errorf("%w: key part %d is empty", ErrInvalidKey, i)
		}
		if strings.IndexFunc(p, isControl) >= 0 {
			return "", fmt.Errorf("%w: key part %d has a control character", ErrInvalidKey, i)
		}
		total += len(p)
		h.Write(append(strconv.AppendInt(prefix[:0], int64(len(p)), 10), ':'))
		h.Write([]byte(p))
	}
	if total > MaxSourceLen {
		return "", fmt.Errorf("%w: key source is %d bytes, at most %d", ErrInvalidKey, total, MaxSourceLen)
	}
	return DerivedKeyPrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// IsDerivedKey reports whether key has the form of a key DeriveKey makes:
// DerivedKeyPrefix followed by 64 lower-case hex digits. Such a key is a
// SHA-256 digest of its parts and shows nothing of them, so it can be
// logged and printed where a key given verbatim is shown only as its hash.
func IsDerivedKey(key string) bool {
	hexPart, ok := strings.CutPrefix(key, DerivedKeyPrefix)
	if !ok || len(hexPart) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(hexPart); i++ {
		if c := hexPart[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
