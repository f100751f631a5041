package linz

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"pgregory.net/rapid"

	"github.com/idemgo/idem/core"
)

// RunModel runs rapid's stateful test of target: random sequences of calls
// (every kind target.Can take) on a few keys, with two fingerprints, fresh
// and stale lease tokens, retried writes, and a fake clock the machine
// advances (callers may lag it), each answer compared with the model's
// after every call, and every key read back after every call. A
// discrepancy fails t with the calls so far; rapid shrinks it and saves it
// under testdata/rapid/, from where every later run replays it first.
//
// checks is the number of random sequences unless -rapid.checks or
// RAPID_CHECKS says otherwise (RAPID_STEPS sets their mean length). Not
// for tests that run in parallel with another RunModel: it sets rapid's
// flag.
func RunModel(t rapid.TB, target *Target, checks int) {
	t.Helper()
	if !userChecks() {
		if err := flag.Set("rapid.checks", strconv.Itoa(checks)); err != nil {
			t.Fatal(err)
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		m := newMachine(target)
		rt.Repeat(rapid.StateMachineActions(m))
	})
}

// userChecks reports whether the command line or the environment sets
// rapid's number of checks.
var userChecks = sync.OnceValue(func() bool {
	set := os.Getenv("RAPID_CHECKS") != ""
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	return set
})

// machine is the state machine: the target, the model's state of each key,
// and what the calls so far returned.
type machine struct {
	t       *Target
	model   Model
	d       describer
	now     time.Time
	keys    []string
	fps     []string
	states  map[string]State
	held    []core.Record // reservations written: in progress, or completed since
	seen    []core.Record // records answered (read, blocking, replaced)
	last    *Op           // the last write, for Retry
	touched string        // the key of the last call
	seq     int
	log     []string
}

func newMachine(t *Target) *machine {
	now := time.Now().Truncate(time.Millisecond)
	prefix := "md:" + RunID()
	return &machine{
		t: t, model: t.Model(), d: describer{base: now}, now: now,
		keys:   []string{prefix + ":key-a", prefix + ":key-b"},
		fps:    []string{fingerprint(`{"order":1}`), fingerprint(`{"order":2}`)},
		states: map[string]State{},
	}
}

// Check reads back the key of the last call, at the machine's time, and
// compares it with the model (the other key is as it was).
func (m *machine) Check(t *rapid.T) {
	if m.touched != "" {
		m.check(t, Op{Kind: Get, Key: m.touched, Now: m.now}, false)
	}
}

// call makes op on the target and on the model, and fails t if their
// answers differ.
func (m *machine) call(t *rapid.T, op Op) Result { return m.check(t, op, true) }

// check is call; the failure message lists the calls logged so far (the
// actions', not Check's reads) and this one.
func (m *machine) check(t *rapid.T, op Op, log bool) Result {
	want, next := m.model.Step(m.states[op.Key], op)
	got, err := m.t.Do(context.Background(), op, nil)
	line := fmt.Sprintf("%s %s → %s", op.Key[strings.LastIndexByte(op.Key, ':')+1:], m.d.op(op), m.d.result(got))
	if log {
		m.log = append(m.log, line)
	}
	if !m.model.Accepts(op, want, got) {
		if !log {
			m.log = append(m.log, line)
		}
		t.Fatalf("%s differs from the model:\n%s\nwant %s\n got %s (error: %v)", m.t.Name, strings.Join(m.log, "\n"), m.d.result(want), m.d.result(got), err)
	}
	m.states[op.Key] = next
	m.touched = op.Key
	for _, r := range []*core.Record{got.Rec, got.Prev} {
		if r != nil {
			m.seen = append(m.seen, *r)
		}
	}
	if op.Kind != Get && op.Kind != Effects {
		m.last = &op
	}
	return got
}

func (m *machine) key(t *rapid.T) string { return rapid.SampledFrom(m.keys).Draw(t, "key") }
func (m *machine) fp(t *rapid.T) string  { return rapid.SampledFrom(m.fps).Draw(t, "fingerprint") }
func (m *machine) token() string         { m.seq++; return fmt.Sprintf("m%d", m.seq) }
func dur(t *rapid.T, label string, ds ...time.Duration) time.Duration {
	return rapid.SampledFrom(ds).Draw(t, label)
}

// at is the time of a caller: now, or a lagging clock's.
func (m *machine) at(t *rapid.T) time.Time {
	return m.now.Add(-dur(t, "lag", 0, 0, 0, 300*time.Microsecond, time.Millisecond, 30*time.Millisecond))
}

func (m *machine) lease(t *rapid.T) time.Duration {
	return dur(t, "lease", time.Millisecond, 1700*time.Microsecond, 50*time.Millisecond, time.Second)
}

func (m *machine) retention(t *rapid.T) time.Duration {
	return dur(t, "retention", 10*time.Millisecond, 500*time.Millisecond, 2*time.Second)
}

// pickRecord draws one of recs, or skips the action if there is none.
func pickRecord(t *rapid.T, recs []core.Record, label string) core.Record {
	if len(recs) == 0 {
		t.Skip("no record yet")
	}
	return rapid.SampledFrom(recs).Draw(t, label)
}

// Advance moves the clock.
func (m *machine) Advance(t *rapid.T) {
	m.now = m.now.Add(dur(t, "advance", 400*time.Microsecond, time.Millisecond, 20*time.Millisecond, 200*time.Millisecond, 1100*time.Millisecond))
}

// Reserve reserves a key over nothing, over the model's record as a
// decision would see it, or over a record seen earlier (stale).
func (m *machine) Reserve(t *rapid.T) {
	key, now := m.key(t), m.at(t)
	var prev *core.Record
	switch rapid.IntRange(0, 2).Draw(t, "prev") {
	case 1:
		prev = m.states[key].live(now)
	case 2:
		r := pickRecord(t, m.seen, "stale prev")
		prev = &r
		key = r.Key
	}
	rec := core.Reserve(key, m.fp(t), m.token(), prev, now, now.Add(m.lease(t)), m.retention(t))
	if m.call(t, Op{Kind: Reserve, Key: key, Rec: rec, Prev: prev, Now: now}).Verdict == OK {
		m.held = append(m.held, rec)
	}
}

// Acquire reserves a key in one write.
func (m *machine) Acquire(t *rapid.T) {
	if !m.t.Can(Acquire) {
		t.Skip("no Acquirer")
	}
	key, now := m.key(t), m.at(t)
	rec := core.Reserve(key, m.fp(t), m.token(), nil, now, now.Add(m.lease(t)), m.retention(t))
	p := core.Policy{MaxAttempts: rapid.IntRange(1, 3).Draw(t, "max attempts")}
	if res := m.call(t, Op{Kind: Acquire, Key: key, Rec: rec, Now: now, Policy: p}); res.Verdict == OK {
		m.held = append(m.held, *res.Rec)
	}
}

// Complete writes an outcome of a reservation made earlier.
func (m *machine) Complete(t *rapid.T) { m.complete(t, Complete) }

// CompleteStaged commits a success with a staged write.
func (m *machine) CompleteStaged(t *rapid.T) {
	if !m.t.Can(CompleteStaged) {
		t.Skip("no staging")
	}
	m.complete(t, CompleteStaged)
}

func (m *machine) complete(t *rapid.T, kind Kind) {
	rec := pickRecord(t, m.held, "holder")
	now, ret := m.at(t), m.retention(t)
	var out core.Record
	switch outcome := rapid.IntRange(0, 2).Draw(t, "outcome"); {
	case outcome == 0 || kind == CompleteStaged:
		out = core.Succeed(rec, []byte(`{"by":"`+rec.LeaseToken+`"}`), now, ret)
	default:
		out = core.Fail(rec, errors.New("boom"), outcome == 1, now, ret)
	}
	m.call(t, Op{Kind: kind, Key: rec.Key, Rec: out})
}

// RecordStep records a step under a reservation made earlier (its lease
// live or not), or under a token no one holds.
func (m *machine) RecordStep(t *rapid.T) {
	if !m.t.Can(RecordStep) {
		t.Skip("no StepRecorder")
	}
	key, token := m.key(t), "nobody"
	if rapid.IntRange(0, 4).Draw(t, "holder or nobody") > 0 {
		rec := pickRecord(t, m.held, "holder")
		key, token = rec.Key, rec.LeaseToken
	}
	step := core.Step{Name: rapid.SampledFrom([]string{"charge", "mail"}).Draw(t, "step"),
		Result: []byte(rapid.SampledFrom([]string{"1", "2"}).Draw(t, "step result"))}
	m.call(t, Op{Kind: RecordStep, Key: key, Token: token, Step: step, Now: m.at(t)})
}

// RenewLease renews the lease of a reservation made earlier.
func (m *machine) RenewLease(t *rapid.T) {
	if !m.t.Can(RenewLease) {
		t.Skip("no LeaseRenewer")
	}
	rec, now := pickRecord(t, m.held, "holder"), m.at(t)
	if res := m.call(t, Op{Kind: RenewLease, Key: rec.Key, Rec: rec, Until: now.Add(m.lease(t)), Now: now}); res.Verdict == OK {
		m.held = append(m.held, *res.Rec)
	}
}

// Release releases a record seen earlier (current or not).
func (m *machine) Release(t *rapid.T) {
	if !m.t.Can(Release) {
		t.Skip("no Releaser")
	}
	rec := pickRecord(t, m.seen, "record read")
	m.call(t, Op{Kind: Release, Key: rec.Key, Rec: rec})
}

// Get reads a key at a caller's time.
func (m *machine) Get(t *rapid.T) { m.call(t, Op{Kind: Get, Key: m.key(t), Now: m.at(t)}) }

// Effects reads a key's effect counter.
func (m *machine) Effects(t *rapid.T) {
	if !m.t.Can(Effects) {
		t.Skip("no staging")
	}
	m.call(t, Op{Kind: Effects, Key: m.key(t)})
}

// Retry makes the last write again, as a caller whose answer was lost does.
func (m *machine) Retry(t *rapid.T) {
	if m.last == nil {
		t.Skip("no write yet")
	}
	m.call(t, *m.last)
}
