package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemgo/idem/core"
)

// wantAcquire is Store.Acquire's contract (idem.Acquirer) in Go.
func wantAcquire(cur *core.Record, rec core.Record, p core.Policy, now time.Time) int64 {
	if cur != nil && !cur.Expired(now) {
		if core.Acquired(*cur, rec) {
			return verdictSame
		}
		if !core.Acquirable(cur, rec.Fingerprint, now, p) {
			return verdictRefused
		}
	}
	return verdictWritten
}

// acquire sets cur up, runs acquireLua and checks it against core: the
// verdict, and the record written with the attempt core.Acquire counts.
func (e *ruleEnv) acquire(name string, cur *core.Record, token, fingerprint string, p core.Policy, now time.Time) {
	e.t.Helper()
	key := e.put(cur)
	rec := normalize(core.Reserve(key, fingerprint, token, nil, now, now.Add(30*time.Second), time.Hour))
	args := append([]any{now.UnixMilli(), rec.LeaseToken, rec.Fingerprint, fmt.Sprint(p.AttemptLimit()),
		e.s.pexpireat(rec), e.s.waitFlag()}, encode(rec, nil, "")...)
	want := wantAcquire(cur, rec, p, now)
	e.check(name, acquireScript, args, cur, core.Acquire(rec, cur, now), want)
}

// TestAcquireRulesMatchCore runs acquireLua over every combination of the
// stored record's status, lease end, retention end and attempts around now,
// with the caller's fingerprint or another, its own token or another, and
// attempt bounds of 1 and 2.
func TestAcquireRulesMatchCore(t *testing.T) {
	t.Parallel()
	e := newRuleEnv(t)
	now := ms(0)
	ends := map[string]*time.Time{"zero": nil, "past": ptr(ms(-1)), "now": ptr(ms(0)), "future": ptr(ms(1))}
	kinds := []struct {
		status    core.Status
		retryable bool
	}{{core.StatusInProgress, false}, {core.StatusSucceeded, false}, {core.StatusFailed, true}, {core.StatusFailed, false}}
	e.acquire("absent", nil, "tok-n", fp, core.Policy{MaxAttempts: 2}, now)
	for _, k := range kinds {
		for leaseName, lease := range ends {
			for expName, exp := range ends {
				for _, attempts := range []int{1, 2} {
					for _, token := range []string{"tok-s", "tok-n"} {
						for _, fingerprint := range []string{fp, "other-fp"} {
							for _, max := range []int{1, 3} {
								cur := stored(k.status, k.retryable, lease, exp, attempts)
								name := fmt.Sprintf("grid %s retryable=%v lease=%s exp=%s attempts=%d token=%s fp=%.5s max=%d",
									k.status, k.retryable, leaseName, expName, attempts, token, fingerprint, max)
								e.acquire(name, &cur, token, fingerprint, core.Policy{MaxAttempts: max}, now)
							}
						}
					}
				}
			}
		}
	}
}
