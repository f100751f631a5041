package idemlambda

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemgo/idem/core"
)

// refSQSPayload is how the SQS wrapper chose a message's payload before it
// fingerprinted bodies itself: the body if it canonicalizes, else its JSON
// string. The runner then fingerprinted it with core.Fingerprint. Records
// stored then must keep their fingerprints.
func refSQSPayload(body string) []byte {
	_, err := core.Canonicalize([]byte(body))
	if err == nil || errors.Is(err, core.ErrTooDeep) {
		return []byte(body)
	}
	b, _ := json.Marshal(body)
	return b
}

// refKinesisPayload is the Kinesis wrapper's payload before, likewise.
func refKinesisPayload(data []byte) []byte {
	if utf8.Valid(data) {
		return refSQSPayload(string(data))
	}
	b, _ := json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString(data)})
	return b
}

// FuzzBodyFingerprintUnchanged checks that fingerprinting a body once, in
// the wrapper, gives exactly the fingerprint the two canonicalizations gave
// before (the reference), for SQS bodies and Kinesis data, and the same
// error for what neither accepts.
func FuzzBodyFingerprintUnchanged(f *testing.F) {
	for _, s := range []string{`{"event_id":"e-1","n":1}`, "plain text", "", "  ", `{"a":1,"a":2}`, `{"a":1} trailing`, "<b>&amp;</b>",
		"\xff\xfe", `"\ud800"`, "\u2028", `[1,2`, strings.Repeat("[", core.MaxDepth+1) + strings.Repeat("]", core.MaxDepth+1)} {
		f.Add([]byte(s))
	}
	fp := bodyFingerprint(core.Selection{})
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, c := range []struct {
			name     string
			old, new []byte
		}{{"sqs", refSQSPayload(string(body)), body}, {"kinesis", refKinesisPayload(body), kinesisPayload(body)}} {
			want, werr := core.Fingerprint(c.old)
			got, err := fp(c.new)
			if got != want || (err == nil) != (werr == nil) {
				t.Fatalf("%s %q: fingerprint %q, %v; before %q, %v", c.name, body, got, err, want, werr)
			}
		}
	})
}

func TestBodyFingerprintSelection(t *testing.T) {
	t.Parallel()
	ignoreTime := bodyFingerprint(core.IgnoreFields("time"))
	a, err1 := ignoreTime([]byte(`{"id":"e-1","time":"2030-01-01T00:00:00Z"}`))
	b, err2 := ignoreTime([]byte(`{"time":"2030-01-02T00:00:00Z","id":"e-1"}`))
	c, err3 := ignoreTime([]byte(`{"id":"e-2","time":"2030-01-01T00:00:00Z"}`))
	if err1 != nil || err2 != nil || err3 != nil || a != b || a == c {
		t.Fatalf("ignoring time: %s %s %s (%v %v %v); want the first two equal, the third not", a, b, c, err1, err2, err3)
	}
	selectID := bodyFingerprint(core.SelectFields("id"))
	if _, err := selectID([]byte(`{"event_id":"e-1"}`)); !errors.Is(err, core.ErrFieldAbsent) {
		t.Fatalf("a JSON body without the selected field: err = %v, want ErrFieldAbsent (not fingerprinted as text)", err)
	}
	text, err := selectID([]byte("not json"))
	if want := core.FingerprintCanonical(core.AppendJSONString(nil, "not json")); err != nil || text != want {
		t.Fatalf("a text body under a selection: %s, %v; want it whole, %s", text, err, want)
	}
}
