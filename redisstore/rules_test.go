package redisstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem/core"
)

// The scripts' rules (rulesLua) against core's: for every case, the verdict
// of the script on the stored record equals the one the contract of
// idem.Store gives with core.Record.Expired, core.Reservable and
// core.SameWrite (as memstore applies them), and a written record replaces
// every field of the one before.

const fp = "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"

// wantReserve is Store.Reserve's contract in Go.
func wantReserve(cur *core.Record, rec core.Record, prev *core.Record, now time.Time) int64 {
	var live *core.Record
	if cur != nil && !cur.Expired(now) {
		live = cur
	}
	switch {
	case live != nil && core.SameWrite(*live, rec):
		return verdictSame
	case core.Reservable(live, prev, now):
		return verdictWritten
	case live != nil:
		return verdictRefused
	}
	return verdictGone
}

// wantComplete is Store.Complete's contract in Go.
func wantComplete(cur *core.Record, rec core.Record) int64 {
	if cur != nil && core.SameWrite(*cur, rec) {
		return verdictSame
	}
	if cur == nil || cur.Expired(rec.UpdatedAt) || cur.Status != core.StatusInProgress || cur.LeaseToken != rec.LeaseToken {
		return verdictRefused
	}
	return verdictWritten
}

// base is the tests' "now": an hour ahead of the real clock, so that the
// server does not delete what the cases write, on a whole millisecond.
var base = time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()

func ms(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }

// stored builds a stored record of the grid.
func stored(status core.Status, retryable bool, leaseAt, expAt *time.Time, attempts int) core.Record {
	rec := core.Record{Fingerprint: fp, Status: status, LeaseToken: "tok-s", Attempts: attempts,
		Retryable: retryable, UpdatedAt: ms(-5000)}
	if leaseAt != nil {
		rec.LeaseUntil = *leaseAt
	}
	if expAt != nil {
		rec.ExpiresAt = *expAt
	}
	switch status {
	case core.StatusSucceeded:
		rec.Result = []byte(`{"old":true}`)
	case core.StatusFailed:
		rec.Error = "old failure"
	}
	return rec
}

// ruleEnv runs the scripts directly and sets records up with HSET.
type ruleEnv struct {
	t *testing.T
	c *redis.Client
	s *Store
	n int
}

func (e *ruleEnv) put(cur *core.Record) string {
	e.n++
	key := fmt.Sprintf("c%d", e.n)
	if cur != nil {
		cur.Key = key
		*cur = normalize(*cur)
		if err := e.c.HSet(context.Background(), e.s.Name(key), encode(*cur, cur.Result, "")...).Err(); err != nil {
			e.t.Fatal(err)
		}
	}
	return key
}

// check runs a script and compares its verdict and the stored record with want.
func (e *ruleEnv) check(name string, sc script, args []any, cur *core.Record, rec core.Record, want int64) {
	e.t.Helper()
	got, _, err := e.s.eval(context.Background(), "test", sc, e.s.Name(rec.Key), args)
	if err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	if got != want {
		e.t.Errorf("%s: script verdict %d, core says %d (stored %v, rec %v)", name, got, want, cur, rec)
		return
	}
	after, found, err := e.s.read(context.Background(), "test", rec.Key)
	if err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	switch {
	case want == verdictWritten && (!found || !sameRecord(after, normalize(rec))):
		e.t.Errorf("%s: stored after write = %v (found %v), want %v", name, after, found, rec)
	case want != verdictWritten && cur != nil && (!found || !sameRecord(after, *cur)):
		e.t.Errorf("%s: stored after refusal = %v (found %v), want unchanged %v", name, after, found, *cur)
	case want != verdictWritten && cur == nil && found:
		e.t.Errorf("%s: refusal wrote %v", name, after)
	}
}

func sameRecord(a, b core.Record) bool {
	return a.Key == b.Key && a.Fingerprint == b.Fingerprint && a.Status == b.Status && a.LeaseToken == b.LeaseToken &&
		a.Attempts == b.Attempts && a.Retryable == b.Retryable && a.ResultOmitted == b.ResultOmitted &&
		a.Error == b.Error && string(a.Result) == string(b.Result) && a.LeaseUntil.Equal(b.LeaseUntil) &&
		a.ExpiresAt.Equal(b.ExpiresAt) && a.UpdatedAt.Equal(b.UpdatedAt)
}

// reserve sets cur up, runs reserveLua and checks it against core; it
// returns core's verdict.
func (e *ruleEnv) reserve(name string, cur *core.Record, token string, attempts int, prev *core.Record, now time.Time) int64 {
	e.t.Helper()
	key := e.put(cur)
	rec := core.Record{Key: key, Fingerprint: fp, Status: core.StatusInProgress, LeaseToken: token,
		LeaseUntil: now.Add(30 * time.Second), ExpiresAt: now.Add(time.Hour), Attempts: attempts, UpdatedAt: now}
	rec = normalize(rec)
	if prev != nil {
		p := *prev
		p.Key = key
		prev = &p
	}
	args := e.s.reserveArgs(rec, prev, now, encode(rec, nil, ""))
	want := wantReserve(cur, rec, prev, now)
	e.check(name, reserveScript, args, cur, rec, want)
	return want
}

// complete sets cur up, runs completeLua and checks it against core; it
// returns core's verdict.
func (e *ruleEnv) complete(name string, cur *core.Record, token string, attempts int, status core.Status, at time.Time) int64 {
	e.t.Helper()
	key := e.put(cur)
	rec := core.Record{Key: key, Fingerprint: fp, LeaseToken: token, Attempts: attempts}
	if status == core.StatusSucceeded {
		rec = core.Succeed(rec, []byte(`{"new":1}`), at, time.Hour)
	} else {
		rec = core.Fail(rec, errors.New("new failure"), true, at, time.Hour)
	}
	rec = normalize(rec)
	args := e.s.completeArgs(rec, encode(rec, rec.Result, ""))
	want := wantComplete(cur, rec)
	e.check(name, completeScript, args, cur, rec, want)
	return want
}

func newRuleEnv(t *testing.T) *ruleEnv {
	integration(t)
	c := newClient(t, "", nil)
	return &ruleEnv{t: t, c: c, s: newStore(t, c)}
}

func ptr(t time.Time) *time.Time { return &t }

// TestReserveRulesMatchCore: named cases at the boundaries, then the grid.
func TestReserveRulesMatchCore(t *testing.T) {
	t.Parallel()
	e := newRuleEnv(t)
	now := ms(0)
	live := stored(core.StatusInProgress, false, ptr(ms(1)), ptr(ms(3_600_000)), 1)
	ended := stored(core.StatusInProgress, false, ptr(ms(0)), ptr(ms(3_600_000)), 1)
	subMs := stored(core.StatusInProgress, false, ptr(base.Add(500*time.Microsecond)), ptr(ms(3_600_000)), 1) // stored as ms(1)
	pastRetentionLive := stored(core.StatusInProgress, false, ptr(ms(10)), ptr(ms(-10)), 1)
	pastRetentionEnded := stored(core.StatusInProgress, false, ptr(ms(-1)), ptr(ms(-10)), 1)
	retryable := stored(core.StatusFailed, true, nil, ptr(ms(60_000)), 1)
	permanent := stored(core.StatusFailed, false, nil, ptr(ms(60_000)), 1)
	succeeded := stored(core.StatusSucceeded, false, nil, ptr(ms(60_000)), 1)
	succeededExpired := stored(core.StatusSucceeded, false, nil, ptr(ms(0)), 1)
	neverExpires := stored(core.StatusSucceeded, false, nil, nil, 1)
	zeroLease := stored(core.StatusInProgress, false, nil, ptr(ms(60_000)), 1)
	for _, tc := range []struct {
		name     string
		cur      *core.Record
		token    string
		attempts int
		prev     *core.Record
		now      time.Time
		want     int64
	}{
		{"absent", nil, "tok-n", 1, nil, now, verdictWritten},
		{"live lease blocks", &live, "tok-n", 1, nil, now, verdictRefused},
		{"live lease blocks prev", &live, "tok-n", 2, &live, now, verdictRefused},
		{"lease ends at now: taken with prev", &ended, "tok-n", 2, &ended, now, verdictWritten},
		{"lease ended: refused without prev", &ended, "tok-n", 2, nil, now, verdictRefused},
		{"sub-ms lease end rounded up: live", &subMs, "tok-n", 2, &subMs, now.Add(900 * time.Microsecond), verdictRefused},
		{"sub-ms lease end rounded up: ended", &subMs, "tok-n", 2, &subMs, ms(1), verdictWritten},
		{"past retention, live lease: not absent", &pastRetentionLive, "tok-n", 1, nil, now, verdictRefused},
		{"past retention, ended lease: absent", &pastRetentionEnded, "tok-n", 1, nil, now, verdictWritten},
		{"past retention, ended lease, with prev: gone", &pastRetentionEnded, "tok-n", 2, &pastRetentionEnded, now, verdictGone},
		{"absent, with prev: gone", nil, "tok-n", 2, &retryable, now, verdictGone},
		{"retryable failure with prev", &retryable, "tok-n", 2, &retryable, now, verdictWritten},
		{"retryable failure without prev", &retryable, "tok-n", 2, nil, now, verdictRefused},
		{"permanent failure with prev", &permanent, "tok-n", 2, &permanent, now, verdictRefused},
		{"succeeded with prev", &succeeded, "tok-n", 2, &succeeded, now, verdictRefused},
		{"succeeded at its expiry: absent", &succeededExpired, "tok-n", 1, nil, now, verdictWritten},
		{"zero ExpiresAt never expires", &neverExpires, "tok-n", 1, nil, ms(1 << 40), verdictRefused},
		{"zero lease has ended", &zeroLease, "tok-n", 2, &zeroLease, now, verdictWritten},
		{"retried write", &live, "tok-s", 1, nil, now, verdictSame},
		{"same token, other attempt", &live, "tok-s", 2, nil, now, verdictRefused},
	} {
		if got := e.reserve(tc.name, clone(tc.cur), tc.token, tc.attempts, tc.prev, tc.now); got != tc.want {
			t.Errorf("%s: core says %d, want %d", tc.name, got, tc.want)
		}
	}
	reserveGrid(e)
}

func clone(r *core.Record) *core.Record {
	if r == nil {
		return nil
	}
	c := *r
	return &c
}

// reserveGrid covers every combination of the stored record's status, lease
// end and retention end around now, the caller's token and attempt, and prev.
func reserveGrid(e *ruleEnv) {
	now := ms(0)
	ends := map[string]*time.Time{"zero": nil, "past": ptr(ms(-1)), "now": ptr(ms(0)), "future": ptr(ms(1))}
	kinds := []struct {
		status    core.Status
		retryable bool
	}{{core.StatusInProgress, false}, {core.StatusSucceeded, false}, {core.StatusFailed, true}, {core.StatusFailed, false}}
	for _, k := range kinds {
		for leaseName, lease := range ends {
			for expName, exp := range ends {
				for _, token := range []string{"tok-s", "tok-n"} {
					for _, attempts := range []int{1, 2} {
						for _, prevKind := range []string{"nil", "match", "other token", "other status"} {
							cur := stored(k.status, k.retryable, lease, exp, 1)
							var prev *core.Record
							switch prevKind {
							case "match":
								prev = clone(&cur)
							case "other token":
								prev = clone(&cur)
								prev.LeaseToken = "tok-x"
							case "other status":
								prev = clone(&cur)
								prev.Status = core.StatusSucceeded
								if cur.Status == core.StatusSucceeded {
									prev.Status = core.StatusFailed
								}
							}
							name := fmt.Sprintf("grid %s retryable=%v lease=%s exp=%s token=%s attempts=%d prev=%s",
								k.status, k.retryable, leaseName, expName, token, attempts, prevKind)
							e.reserve(name, &cur, token, attempts, prev, now)
						}
					}
				}
			}
		}
	}
}

// TestCompleteRulesMatchCore: named cases, then the grid.
func TestCompleteRulesMatchCore(t *testing.T) {
	t.Parallel()
	e := newRuleEnv(t)
	at := ms(0)
	live := stored(core.StatusInProgress, false, ptr(ms(1)), ptr(ms(60_000)), 1)
	leaseEndedNotExpired := stored(core.StatusInProgress, false, ptr(ms(-1)), ptr(ms(60_000)), 1)
	pastRetentionLive := stored(core.StatusInProgress, false, ptr(ms(1)), ptr(ms(-1)), 1)
	pastRetentionEnded := stored(core.StatusInProgress, false, ptr(ms(0)), ptr(ms(-1)), 1)
	done := stored(core.StatusSucceeded, false, nil, ptr(ms(60_000)), 1)
	for _, tc := range []struct {
		name     string
		cur      *core.Record
		token    string
		attempts int
		status   core.Status
		want     int64
	}{
		{"absent", nil, "tok-s", 1, core.StatusSucceeded, verdictRefused},
		{"holder completes", &live, "tok-s", 1, core.StatusSucceeded, verdictWritten},
		{"holder fails", &live, "tok-s", 1, core.StatusFailed, verdictWritten},
		{"other token", &live, "tok-n", 1, core.StatusSucceeded, verdictRefused},
		{"lease ended, not taken over, not expired", &leaseEndedNotExpired, "tok-s", 1, core.StatusSucceeded, verdictWritten},
		{"past retention with a live lease", &pastRetentionLive, "tok-s", 1, core.StatusSucceeded, verdictWritten},
		{"expired at the completion's time", &pastRetentionEnded, "tok-s", 1, core.StatusSucceeded, verdictRefused},
		{"retried completion", &done, "tok-s", 1, core.StatusSucceeded, verdictSame},
		{"completion with another status", &done, "tok-s", 1, core.StatusFailed, verdictRefused},
	} {
		if got := e.complete(tc.name, clone(tc.cur), tc.token, tc.attempts, tc.status, at); got != tc.want {
			t.Errorf("%s: core says %d, want %d", tc.name, got, tc.want)
		}
	}
	ends := map[string]*time.Time{"zero": nil, "past": ptr(ms(-1)), "now": ptr(ms(0)), "future": ptr(ms(1))}
	for _, status := range []core.Status{core.StatusInProgress, core.StatusSucceeded, core.StatusFailed} {
		for leaseName, lease := range ends {
			for expName, exp := range ends {
				for _, token := range []string{"tok-s", "tok-n"} {
					for _, attempts := range []int{1, 2} {
						for _, outcome := range []core.Status{core.StatusSucceeded, core.StatusFailed} {
							cur := stored(status, status == core.StatusFailed, lease, exp, 1)
							name := fmt.Sprintf("grid %s lease=%s exp=%s token=%s attempts=%d outcome=%s",
								status, leaseName, expName, token, attempts, outcome)
							e.complete(name, &cur, token, attempts, outcome, at)
						}
					}
				}
			}
		}
	}
}
