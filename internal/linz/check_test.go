package linz_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/linz"
	"github.com/idemgo/idem/memstore"
)

func reservation(token string, now time.Time) core.Record {
	return core.Reserve(key, fp, token, nil, now, now.Add(10*time.Second), time.Minute)
}

func entry(client int, op linz.Op, res linz.Result, call, ret int64) linz.Entry {
	return linz.Entry{Client: client, Op: op, Result: res, Call: call, Return: ret}
}

// TestCheck checks hand-made histories: what the check must accept (lost
// answers placed where they explain what others saw, or never) and what
// it must refuse (two winners, reads of records no one wrote, stale reads).
func TestCheck(t *testing.T) {
	a, b := reservation("tok-a", at(0)), reservation("tok-b", at(1))
	aDone := core.Succeed(a, []byte("ok"), at(2), time.Minute)
	reserve := func(r core.Record) linz.Op { return linz.Op{Kind: linz.Reserve, Key: key, Rec: r, Now: r.UpdatedAt} }
	get := linz.Op{Kind: linz.Get, Key: key, Now: at(3)}
	ok := linz.Result{Verdict: linz.OK}
	unknown := linz.Result{Verdict: linz.Unknown}
	found := func(r core.Record) linz.Result { return linz.Result{Verdict: linz.OK, Rec: &r} }
	acquired := core.Acquire(b, nil, at(1))
	acquire := linz.Op{Kind: linz.Acquire, Key: key, Rec: b, Now: at(1), Policy: core.Policy{MaxAttempts: 3}}
	cases := []struct {
		name        string
		lostAnswers bool
		entries     []linz.Entry
		want        porcupine.CheckResult
	}{
		{"one winner", false, []linz.Entry{
			entry(0, reserve(a), ok, 0, 10),
			entry(1, reserve(b), linz.Result{Verdict: linz.Conflict, Rec: &a}, 5, 15),
		}, porcupine.Ok},
		{"two winners one after the other", false, []linz.Entry{
			entry(0, reserve(a), ok, 0, 10),
			entry(1, reserve(b), ok, 20, 30),
		}, porcupine.Illegal},
		{"two concurrent winners", false, []linz.Entry{
			entry(0, reserve(a), ok, 0, 10),
			entry(1, reserve(b), ok, 5, 15),
		}, porcupine.Illegal},
		{"a lost reservation that a read saw", false, []linz.Entry{
			entry(0, reserve(a), unknown, 0, linz.Pending),
			entry(1, get, found(a), 10, 20),
		}, porcupine.Ok},
		{"a lost reservation that was never applied", false, []linz.Entry{
			entry(0, reserve(a), unknown, 0, linz.Pending),
			entry(1, reserve(b), ok, 10, 20),
			entry(1, get, found(b), 30, 40),
		}, porcupine.Ok},
		{"a read of a record no one wrote", false, []linz.Entry{
			entry(0, get, found(a), 0, 10),
		}, porcupine.Illegal},
		{"a stale read", false, []linz.Entry{
			entry(0, reserve(a), ok, 0, 10),
			entry(0, linz.Op{Kind: linz.Complete, Key: key, Rec: aDone}, found(aDone), 20, 30),
			entry(1, get, found(a), 40, 50),
		}, porcupine.Illegal},
		{"a read during the completion", false, []linz.Entry{
			entry(0, reserve(a), ok, 0, 10),
			entry(0, linz.Op{Kind: linz.Complete, Key: key, Rec: aDone}, found(aDone), 20, 30),
			entry(1, get, found(a), 25, 50),
		}, porcupine.Ok},
		{"an acquisition of an absent key", false, []linz.Entry{
			entry(0, acquire, linz.Result{Verdict: linz.OK, Rec: &acquired}, 0, 10),
		}, porcupine.Ok},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := linz.Model{LostAnswers: tc.lostAnswers}
			dir := t.TempDir()
			got, path, err := linz.Check(m, t0, tc.entries, time.Minute, dir, t.Name())
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("Check = %s, want %s", got, tc.want)
			}
			if got == porcupine.Ok {
				if path != "" {
					t.Errorf("Check wrote %s for a linearizable history", path)
				}
				return
			}
			if info, err := os.Stat(path); err != nil || info.Size() == 0 {
				t.Errorf("visualisation %q: %v", path, err)
			}
			if why := linz.Explain(m, t0, tc.entries); !strings.Contains(why, "key "+key) {
				t.Errorf("Explain does not name the key:\n%s", why)
			}
		})
	}
}

// TestLostAnswersAcquire: an acquisition whose store recovered its own
// write after losing the answer returns no prev; with LostAnswers the
// model accepts it, without it refuses it.
func TestLostAnswersAcquire(t *testing.T) {
	a := reservation("tok-a", at(0))
	aFailed := core.Fail(a, fmt.Errorf("flaky"), true, at(1), time.Minute)
	b := reservation("tok-b", at(2))
	got := core.Acquire(b, &aFailed, at(2))
	entries := []linz.Entry{
		entry(0, linz.Op{Kind: linz.Reserve, Key: key, Rec: a, Now: at(0)}, linz.Result{Verdict: linz.OK}, 0, 10),
		entry(0, linz.Op{Kind: linz.Complete, Key: key, Rec: aFailed}, linz.Result{Verdict: linz.OK, Rec: &aFailed}, 10, 20),
		entry(1, linz.Op{Kind: linz.Acquire, Key: key, Rec: b, Now: at(2), Policy: core.Policy{MaxAttempts: 3}}, linz.Result{Verdict: linz.OK, Rec: &got}, 30, 40),
	}
	for _, tc := range []struct {
		lost bool
		want porcupine.CheckResult
	}{{true, porcupine.Ok}, {false, porcupine.Illegal}} {
		if res, _, err := linz.Check(linz.Model{LostAnswers: tc.lost}, t0, entries, time.Minute, t.TempDir(), "acquire"); err != nil || res != tc.want {
			t.Errorf("LostAnswers %v: Check = %s, %v; want %s", tc.lost, res, err, tc.want)
		}
	}
}

// Mutants of memstore, each with a bug a store could have. The workload
// and the check must find each.
type (
	// getIgnoresRetention answers records past their retention.
	getIgnoresRetention struct{ *memstore.Store }
	// completeUnfenced completes whatever in-progress record is stored,
	// not only the caller's.
	completeUnfenced struct{ *memstore.Store }
	// releaseUnfenced deletes whatever record is stored.
	releaseUnfenced struct{ *memstore.Store }
)

func (s getIgnoresRetention) Get(ctx context.Context, key string, _ time.Time) (core.Record, error) {
	return s.Store.Get(ctx, key, time.Time{})
}

func (s completeUnfenced) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	if cur, err := s.Get(ctx, rec.Key, rec.UpdatedAt); err == nil && cur.Status == core.StatusInProgress {
		rec.LeaseToken, rec.Attempts = cur.LeaseToken, cur.Attempts
	}
	return s.Store.Complete(ctx, rec)
}

func (s releaseUnfenced) Release(ctx context.Context, rec core.Record) error {
	cur, err := s.Get(ctx, rec.Key, time.Time{})
	if err != nil {
		return err
	}
	return s.Store.Release(ctx, cur)
}

// TestMutantsFound runs the workload on each mutant until a history is
// not linearizable, at most 16 histories.
func TestMutantsFound(t *testing.T) {
	mutants := []struct {
		name  string
		store func() linz.Target
	}{
		{"get ignores retention", func() linz.Target { return linz.Target{Store: getIgnoresRetention{memstore.New()}} }},
		{"complete unfenced", func() linz.Target { return linz.Target{Store: completeUnfenced{memstore.New()}} }},
		{"release unfenced", func() linz.Target { return linz.Target{Store: releaseUnfenced{memstore.New()}} }},
	}
	for _, mt := range mutants {
		t.Run(mt.name, func(t *testing.T) {
			for seed := range uint64(16) {
				target := mt.store()
				target.Name = mt.name
				w := linz.Workload{Clients: 4, Runners: 1, Ops: 150, Prefix: "mut", Keys: 3, KeyLife: linz.KeyLife, Seed: seed, Start: t0}
				h := linz.NewHistory()
				w.Run(context.Background(), &target, h)
				res, _, err := linz.Check(target.Model(), t0, h.Entries(), time.Minute, t.TempDir(), "mutant")
				if err != nil {
					t.Fatal(err)
				}
				if res == porcupine.Illegal {
					t.Logf("found by history %d", seed)
					return
				}
			}
			t.Errorf("16 histories on %s were all linearizable", mt.name)
		})
	}
}
