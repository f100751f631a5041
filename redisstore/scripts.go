package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"

	"github.com/redis/go-redis/v9"
)

// rulesLua is the Lua translation of the record rules of core, over a record
// loaded from its hash. It is the prefix of both scripts, and the one place
// these rules are written for Redis; rules_test.go checks it against core
// case by case. Times are epoch milliseconds; an empty lease_ms or exp_ms
// field is the zero time.
const rulesLua = `
local function load(key)
  local flat = redis.call('HGETALL', key)
  if #flat == 0 then return nil, flat end
  local r = {}
  for i = 1, #flat, 2 do r[flat[i]] = flat[i + 1] end
  return r, flat
end

-- core.Record.LeaseExpired: a zero lease end has ended.
local function lease_expired(r, now)
  local lease = tonumber(r.lease_ms or '')
  return lease == nil or now >= lease
end

-- core.Record.Expired, the rule of absence: past retention, and not an
-- in-progress record whose lease lives. A zero exp_ms never expires.
local function expired(r, now)
  local exp = tonumber(r.exp_ms or '')
  if exp == nil or now < exp then return false end
  return r.status ~= 'in_progress' or lease_expired(r, now)
end

-- The number of steps of a record (its steps field: name=result;...).
local function step_count(r)
  local steps = r.steps or ''
  if steps == '' then return 0 end
  local _, n = string.gsub(steps, ';', '')
  return n + 1
end

-- core.Replaceable, the takeover rule; prev_status is '' when there is no prev.
local function replaceable(r, prev_token, prev_status, prev_steps, now)
  if prev_status == '' or r.token ~= prev_token or r.status ~= prev_status or step_count(r) ~= prev_steps then
    return false
  end
  return (r.status == 'in_progress' and lease_expired(r, now)) or
         (r.status == 'failed' and r.retryable == '1')
end

-- core.Acquirable over a live record r (absence and expiry are the
-- caller's): same fingerprint, attempts below max, and an ended lease or a
-- retryable failure.
local function acquirable(r, fp, max, now)
  if r.fp ~= fp or (tonumber(r.attempts) or 0) >= max then return false end
  return (r.status == 'in_progress' and lease_expired(r, now)) or
         (r.status == 'failed' and r.retryable == '1')
end

-- core.SameWrite: the key is the same by construction.
local function same_write(r, token, status, attempts)
  return r.token == token and r.status == status and r.attempts == attempts
end

-- write replaces every field of the record (all are always sent) with
-- ARGV[first..] and sets the server-side expiry ('' keeps the record).
local function write(key, pexpireat, first)
  redis.call('HSET', key, unpack(ARGV, first))
  if pexpireat == '' then
    redis.call('PERSIST', key)
  else
    redis.call('PEXPIREAT', key, pexpireat)
  end
end

-- touch rewrites one field with its own value when the caller will WAIT:
-- the no-op write is replicated after the original one, so a WAIT on this
-- connection also covers a write applied by an earlier try.
local function touch(key, r, wait)
  if wait == '1' then redis.call('HSET', key, 'status', r.status) end
end
`

// reserveLua applies Store.Reserve's contract atomically.
//
//	KEYS[1]  the record
//	ARGV     now_ms, prev_token, prev_status ('' without prev), token,
//	         attempts, pexpireat ('' for none), wait ('1' or ''),
//	         prev_steps (prev's number of steps),
//	         then field, value, ... of the record
//
// It returns {1} when it wrote the record, {2} when the live record is this
// very reservation (a retried write), {0, field, value, ...} with the live
// record that blocks it, and {3} when prev is given and no live record
// exists (core.Reservable: prev went).
const reserveLua = rulesLua + `
local now = tonumber(ARGV[1])
local cur, flat = load(KEYS[1])
if cur and not expired(cur, now) then
  if same_write(cur, ARGV[4], 'in_progress', ARGV[5]) then
    touch(KEYS[1], cur, ARGV[7])
    return {2}
  end
  if not replaceable(cur, ARGV[2], ARGV[3], tonumber(ARGV[8]), now) then
    table.insert(flat, 1, 0)
    return flat
  end
elseif ARGV[3] ~= '' then
  return {3}
end
write(KEYS[1], ARGV[6], 9)
return {1}
`

// completeLua applies Store.Complete's contract atomically.
//
//	KEYS[1]  the record
//	ARGV     at_ms (the completion's time), token, status, attempts,
//	         pexpireat ('' for none), wait ('1' or ''),
//	         then field, value, ... of the record
//
// It returns {1} when it wrote the outcome, {2, field, value, ...} with the
// stored record when it is this very outcome (a retried write), and {0,
// field, value, ...} with the stored record, if any, when the lease is lost.
const completeLua = rulesLua + `
local at = tonumber(ARGV[1])
local cur, flat = load(KEYS[1])
if cur and same_write(cur, ARGV[2], ARGV[3], ARGV[4]) then
  touch(KEYS[1], cur, ARGV[6])
  table.insert(flat, 1, 2)
  return flat
end
if not cur or expired(cur, at) or cur.status ~= 'in_progress' or cur.token ~= ARGV[2] then
  table.insert(flat, 1, 0)
  return flat
end
write(KEYS[1], ARGV[5], 7)
return {1}
`

// getLua reads a record. It is a script, not an HGETALL, so that it runs on
// the key's primary whatever the client's read routing (a cluster client
// with ReadOnly sends plain reads to replicas, which may be behind): reads
// are strongly consistent.
//
//	KEYS[1]  the record
//
// It returns the record's field, value, ... (empty if there is none).
const getLua = `return redis.call('HGETALL', KEYS[1])`

// Verdicts, the first element of a script's answer.
const (
	verdictRefused = 0 // a conflict (Reserve) or a lost lease (Complete)
	verdictWritten = 1
	verdictSame    = 2 // the stored record is this very write
	verdictGone    = 3 // Reserve over prev: no live record (prev went)
)

// script is a Lua script run by EVALSHA, falling back on EVAL (which also
// loads it into the server's script cache) when the server answers NOSCRIPT.
type script struct {
	src, sha string
}

func newScript(src string) script {
	sum := sha1.Sum([]byte(src))
	return script{src: src, sha: hex.EncodeToString(sum[:])}
}

var (
	acquireScript  = newScript(acquireLua)
	reserveScript  = newScript(reserveLua)
	completeScript = newScript(completeLua)
	getScript      = newScript(getLua)
)

// run runs the script on key with args: one EVALSHA, and one EVAL more when
// the server does not have the script yet (NOSCRIPT: nothing ran).
func (sc script) run(ctx context.Context, c Client, key string, args []any) (any, error) {
	v, err := c.EvalSha(ctx, sc.sha, []string{key}, args...).Result()
	if err != nil && isNoScript(err) {
		v, err = c.Eval(ctx, sc.src, []string{key}, args...).Result()
	}
	return v, err
}

// isNoScript reports the server's NOSCRIPT answer to EVALSHA (the error code
// is the protocol's).
func isNoScript(err error) bool { return redis.HasErrorPrefix(err, "NOSCRIPT") }
