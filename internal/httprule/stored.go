package httprule

import (
	"encoding/json"
	"errors"
	"fmt"
)

// FormatVersion is the version of the stored-response envelope that
// Encode writes and Decode reads.
const FormatVersion = 1

// ErrStoredFormat is returned by Decode for a stored response it cannot
// read: not JSON, or an envelope of a later version. Checked with
// errors.Is.
var ErrStoredFormat = errors.New("idem: stored response has an unknown format")

// envelope is what the store keeps for an HTTP request's outcome:
//
//	{"v":1,"shape":"http-api","response":{...the wrapper's own response type...}}
//	{"v":1,"shape":"net/http","omitted":true}
//
// The shape names the response type, so that a replay decodes it into the
// same type exactly; omitted marks a success whose response was not kept.
type envelope struct {
	V        int             `json:"v"`
	Shape    string          `json:"shape"`
	Omitted  bool            `json:"omitted,omitempty"`
	Response json.RawMessage `json:"response,omitempty"`
}

// Stored is a decoded stored response.
type Stored struct {
	// Shape names the type of Response ("" for a record written before
	// the envelope existed: the JSON of a response with statusCode,
	// headers, body and isBase64Encoded).
	Shape string
	// Response is the response's JSON; nil when Omitted.
	Response json.RawMessage
	// Omitted reports a success whose response was not kept.
	Omitted bool
}

// Encode returns the stored form of resp, a response of the given shape.
func Encode(shape string, resp any) ([]byte, error) {
	raw, err := json.Marshal(resp)
	if err != nil {
		return nil, fmt.Errorf("idem: encode %s response: %w", shape, err)
	}
	return json.Marshal(envelope{V: FormatVersion, Shape: shape, Response: raw})
}

// EncodeOmitted returns the stored form of a success whose response of the
// given shape was not kept.
func EncodeOmitted(shape string) []byte {
	b, _ := json.Marshal(envelope{V: FormatVersion, Shape: shape, Omitted: true}) // always marshals
	return b
}

// Decode reads a stored response. The error wraps ErrStoredFormat.
func Decode(b []byte) (Stored, error) {
	var e envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return Stored{}, fmt.Errorf("%w: %v", ErrStoredFormat, err)
	}
	switch {
	case e.V == 0 && e.Shape == "":
		return Stored{Response: b}, nil
	case e.V != FormatVersion:
		return Stored{}, fmt.Errorf("%w: envelope version %d, this build reads %d", ErrStoredFormat, e.V, FormatVersion)
	case e.Omitted:
		return Stored{Shape: e.Shape, Omitted: true}, nil
	case len(e.Response) == 0:
		return Stored{}, fmt.Errorf("%w: %s envelope without a response", ErrStoredFormat, e.Shape)
	}
	return Stored{Shape: e.Shape, Response: e.Response}, nil
}
