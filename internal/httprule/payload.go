package httprule

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/idemgo/idem/core"
)

// MaxBodyDepth is the deepest nesting of arrays and objects accepted in a
// JSON request body: the fingerprint's canonicalizer refuses JSON nested
// deeper than core.MaxDepth, and the fingerprint (Payload) puts the body one
// level down.
const MaxBodyDepth = core.MaxDepth - 1

// Payload returns the JSON that fingerprints a request: its method, its
// path and its body, as {"method":..,"path":..,"json":<body>} for a JSON
// body (canonical: key order and whitespace do not count),
// {"method":..,"path":..,"text":"<body>"} for other UTF-8 text and
// {"method":..,"path":..,"base64":"<body>"} for binary data; an empty body
// is left out. The error, for a body that opens with '[' or '{' and nests
// arrays and objects deeper than MaxBodyDepth, wraps core.ErrInvalidPayload.
func Payload(method, path string, body []byte) ([]byte, error) {
	return SelectedPayload(method, path, body, core.Selection{})
}

// SelectedPayload is Payload with a JSON body under sel (only the part sel
// covers): the document whose fingerprint Fingerprint computes under sel.
// The errors are Payload's, and a selected field absent from a JSON body
// (core.ErrFieldAbsent); all wrap core.ErrInvalidPayload.
func SelectedPayload(method, path string, body []byte, sel core.Selection) ([]byte, error) {
	if nestsDeeper(body, MaxBodyDepth) {
		return nil, fmt.Errorf("%w: body nests arrays and objects deeper than %d", core.ErrInvalidPayload, MaxBodyDepth)
	}
	p := struct {
		Method string          `json:"method"`
		Path   string          `json:"path"`
		JSON   json.RawMessage `json:"json,omitempty"`
		Text   *string         `json:"text,omitempty"`
		Base64 []byte          `json:"base64,omitempty"`
	}{Method: method, Path: path}
	var c []byte
	var cerr error
	if len(body) > 0 {
		c, cerr = sel.Canonicalize(body)
	}
	switch {
	case len(body) == 0:
	case cerr == nil:
		p.JSON = c
	case errors.Is(cerr, core.ErrFieldAbsent) || errors.Is(cerr, core.ErrInvalidSelection):
		return nil, cerr
	case utf8.Valid(body):
		s := string(body)
		p.Text = &s
	default:
		p.Base64 = body
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", core.ErrInvalidPayload, err)
	}
	return b, nil
}

// nestsDeeper reports whether b, a document that opens with '[' or '{'
// after optional whitespace, has more than limit arrays and objects open at
// once. Brackets inside strings do not count; the rest of the syntax is not
// checked.
func nestsDeeper(b []byte, limit int) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	if len(t) == 0 || (t[0] != '[' && t[0] != '{') {
		return false
	}
	depth, inString, escaped := 0, false, false
	for _, c := range t {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > limit {
				return true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return false
}

// Fingerprint returns the fingerprint of a request, equal to
// core.Fingerprint of Payload(method, path, body) without sel, computed
// with one canonicalization of the body: the JSON of Payload is assembled
// in canonical form around the body's canonical form (under sel, which
// applies to the body only: the method and the path are always covered)
// or, for a body that is not JSON, its text or base64. The errors are
// Payload's, and a selected field absent from a JSON body
// (core.ErrFieldAbsent); all wrap core.ErrInvalidPayload.
func Fingerprint(method, path string, body []byte, sel core.Selection) (string, error) {
	if nestsDeeper(body, MaxBodyDepth) {
		return "", fmt.Errorf("%w: body nests arrays and objects deeper than %d", core.ErrInvalidPayload, MaxBodyDepth)
	}
	// Members in key order: base64, json, method, path, text.
	buf := docPool.Get().(*[]byte)
	doc := append(slices.Grow((*buf)[:0], len(body)+len(method)+len(path)+40), '{')
	defer func() {
		if cap(doc) <= maxPooledDoc {
			*buf = doc[:0]
			docPool.Put(buf)
		}
	}()
	text := false
	if len(body) > 0 {
		withBody, err := sel.AppendCanonical(append(doc, `"json":`...), body)
		switch {
		case err == nil:
			doc = append(withBody, ',')
		case errors.Is(err, core.ErrFieldAbsent) || errors.Is(err, core.ErrInvalidSelection):
			return "", err
		case utf8.Valid(body):
			text = true
		default:
			doc = append(base64.StdEncoding.AppendEncode(append(doc, `"base64":"`...), body), `",`...)
		}
	}
	doc = core.AppendJSONString(append(doc, `"method":`...), method)
	doc = core.AppendJSONString(append(doc, `,"path":`...), path)
	if text {
		doc = core.AppendJSONString(append(doc, `,"text":`...), body)
	}
	return core.FingerprintCanonical(append(doc, '}')), nil
}

// docPool holds the buffers Fingerprint assembles documents in; one larger
// than maxPooledDoc is not kept.
var docPool = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledDoc = 256 << 10
