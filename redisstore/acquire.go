package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// acquireLua applies Store.Acquire's contract (idem.Acquirer) atomically.
//
//	KEYS[1]  the record
//	ARGV     now_ms, token, fingerprint, max attempts, pexpireat ('' for
//	         none), wait ('1' or ''), then field, value, ... of the record
//	         (its attempts field is replaced by the count made here, and
//	         its steps by those of the live record it replaces: a takeover
//	         or a retry resumes after them, as core.Acquire carries them)
//
// It returns {1, field, value, ...} with the live record it replaced (none:
// the key was absent or expired) when it wrote, {2, field, value, ...} with
// the stored record when that is this very reservation (core.Acquired: a
// retried write), and {0, field, value, ...} with the live record that
// blocks it otherwise.
const acquireLua = rulesLua + `
local now = tonumber(ARGV[1])
local cur, flat = load(KEYS[1])
local attempts, steps = 1, ''
if cur and not expired(cur, now) then
  if cur.token == ARGV[2] and cur.status == 'in_progress' then
    touch(KEYS[1], cur, ARGV[6])
    table.insert(flat, 1, 2)
    return flat
  end
  if not acquirable(cur, ARGV[3], tonumber(ARGV[4]), now) then
    table.insert(flat, 1, 0)
    return flat
  end
  attempts = tonumber(cur.attempts) + 1
  steps = cur.steps or ''
else
  flat = {}
end
write(KEYS[1], ARGV[5], 7)
redis.call('HSET', KEYS[1], 'attempts', tostring(attempts), 'steps', steps)
table.insert(flat, 1, 1)
return flat
`

var _ idem.Acquirer = (*Store)(nil)

// Acquire implements idem.Acquirer with one script (EVALSHA; one EVAL more
// the first time a server sees it) that applies core.Acquirable at now,
// counts the attempt as core.Acquire does, and answers with the live record
// it replaced or, refused, with the one that blocks it: a retry of a
// retryable failure and a takeover cost one round trip, like a first run.
// After a failure that may have been applied, one read checks for the
// reservation (core.Acquired), which is then reported as made (with
// WithWait: as not replicated). Keys and sizes are checked as by Reserve.
func (s *Store) Acquire(ctx context.Context, rec core.Record, now time.Time, p core.Policy) (core.Record, *core.Record, error) {
	const op = "acquire"
	if err := s.checkReservation(ctx, op, &rec); err != nil {
		return core.Record{}, nil, err
	}
	name, fields := s.Name(rec.Key), encode(rec, nil, "")
	args := append([]any{now.UnixMilli(), rec.LeaseToken, rec.Fingerprint, strconv.Itoa(p.AttemptLimit()),
		s.pexpireat(rec), s.waitFlag()}, fields...)
	verdict, flat, err := s.eval(ctx, op, acquireScript, name, args)
	if err != nil {
		t := translate(op, err)
		if t.maybeApplied && ctx.Err() == nil {
			if stored, found, rerr := s.read(ctx, op, rec.Key); rerr == nil && found && core.Acquired(stored, rec) {
				if err := s.unconfirmed(op, err); err != nil {
					return core.Record{}, nil, err
				}
				return stored, nil, nil
			}
		}
		return core.Record{}, nil, t.err
	}
	existing, found, err := decodeFlat(rec.Key, flat)
	if err != nil {
		return core.Record{}, nil, core.MarkPermanent(&Error{Op: op, Err: err})
	}
	switch {
	case verdict == verdictWritten && found:
		return core.Acquire(rec, &existing, now), &existing, nil
	case verdict == verdictWritten:
		return core.Acquire(rec, nil, now), nil, nil
	case verdict == verdictSame:
		return existing, nil, nil
	case !found:
		return core.Record{}, nil, s.fail(op, ErrRejected, "the script refused the acquisition without a blocking record")
	}
	return core.Record{}, nil, &idem.ConflictError{Existing: existing}
}

// checkReservation checks and normalizes an in-progress record to write
// (Reserve, Acquire): the context, its status, token, key and size.
func (s *Store) checkReservation(ctx context.Context, op string, rec *core.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if rec.Status != core.StatusInProgress {
		return fmt.Errorf("redisstore: %s needs an in_progress record, got %q", op, rec.Status)
	}
	if rec.LeaseToken == "" {
		return errors.New("redisstore: " + op + " needs a lease token")
	}
	if !checkKey(rec.Key) {
		return s.fail(op, ErrKeyTooLarge, "key is %d bytes, want 1 to %d", len(rec.Key), MaxKeySize)
	}
	*rec = normalize(*rec)
	rec.Result, rec.ResultOmitted = nil, false
	if size := recordSize(s.Name(rec.Key), encode(*rec, nil, "")); size > s.maxRecord {
		return s.fail(op, ErrRecordTooLarge, "record is %d bytes, at most %d", size, s.maxRecord)
	}
	return nil
}
