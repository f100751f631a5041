package redisstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

func init() {
	scriptNames[renewScript.sha], scriptNames[renewScript.src] = "renew", "renew"
}

// wantRenew is idem.LeaseRenewer's contract in Go (as memstore applies it).
func wantRenew(cur *core.Record, token string, until, now time.Time) int64 {
	switch {
	case cur != nil && core.Renewed(*cur, token, until):
		return verdictSame
	case cur != nil && core.Renewable(*cur, token, now):
		return verdictWritten
	}
	return verdictRefused
}

// renew sets cur up, runs renewLua and checks its verdict and the stored
// record against core.
func (e *ruleEnv) renew(name string, cur *core.Record, token string, until, now time.Time) {
	e.t.Helper()
	key := e.put(cur)
	rec := core.Record{Key: key, Fingerprint: fp, Status: core.StatusInProgress, LeaseToken: token, Attempts: 1,
		LeaseUntil: now, ExpiresAt: now.Add(30 * time.Second)}
	if cur != nil && cur.LeaseToken == token {
		rec = *cur
	}
	renewed := normalize(core.Renew(normalize(rec), until, now))
	want := wantRenew(cur, token, renewed.LeaseUntil, now)
	got, _, err := e.s.eval(context.Background(), "test", renewScript, e.s.Name(key), e.s.renewArgs(renewed, now))
	if err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	if got != want {
		e.t.Errorf("%s: script verdict %d, core says %d (stored %v)", name, got, want, cur)
		return
	}
	after, found, err := e.s.read(context.Background(), "test", key)
	if err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	switch {
	case want == verdictWritten:
		w := *cur
		w.LeaseUntil, w.ExpiresAt, w.UpdatedAt = renewed.LeaseUntil, renewed.ExpiresAt, renewed.UpdatedAt
		if !found || !sameRecord(after, w) {
			e.t.Errorf("%s: stored after renewal = %v, want %v", name, after, w)
		}
	case cur != nil && (!found || !sameRecord(after, *cur)):
		e.t.Errorf("%s: stored after %d = %v (found %v), want unchanged %v", name, want, after, found, *cur)
	case cur == nil && found:
		e.t.Errorf("%s: a refused renewal wrote %v", name, after)
	}
}

// TestRenewRulesMatchCore: every combination of the stored record's status,
// lease end and retention end around now, the caller's token, and the new
// lease end (before, at and after the stored one).
func TestRenewRulesMatchCore(t *testing.T) {
	t.Parallel()
	e := newRuleEnv(t)
	now := ms(0)
	e.renew("absent", nil, "tok-s", ms(1000), now)
	ends := map[string]*time.Time{"zero": nil, "past": ptr(ms(-1)), "now": ptr(ms(0)), "future": ptr(ms(1)), "far": ptr(ms(5000))}
	kinds := []struct {
		status    core.Status
		retryable bool
	}{{core.StatusInProgress, false}, {core.StatusSucceeded, false}, {core.StatusFailed, true}}
	for _, k := range kinds {
		for leaseName, lease := range ends {
			for expName, exp := range ends {
				for _, token := range []string{"tok-s", "tok-n"} {
					for _, until := range []int{1, 5000, 9000} {
						cur := stored(k.status, k.retryable, lease, exp, 1)
						name := fmt.Sprintf("grid %s lease=%s exp=%s token=%s until=+%dms", k.status, leaseName, expName, token, until)
						e.renew(name, &cur, token, ms(until), now)
					}
				}
			}
		}
	}
}

// TestRenewLeaseMovesTheExpiry: the server-side expiry follows the renewed
// lease, so that Redis never deletes a record whose lease lives.
func TestRenewLeaseMovesTheExpiry(t *testing.T) {
	integration(t)
	t.Parallel()
	c := newClient(t, "", nil)
	s := newStore(t, c)
	now := time.Now().Truncate(time.Millisecond)
	rec := core.Reserve("evt:renew:expiry", fp, "tok", nil, now, now.Add(time.Minute), 2*time.Minute)
	if err := s.Reserve(context.Background(), rec, nil, now); err != nil {
		t.Fatal(err)
	}
	until := now.Add(time.Hour)
	got, err := s.RenewLease(context.Background(), rec, until, now.Add(time.Second))
	if err != nil || !got.LeaseUntil.Equal(until) || !got.ExpiresAt.Equal(until) {
		t.Fatalf("RenewLease = %v, %v; want lease and retention until %s", got, err, until)
	}
	at, err := c.PExpireTime(context.Background(), s.Name(rec.Key)).Result()
	if want := until.Add(s.expiryMargin); err != nil || at != time.Duration(want.UnixMilli())*time.Millisecond {
		t.Errorf("server-side expiry = %v, %v; want %s", at, err, want)
	}
	if _, err := s.RenewLease(context.Background(), got, until.Add(time.Hour), until); !errors.Is(err, idem.ErrLeaseLost) {
		t.Errorf("RenewLease at the lease's end = %v, want ErrLeaseLost", err)
	}
}
