package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
)

// Fingerprint returns the hex SHA-256 of the canonical form of the JSON
// payload: object keys sorted, insignificant whitespace removed, numbers kept
// exactly as sent (1.0 and 1 differ), strings re-encoded without HTML
// escaping. An empty payload has the empty fingerprint, which matches only
// another empty payload. Invalid JSON, a duplicate object key or trailing
// data gives an error wrapping ErrInvalidPayload.
func Fingerprint(payload []byte) (string, error) {
	if len(bytes.TrimSpace(payload)) == 0 {
		return "", nil
	}
	canon, err := Canonicalize(payload)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// Canonicalize returns the canonical form of a JSON document, the input of
// Fingerprint. Errors wrap ErrInvalidPayload.
func Canonicalize(payload []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var buf bytes.Buffer
	buf.Grow(len(payload))
	if err := canonValue(dec, &buf); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the JSON value", ErrInvalidPayload)
	}
	return buf.Bytes(), nil
}

var errDuplicateKey = errors.New("duplicate object key")

func canonValue(dec *json.Decoder, buf *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return canonObject(dec, buf)
		case '[':
			buf.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					buf.WriteByte(',')
				}
				if err := canonValue(dec, buf); err != nil {
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
		writeString(buf, t)
	case json.Number:
		buf.WriteString(string(t))
	case bool:
		if t {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case nil:
		buf.WriteString("null")
	}
	return nil
}

type member struct {
	key string
	val []byte
}

func canonObject(dec *json.Decoder, buf *bytes.Buffer) error {
	var members []member
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
		if err := canonValue(dec, &vb); err != nil {
			return err
		}
		members = append(members, member{k, vb.Bytes()})
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	sort.Slice(members, func(i, j int) bool { return members[i].key < members[j].key })
	buf.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].key == m.key {
				return fmt.Errorf("%w %q", errDuplicateKey, m.key)
			}
			buf.WriteByte(',')
		}
		writeString(buf, m.key)
		buf.WriteByte(':')
		buf.Write(m.val)
	}
	buf.WriteByte('}')
	return nil
}

func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	buf.Truncate(buf.Len() - 1) // Encode appends a newline
}
