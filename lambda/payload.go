package idemlambda

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// WithFingerprintSelection makes the wrapper fingerprint only the part of
// each payload that sel covers (core.SelectFields, core.IgnoreFields; see
// core.Selection for what a path names and what an absent field does), so
// that an event published again with only a left-out field changed (a
// timestamp, a trace id in the body) replays instead of being refused as a
// reused key. The paths are relative to what the wrapper fingerprints: an
// SQS or SNS message body (once unwrapped, with WithEnvelope), a Kinesis
// record's data, a DynamoDB Streams record's {"eventName", "Keys",
// "NewImage", "OldImage"} in DynamoDB's typed JSON, a Typed handler's event
// as JSON, an HTTP request's body (the method and the path stay
// fingerprinted). A payload that is not JSON is fingerprinted whole. A
// payload that lacks a selected field has verdict invalid_payload.
// Without this option the runner's idem.WithFingerprintSelection applies
// (default: the whole payload). A Selection built from a bad path is an
// error of the constructor. Applies to every wrapper.
func WithFingerprintSelection(sel core.Selection) Option {
	return func(c *config) error {
		if err := sel.Err(); err != nil {
			return err
		}
		c.selection, c.selectionSet = sel, true
		return nil
	}
}

// selectionFor is the selection a wrapper over runner applies: its own
// (WithFingerprintSelection), else the runner's (none without a runner: a
// KeyConfig's wrapper).
func (c *config) selectionFor(runner *idem.Runner) core.Selection {
	if c.selectionSet || runner == nil {
		return c.selection
	}
	return runner.FingerprintSelection()
}

// bodyFingerprint returns the fingerprint of the batch wrappers' payloads
// under sel: a JSON payload by its canonical form (only the part sel
// covers), and any other payload (text, an empty or blank body, JSON with a
// duplicate key) as the JSON string of its bytes, each byte of invalid
// UTF-8 as U+FFFD. JSON nested deeper than core.MaxDepth and a payload
// without a field sel selects are errors (invalid_payload). The payload is
// canonicalized once: what does not read as JSON is not read again.
func bodyFingerprint(sel core.Selection) idem.FingerprintFunc {
	return func(payload []byte) (string, error) {
		if len(bytes.TrimSpace(payload)) > 0 {
			fp, err := sel.Fingerprint(payload)
			if err == nil || errors.Is(err, core.ErrTooDeep) || errors.Is(err, core.ErrFieldAbsent) {
				return fp, err
			}
		}
		return core.FingerprintCanonical(core.AppendJSONString(make([]byte, 0, len(payload)+len(payload)/8+2), payload)), nil
	}
}

// payloadFingerprint is the fingerprint of a stream wrapper's payloads
// (bodyFingerprint). Streams have no envelope to take off and no message
// group: WithEnvelope and WithMessageGroupTenant are errors.
func (w *streamWrapper[R]) payloadFingerprint() (idem.FingerprintFunc, error) {
	if len(w.cfg.envelopes) > 0 {
		return nil, fmt.Errorf("idemlambda: %s: WithEnvelope applies to the SQS and SNS wrappers only", w.src.wrapper)
	}
	if w.cfg.groupTenant {
		return nil, fmt.Errorf("idemlambda: %s: WithMessageGroupTenant applies to the SQS wrapper only", w.src.wrapper)
	}
	return bodyFingerprint(w.cfg.selectionFor(w.runner)), nil
}
