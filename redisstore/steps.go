package redisstore

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// fieldSteps holds a record's steps (core.Step) in order: "" for none, else
// name=result;name=result... with each result in standard base64. Step
// names (core.ValidateStepName) have neither ';' nor '='.
const fieldSteps = "steps"

// stepHeadroom is the part of the record size limit that steps leave to the
// failure that may complete the record: its status and error message (which
// is shortened to fit what is left).
const stepHeadroom = 256

// Verdicts of stepLua besides verdictRefused (a lost lease), verdictWritten
// and verdictSame (the step is stored already: a retried write).
const (
	verdictConflict = 3 // the step's name is stored with another result
	verdictTooLarge = 4 // the step would make the record too large
)

// stepLua applies idem.StepRecorder's contract (core.AddStep) atomically.
//
//	KEYS[1]  the record
//	ARGV     now_ms, token, name, result (base64), max record size less
//	         the headroom, wait ('1' or '')
//
// It returns {1} when it appended the step, {2} when the step is stored
// with this result, {3} when it is stored with another, {4} when the
// record would exceed the size, and {0} when the lease is lost.
const stepLua = rulesLua + `
local now = tonumber(ARGV[1])
local name, result = ARGV[3], ARGV[4]
local cur, flat = load(KEYS[1])
if not cur or cur.status ~= 'in_progress' or cur.token ~= ARGV[2] or lease_expired(cur, now) then
  return {0}
end
local steps = cur.steps or ''
local all = ';' .. steps .. ';'
local at = string.find(all, ';' .. name .. '=', 1, true)
if at then
  local stop = string.find(all, ';', at + 1, true)
  if string.sub(all, at + #name + 2, stop - 1) == result then
    touch(KEYS[1], cur, ARGV[6])
    return {2}
  end
  return {3}
end
local entry = name .. '=' .. result
if steps ~= '' then entry = ';' .. entry end
local size = #KEYS[1]
for i = 1, #flat do size = size + #flat[i] end
if cur.steps == nil then size = size + #'steps' end
if size + #entry > tonumber(ARGV[5]) then return {4} end
redis.call('HSET', KEYS[1], 'steps', steps .. entry, 'updated_ms', ARGV[1])
return {1}
`

var stepScript = newScript(stepLua)

var _ idem.StepRecorder = (*Store)(nil)

// RecordStep implements idem.StepRecorder with one script (EVALSHA) that
// applies core.AddStep's rule at now: it appends step to the record of key
// if and only if the record is in progress, holds leaseToken and its lease
// is live. A step that would make the record larger than the record size
// limit less a headroom of 256 bytes (left to the failure that may
// complete it) is refused with a permanent error wrapping
// ErrRecordTooLarge, and nothing is written. A failure that may have been
// applied is returned as it is: the retry the caller makes is recognised.
func (s *Store) RecordStep(ctx context.Context, key, leaseToken string, step core.Step, now time.Time) error {
	const op = "step"
	if err := ctx.Err(); err != nil {
		return err
	}
	if !checkKey(key) {
		return s.fail(op, ErrKeyTooLarge, "key is %d bytes, want 1 to %d", len(key), MaxKeySize)
	}
	if err := core.ValidateStepName(step.Name); err != nil {
		return err
	}
	args := []any{now.UnixMilli(), leaseToken, step.Name, base64.StdEncoding.EncodeToString(step.Result),
		s.maxRecord - stepHeadroom, s.waitFlag()}
	verdict, _, err := s.eval(ctx, op, stepScript, s.Name(key), args)
	if err != nil {
		return translate(op, err).err
	}
	switch verdict {
	case verdictWritten, verdictSame:
		return nil
	case verdictConflict:
		return fmt.Errorf("redisstore: key hash %s, step %q: %w", idem.HashKey(key), step.Name, idem.ErrStepConflict)
	case verdictTooLarge:
		return s.fail(op, ErrRecordTooLarge, "step %q of %d bytes would pass the record size limit %d less %d", step.Name, len(step.Result), s.maxRecord, stepHeadroom)
	}
	return fmt.Errorf("redisstore: key hash %s, step %q: %w", idem.HashKey(key), step.Name, idem.ErrLeaseLost)
}

// encodeSteps is the value of fieldSteps.
func encodeSteps(steps []core.Step) string {
	var b strings.Builder
	for i, st := range steps {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(st.Name)
		b.WriteByte('=')
		b.WriteString(base64.StdEncoding.EncodeToString(st.Result))
	}
	return b.String()
}

// decodeSteps reads fieldSteps. A malformed value gives an error wrapping
// ErrCorruptRecord.
func decodeSteps(v string) ([]core.Step, error) {
	if v == "" {
		return nil, nil
	}
	var steps []core.Step
	for _, entry := range strings.Split(v, ";") {
		name, enc, ok := strings.Cut(entry, "=")
		if !ok || core.ValidateStepName(name) != nil {
			return nil, fmt.Errorf("%w: step entry %q", ErrCorruptRecord, entry)
		}
		result, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return nil, fmt.Errorf("%w: step %q: %v", ErrCorruptRecord, name, err)
		}
		if len(result) == 0 {
			result = nil
		}
		steps = append(steps, core.Step{Name: name, Result: result})
	}
	return steps, nil
}
