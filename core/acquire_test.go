package core

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// acquireCases are stored records of every status, lease, retention,
// fingerprint and attempt count, around leases and retentions ending at
// t0+30 and t0+60, with a nil record first.
func acquireCases() []*Record {
	out := []*Record{nil}
	for _, st := range []Status{StatusInProgress, StatusSucceeded, StatusFailed, "bogus"} {
		for _, retryable := range []bool{false, true} {
			for _, lease := range []int{-1, 30, 60} {
				for _, exp := range []int{-1, 30, 60} {
					for _, fp := range []string{fpA, fpB} {
						for _, attempts := range []int{1, 2, 3} {
							r := Record{Key: key, Fingerprint: fp, Status: st, Retryable: retryable, Attempts: attempts, LeaseToken: "tok-old"}
							if lease >= 0 {
								r.LeaseUntil = at(lease)
							}
							if exp >= 0 {
								r.ExpiresAt = at(exp)
							}
							out = append(out, &r)
						}
					}
				}
			}
		}
	}
	return out
}

// TestAcquirableIsDecideExecute checks the one-write rule against the
// decision table over every generated record, instant and attempt bound.
func TestAcquirableIsDecideExecute(t *testing.T) {
	n := 0
	for _, stored := range acquireCases() {
		for _, sec := range []int{0, 29, 30, 45, 59, 60, 61} {
			for _, max := range []int{0, 2, 3} {
				n++
				p := Policy{MaxAttempts: max}
				d := Decide(key, stored, fpA, at(sec), p)
				got := Acquirable(stored, fpA, at(sec), p)
				if want := d.Action == Execute; got != want {
					t.Errorf("case %d: Acquirable(%v, t0+%d, max %d) = %v, Decide says %v", n, stored, sec, max, got, d.Action)
				}
				if !got {
					continue
				}
				rec := Acquire(Reserve(key, fpA, "tok-new", nil, at(sec), at(sec+30), time.Hour), stored, at(sec))
				if rec.Attempts != d.Attempt {
					t.Errorf("case %d: Acquire over %v at t0+%d: attempt %d, Decide says %d", n, stored, sec, rec.Attempts, d.Attempt)
				}
				if via := Reserve(key, fpA, "tok-new", d.Prev, at(sec), at(sec+30), time.Hour); via.String() != rec.String() || via.UpdatedAt != rec.UpdatedAt || via.LeaseToken != rec.LeaseToken {
					t.Errorf("case %d: Acquire = %v, Reserve with the decision's prev = %v", n, rec, via)
				}
			}
		}
	}
	if n < 1000 {
		t.Fatalf("only %d cases", n)
	}
}

// TestAcquireTimeline scripts one key through one-write reservations: a
// first run, a retry of a retryable failure, a takeover, the attempt bound,
// and a restart after retention.
func TestAcquireTimeline(t *testing.T) {
	p := Policy{MaxAttempts: 3}
	var stored *Record
	type step struct {
		name        string
		sec         int
		before      func() // the write another party makes first
		want        bool
		wantAttempt int
	}
	steps := []step{
		{name: "first run", sec: 0, want: true, wantAttempt: 1},
		{name: "live lease blocks", sec: 10, want: false},
		{name: "retry of a retryable failure", sec: 20, before: func() {
			f := Fail(*stored, errors.New("throttled"), true, at(15), time.Hour)
			stored = &f
		}, want: true, wantAttempt: 2},
		{name: "takeover of an ended lease", sec: 60, want: true, wantAttempt: 3},
		{name: "bound reached", sec: 120, before: func() {
			f := Fail(*stored, errors.New("throttled"), true, at(100), time.Hour)
			stored = &f
		}, want: false},
		{name: "past retention restarts at 1", sec: 100 + 3600, want: true, wantAttempt: 1},
	}
	for i, s := range steps {
		if s.before != nil {
			s.before()
		}
		now := at(s.sec)
		if got := Acquirable(stored, fpA, now, p); got != s.want {
			t.Fatalf("step %d (%s): Acquirable = %v want %v", i, s.name, got, s.want)
		}
		if !s.want {
			continue
		}
		rec := Acquire(Reserve(key, fpA, fmt.Sprintf("tok%d", i), nil, now, now.Add(30*time.Second), time.Hour), stored, now)
		if rec.Attempts != s.wantAttempt {
			t.Fatalf("step %d (%s): attempt %d want %d", i, s.name, rec.Attempts, s.wantAttempt)
		}
		stored = &rec
	}
}

func TestAcquired(t *testing.T) {
	rec := Reserve(key, fpA, "tok", nil, at(0), at(30), time.Hour)
	tests := []struct {
		name   string
		stored func(r Record) Record
		want   bool
	}{
		{name: "the write itself, counted by the store", stored: func(r Record) Record { r.Attempts = 4; return r }, want: true},
		{name: "another token", stored: func(r Record) Record { r.LeaseToken = "other"; return r }, want: false},
		{name: "completed since", stored: func(r Record) Record { return Succeed(r, nil, at(1), time.Hour) }, want: false},
		{name: "another key", stored: func(r Record) Record { r.Key = "evt:other:key"; return r }, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Acquired(tc.stored(rec), rec); got != tc.want {
				t.Errorf("Acquired = %v want %v", got, tc.want)
			}
		})
	}
}

func TestPolicyAttemptLimit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		max, want int
	}{{"zero value", 0, 1}, {"negative", -2, 1}, {"set", 5, 5}} {
		if got := (Policy{MaxAttempts: tc.max}).AttemptLimit(); got != tc.want {
			t.Errorf("%s: AttemptLimit = %d want %d", tc.name, got, tc.want)
		}
	}
}
