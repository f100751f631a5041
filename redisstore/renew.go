package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// renewLua applies idem.LeaseRenewer's contract atomically.
//
//	KEYS[1]  the record
//	ARGV     now_ms, token, until_ms, exp_ms ('' keeps it), updated_ms,
//	         pexpireat ('' keeps it), wait ('1' or '')
//
// It returns {1, field, value, ...} with the record as renewed, {2, field,
// value, ...} with the stored record when it already holds the lease until
// until_ms or later (a retried renewal), and {0, field, value, ...} with
// the stored record, if any, when the lease is lost.
const renewLua = rulesLua + `
-- core.Renewable: the caller's token on an in-progress record whose lease
-- has not ended.
local function renewable(r, token, now)
  return r.status == 'in_progress' and r.token == token and not lease_expired(r, now)
end

-- core.Renewed: the caller's lease already reaches until.
local function renewed(r, token, until_ms)
  local lease = tonumber(r.lease_ms or '')
  return r.status == 'in_progress' and r.token == token and lease ~= nil and lease >= until_ms
end

local now = tonumber(ARGV[1])
local cur, flat = load(KEYS[1])
if cur and renewed(cur, ARGV[2], tonumber(ARGV[3])) then
  touch(KEYS[1], cur, ARGV[7])
  table.insert(flat, 1, 2)
  return flat
end
if not cur or not renewable(cur, ARGV[2], now) then
  table.insert(flat, 1, 0)
  return flat
end
redis.call('HSET', KEYS[1], 'lease_ms', ARGV[3], 'updated_ms', ARGV[5])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'exp_ms', ARGV[4]) end
if ARGV[6] ~= '' then redis.call('PEXPIREAT', KEYS[1], ARGV[6]) end
local after = redis.call('HGETALL', KEYS[1])
table.insert(after, 1, 1)
return after
`

var renewScript = newScript(renewLua)

var _ idem.LeaseRenewer = (*Store)(nil)

// RenewLease implements idem.LeaseRenewer with one script (EVALSHA) that
// applies core.Renewed and core.Renewable at now and writes the lease end,
// retention end and time of core.Renew(rec, until, now), moving the
// server-side expiry with them; it answers with the record as stored. After
// a failure that may have been applied, one read looks for the renewal
// (core.Renewed); with WithWait, finding it so is ErrNotReplicated. A
// refusal is an error wrapping idem.ErrLeaseLost.
func (s *Store) RenewLease(ctx context.Context, rec core.Record, until, now time.Time) (core.Record, error) {
	const op = "renew"
	if err := ctx.Err(); err != nil {
		return core.Record{}, err
	}
	if !checkKey(rec.Key) {
		return core.Record{}, s.fail(op, ErrKeyTooLarge, "key is %d bytes, want 1 to %d", len(rec.Key), MaxKeySize)
	}
	if rec.LeaseToken == "" || !until.After(now) {
		return core.Record{}, fmt.Errorf("redisstore: renew needs the holder's lease token and an end after now, got token %q, until %s, now %s", rec.LeaseToken, until, now)
	}
	renewed := normalize(core.Renew(normalize(rec), until, now))
	verdict, flat, err := s.eval(ctx, op, renewScript, s.Name(rec.Key), s.renewArgs(renewed, now))
	if err != nil {
		t := translate(op, err)
		if t.maybeApplied && ctx.Err() == nil {
			if stored, found, rerr := s.read(ctx, op, rec.Key); rerr == nil && found && core.Renewed(stored, rec.LeaseToken, renewed.LeaseUntil) {
				if err := s.unconfirmed(op, err); err != nil {
					return core.Record{}, err
				}
				return stored, nil
			}
		}
		return core.Record{}, t.err
	}
	stored, found, err := decodeFlat(rec.Key, flat)
	if err != nil {
		return core.Record{}, core.MarkPermanent(&Error{Op: op, Err: err})
	}
	if verdict == verdictRefused || !found {
		return core.Record{}, fmt.Errorf("redisstore: renew, key hash %s: %w", idem.HashKey(rec.Key), idem.ErrLeaseLost)
	}
	return stored, nil
}

// renewArgs returns renewLua's ARGV for renewed (normalized) at now.
func (s *Store) renewArgs(renewed core.Record, now time.Time) []any {
	return []any{now.UnixMilli(), renewed.LeaseToken, millis(renewed.LeaseUntil), millis(renewed.ExpiresAt),
		millis(renewed.UpdatedAt), s.pexpireat(renewed), s.waitFlag()}
}
