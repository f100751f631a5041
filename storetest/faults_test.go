package storetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/memstore"
)

func TestFaultsScript(t *testing.T) {
	var f Faults
	steps := []struct {
		name   string
		script func()
		op     Op
		want   Fault
	}{
		{"zero value", nil, Write, NoFault},
		{"set write", func() { f.Set(Write, AnswerLost, Throttled) }, Write, AnswerLost},
		{"reads untouched", nil, Read, NoFault},
		{"second of the set", nil, Write, Throttled},
		{"set used up", nil, Write, NoFault},
		{"always read", func() { f.Always(Read, TimedOut) }, Read, TimedOut},
		{"always again", nil, Read, TimedOut},
		{"set before always", func() { f.Set(Read, FailBefore) }, Read, FailBefore},
		{"always after set", nil, Read, TimedOut},
		{"set replaces", func() { f.Set(Write, Throttled, Throttled); f.Set(Write, FailBefore) }, Write, FailBefore},
		{"replaced set used up", nil, Write, NoFault},
		{"clear", func() { f.Set(Write, AnswerLost); f.Clear() }, Read, NoFault},
		{"clear removes sets", nil, Write, NoFault},
	}
	for i, s := range steps {
		if s.script != nil {
			s.script()
		}
		if got := f.Next(s.op); got != s.want {
			t.Fatalf("step %d (%s): Next(%s) = %s, want %s", i, s.name, s.op, got, s.want)
		}
	}
	if got, want := f.Injected(Write), 3; got != want {
		t.Errorf("Injected(Write) = %d, want %d", got, want)
	}
	if got, want := f.Injected(Read), 4; got != want {
		t.Errorf("Injected(Read) = %d, want %d", got, want)
	}
	var nilFaults *Faults
	if got := nilFaults.Next(Write); got != NoFault {
		t.Errorf("nil Faults: Next = %s, want NoFault", got)
	}
}

func TestFaultsConcurrent(t *testing.T) {
	var f Faults
	f.Set(Write, slices.Repeat([]Fault{AnswerLost}, 100)...)
	var wg sync.WaitGroup
	counts := make([]int, 8)
	for g := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if f.Next(Write) == AnswerLost {
					counts[g]++
				}
			}
		}()
	}
	wg.Wait()
	sum := 0
	for _, c := range counts {
		sum += c
	}
	if sum != 100 || f.Injected(Write) != 100 || f.Pending(Write) != 0 {
		t.Fatalf("faults handed out %d, Injected %d, Pending %d; want 100, 100, 0", sum, f.Injected(Write), f.Pending(Write))
	}
}

// flaw is a defect of a test store: mutants of a correct store, each of
// which some cases of RunFaults must catch.
type flaw int

const (
	noFlaw            flaw = iota
	ignoresFaults          // the transport never asks Faults
	appliesThrottled       // a throttled write is applied anyway
	permanentThrottle      // throttling is reported as a permanent error
	permanentLost          // a lost answer is reported as a permanent error
	readFailNotFound       // a failed read is reported as ErrNotFound
	forgetsOwnWrites       // a retried write is not recognised
	sameFingerprint        // a retried reservation is recognised by fingerprint, not lease token
)

// flawed is a memstore.Store behind a transport that does what f says to
// each call (each method is one request), with one flaw.
type flawed struct {
	s    *memstore.Store
	f    *Faults
	flaw flaw
}

func (w *flawed) request(op Op, apply func() error) error {
	fault := NoFault
	if w.flaw != ignoresFaults {
		fault = w.f.Next(op)
	}
	switch fault {
	case AnswerLost:
		_ = apply()
		if w.flaw == permanentLost {
			return errors.New("answer lost")
		}
		return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	case FailBefore:
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	case Throttled:
		if w.flaw == appliesThrottled {
			_ = apply()
		}
		if w.flaw == permanentThrottle {
			return core.MarkPermanent(errors.New("throttled"))
		}
		return core.MarkTransient(errors.New("throttled"))
	case TimedOut:
		return context.DeadlineExceeded
	}
	return apply()
}

func (w *flawed) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	return w.request(Write, func() error {
		cur, err := w.s.Get(ctx, rec.Key, now)
		switch {
		case err == nil && w.flaw == forgetsOwnWrites && core.SameWrite(cur, rec):
			return &idem.ConflictError{Existing: cur}
		case err == nil && w.flaw == sameFingerprint && cur.Status == core.StatusInProgress && cur.Fingerprint == rec.Fingerprint:
			return nil
		}
		return w.s.Reserve(ctx, rec, prev, now)
	})
}

func (w *flawed) Complete(ctx context.Context, rec core.Record) (stored core.Record, err error) {
	err = w.request(Write, func() (err error) {
		if cur, gerr := w.s.Get(ctx, rec.Key, rec.UpdatedAt); gerr == nil && w.flaw == forgetsOwnWrites && core.SameWrite(cur, rec) {
			return idem.ErrLeaseLost
		}
		stored, err = w.s.Complete(ctx, rec)
		return err
	})
	if err != nil {
		return core.Record{}, err
	}
	return stored, nil
}

func (w *flawed) Get(ctx context.Context, key string, now time.Time) (rec core.Record, err error) {
	err = w.request(Read, func() (err error) {
		rec, err = w.s.Get(ctx, key, now)
		return err
	})
	if err != nil && w.flaw == readFailNotFound {
		return core.Record{}, idem.ErrNotFound
	}
	return rec, err
}

// probe is a testing.TB that records a failure instead of failing the test,
// so that a case can be run against a flawed store.
type probe struct {
	testing.TB
	mu  sync.Mutex
	msg string // guarded by mu; empty while no failure
}

func (p *probe) fail(msg string) {
	p.mu.Lock()
	if p.msg == "" {
		p.msg = msg
	}
	p.mu.Unlock()
	runtime.Goexit()
}

func (p *probe) Helper()                   {}
func (p *probe) Fatalf(f string, a ...any) { p.fail(fmt.Sprintf(f, a...)) }
func (p *probe) Fatal(a ...any)            { p.fail(fmt.Sprint(a...)) }
func (p *probe) Errorf(f string, a ...any) { p.fail(fmt.Sprintf(f, a...)) }
func (p *probe) Error(a ...any)            { p.fail(fmt.Sprint(a...)) }
func (p *probe) FailNow()                  { p.fail("FailNow") }
func (p *probe) Failed() bool              { p.mu.Lock(); defer p.mu.Unlock(); return p.msg != "" }
func (p *probe) Logf(string, ...any)       {}
func (p *probe) Skipf(f string, a ...any)  { p.fail("skipped: " + fmt.Sprintf(f, a...)) }
func (p *probe) Log(...any)                {}
func (p *probe) Cleanup(func())            {}

// probeCase runs the case named name (with fault) against a flawed store
// and returns its failure message, or "" if it passed.
func probeCase(t *testing.T, name string, fault Fault, fl flaw) string {
	t.Helper()
	i := slices.IndexFunc(faultCases, func(c faultCase) bool { return c.name == name })
	if i < 0 {
		t.Fatalf("no case %s", name)
	}
	p := &probe{TB: t}
	f := &Faults{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		faultCases[i].fn(newFaultEnv(p, &flawed{s: memstore.New(), f: f, flaw: fl}, f, "probe:"+name+":"), fault)
	}()
	<-done
	return p.msg
}

// TestFaultCasesCatchFlaws runs cases of RunFaults against a correct store,
// where every case must pass, and against flawed ones, where the cases named
// must fail.
func TestFaultCasesCatchFlaws(t *testing.T) {
	for _, tc := range faultCases {
		faults := tc.faults
		if len(faults) == 0 {
			faults = []Fault{NoFault}
		}
		for _, fault := range faults {
			if msg := probeCase(t, tc.name, fault, noFlaw); msg != "" {
				t.Errorf("correct store: %s/%s failed: %s", tc.name, fault, msg)
			}
		}
	}
	flaws := []struct {
		name   string
		flaw   flaw
		caught []string // case/fault
	}{
		{"ignores faults", ignoresFaults, []string{"ReserveNotApplied/Throttled", "ReserveAnswerLost/NoFault", "CompleteNotApplied/FailBefore",
			"GetUnderFaults/TimedOut", "ReserveRaceUnderFaults/NoFault", "RunnerCompleteNeverApplied/Throttled", "RunnerCompleteAnswerLost/NoFault"}},
		{"applies throttled writes", appliesThrottled, []string{"ReserveNotApplied/Throttled", "CompleteNotApplied/Throttled"}},
		{"throttling is permanent", permanentThrottle, []string{"ReserveNotApplied/Throttled", "CompleteNotApplied/Throttled",
			"RunnerReserveNotApplied/Throttled", "RunnerCompleteNotApplied/Throttled"}},
		{"a lost answer is permanent", permanentLost, []string{"ReserveAnswerLost/NoFault", "CompleteAnswerLost/NoFault",
			"RunnerCompleteAnswerLost/NoFault", "StaleCompleteRefused/AnswerLost", "GetUnderFaults/AnswerLost"}},
		{"a failed read is not found", readFailNotFound, []string{"GetUnderFaults/FailBefore", "GetUnderFaults/AnswerLost",
			"GetUnderFaults/Throttled", "GetUnderFaults/TimedOut"}},
		{"forgets its own writes", forgetsOwnWrites, []string{"ReserveAnswerLost/NoFault", "ReserveAnswerLostCheckFails/NoFault",
			"CompleteAnswerLost/NoFault", "RunnerCompleteAnswerLost/NoFault", "RunnerRetryAnswersLost/NoFault", "ReserveRaceUnderFaults/NoFault"}},
		{"recognises a reservation by fingerprint", sameFingerprint, []string{"ReserveAnswerLost/NoFault",
			"RetriedReserveAfterTakeover/NoFault", "ReserveRaceUnderFaults/NoFault"}},
	}
	for _, fl := range flaws {
		for _, c := range fl.caught {
			name, faultName, _ := strings.Cut(c, "/")
			fault := NoFault
			for _, f := range []Fault{FailBefore, AnswerLost, Throttled, TimedOut} {
				if f.String() == faultName {
					fault = f
				}
			}
			if msg := probeCase(t, name, fault, fl.flaw); msg == "" {
				t.Errorf("store that %s: %s passed, want a failure", fl.name, c)
			} else {
				t.Logf("store that %s: %s: %s", fl.name, c, msg)
			}
		}
	}
}
