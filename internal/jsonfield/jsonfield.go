// Package jsonfield reads one field of a JSON document by a dotted path,
// as the key sources of the Lambda wrappers and of the HTTP rules take an
// event's identity from a body field. It imports the standard library only.
package jsonfield

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrAbsent is the error, checked with errors.Is, of a document that has no
// value at the path: it is not JSON, a value on the way is not an object,
// or an object lacks the member. Get's other errors are about the value
// found.
var ErrAbsent = errors.New("field absent")

// absent is an error that is ErrAbsent, with its own message.
type absent struct{ msg string }

func (e *absent) Error() string        { return e.msg }
func (e *absent) Is(target error) bool { return target == ErrAbsent }

func absentf(format string, args ...any) error { return &absent{fmt.Sprintf(format, args...)} }

// Get returns the string, or the number's literal text, at path in doc (a
// field name, or a dotted path into nested objects). what names doc in
// errors ("body", "data"). An empty string and a value of another type are
// errors; so is a missing value, wrapping ErrAbsent.
func Get(what string, doc []byte, path []string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", absentf("%s is not JSON: %v", what, err)
	}
	for i, p := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return "", absentf("%q is not a JSON object", strings.Join(path[:i], "."))
		}
		if v, ok = obj[p]; !ok {
			return "", absentf("%s has no field %q", what, strings.Join(path[:i+1], "."))
		}
	}
	switch t := v.(type) {
	case string:
		if t == "" {
			return "", fmt.Errorf("%s field %q is empty", what, strings.Join(path, "."))
		}
		return t, nil
	case json.Number:
		return t.String(), nil
	}
	return "", fmt.Errorf("%s field %q is %s, want a string or a number", what, strings.Join(path, "."), kind(v))
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}
