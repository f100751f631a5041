package core

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

const (
	key = "evt:order-42:charge"
	fpA = "aaaa"
	fpB = "bbbb"
)

// TestDecideTimeline scripts one key through every row of the decision table,
// step by step, as the stored record evolves.
func TestDecideTimeline(t *testing.T) {
	p := Policy{MaxAttempts: 3}
	var rec *Record
	type step struct {
		name        string
		now         time.Time
		fp          string
		wantAction  Action
		wantErr     error
		wantAttempt int
		takeover    bool
		after       func(d Decision) // applies the write the caller would make
	}
	steps := []step{
		{name: "first call executes", now: at(0), fp: fpA, wantAction: Execute, wantAttempt: 1, after: func(d Decision) {
			r := Reserve(key, fpA, "tok1", d.Prev, at(0), at(30), time.Hour)
			rec = &r
		}},
		{name: "duplicate during live lease waits", now: at(10), fp: fpA, wantAction: InProgress, wantErr: ErrInProgress},
		{name: "other payload during lease is rejected", now: at(10), fp: fpB, wantAction: Reject, wantErr: ErrKeyReused},
		{name: "lease ended: take over", now: at(30), fp: fpA, wantAction: Execute, wantAttempt: 2, takeover: true, after: func(d Decision) {
			r := Reserve(key, fpA, "tok2", d.Prev, at(30), at(60), time.Hour)
			rec = &r
		}},
		{name: "transient failure recorded: execute again", now: at(40), fp: fpA, wantAction: Execute, wantAttempt: 3, takeover: false, after: func(d Decision) {
			// Before this step, the holder failed retryably.
			r := Reserve(key, fpA, "tok3", d.Prev, at(40), at(70), time.Hour)
			rec = &r
		}},
		{name: "attempts exhausted", now: at(50), fp: fpA, wantAction: Reject, wantErr: ErrRetriesExhausted},
		{name: "past retention counts as absent", now: at(50).Add(2 * time.Hour), fp: fpB, wantAction: Execute, wantAttempt: 1},
	}
	for i, s := range steps {
		if s.name == "transient failure recorded: execute again" {
			f := Fail(*rec, errors.New("throttled"), true, at(35), time.Hour)
			rec = &f
		}
		if s.name == "attempts exhausted" {
			f := Fail(*rec, errors.New("throttled"), true, at(45), time.Hour)
			rec = &f
		}
		d := Decide(key, rec, s.fp, s.now, p)
		if d.Action != s.wantAction {
			t.Fatalf("step %d (%s): action = %v want %v", i, s.name, d.Action, s.wantAction)
		}
		if !errors.Is(d.Err, s.wantErr) || (s.wantErr == nil && d.Err != nil) {
			t.Fatalf("step %d (%s): err = %v want %v", i, s.name, d.Err, s.wantErr)
		}
		if s.wantAction == Execute && (d.Attempt != s.wantAttempt || d.Takeover != s.takeover) {
			t.Fatalf("step %d (%s): attempt %d takeover %v, want %d %v", i, s.name, d.Attempt, d.Takeover, s.wantAttempt, s.takeover)
		}
		if s.wantAction == InProgress && !d.RetryAt.Equal(at(30)) {
			t.Fatalf("step %d (%s): retry at %v want %v", i, s.name, d.RetryAt, at(30))
		}
		if s.after != nil {
			s.after(d)
		}
	}
}

func TestDecideTable(t *testing.T) {
	live := Reserve(key, fpA, "tok", nil, at(0), at(30), time.Hour)
	succeeded := Succeed(live, []byte(`{"ok":true}`), at(1), time.Hour)
	permanent := Fail(live, errors.New("card declined"), false, at(1), time.Hour)
	retryable := Fail(live, errors.New("timeout"), true, at(1), time.Hour)
	exhausted := retryable
	exhausted.Attempts = 3
	unknown := live
	unknown.Status = "weird"
	p := Policy{MaxAttempts: 3}
	tests := []struct {
		name     string
		key      string
		rec      *Record
		fp       string
		now      time.Time
		want     Action
		wantErr  error
		takeover bool
	}{
		{"no record", key, nil, fpA, at(0), Execute, nil, false},
		{"invalid key", "short", nil, fpA, at(0), Reject, ErrInvalidKey, false},
		{"invalid key with record", "bad key with spaces", &succeeded, fpA, at(2), Reject, ErrInvalidKey, false},
		{"live lease", key, &live, fpA, at(29), InProgress, ErrInProgress, false},
		{"lease ends exactly now", key, &live, fpA, at(30), Execute, nil, true},
		{"succeeded replays", key, &succeeded, fpA, at(2), Replay, nil, false},
		{"succeeded other payload", key, &succeeded, fpB, at(2), Reject, ErrKeyReused, false},
		{"permanent failure replays", key, &permanent, fpA, at(2), Replay, ErrPermanentFailure, false},
		{"retryable executes", key, &retryable, fpA, at(2), Execute, nil, false},
		{"retryable exhausted", key, &exhausted, fpA, at(2), Reject, ErrRetriesExhausted, false},
		{"expired succeeded executes", key, &succeeded, fpB, at(1).Add(time.Hour), Execute, nil, false},
		{"unknown status", key, &unknown, fpA, at(2), Reject, ErrPermanentFailure, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := Decide(tc.key, tc.rec, tc.fp, tc.now, p)
			if d.Action != tc.want || !errors.Is(d.Err, tc.wantErr) || (tc.wantErr == nil && d.Err != nil) || d.Takeover != tc.takeover {
				t.Fatalf("Decide = %v err %v takeover %v, want %v err %v takeover %v", d.Action, d.Err, d.Takeover, tc.want, tc.wantErr, tc.takeover)
			}
		})
	}
}

func TestDecideReplayedFailureCarriesMessage(t *testing.T) {
	rec := Fail(Reserve(key, fpA, "tok", nil, at(0), at(30), time.Hour), errors.New("card declined"), false, at(1), time.Hour)
	d := Decide(key, &rec, fpA, at(2), Policy{})
	var fe *FailureError
	if !errors.As(d.Err, &fe) || !fe.Replayed || fe.Message != "card declined" || fe.Attempts != 1 {
		t.Fatalf("err = %#v, want a replayed FailureError with the stored message", d.Err)
	}
	if fe.Unwrap() != nil {
		t.Fatalf("replayed failure unwraps to %v, want nil", fe.Unwrap())
	}
	if got := fe.Error(); got != "idem: permanent failure (replayed, 1 attempts): card declined" {
		t.Fatalf("Error() = %q", got)
	}
	fresh := &FailureError{Message: "x", Attempts: 2, Err: errors.New("x")}
	if got := fresh.Error(); got != "idem: permanent failure (2 attempts): x" {
		t.Fatalf("Error() = %q", got)
	}
}

func TestPolicyZeroValueAllowsOneAttempt(t *testing.T) {
	rec := Fail(Reserve(key, fpA, "tok", nil, at(0), at(30), time.Hour), errors.New("x"), true, at(1), time.Hour)
	if d := Decide(key, &rec, fpA, at(2), Policy{}); d.Action != Reject || !errors.Is(d.Err, ErrRetriesExhausted) {
		t.Fatalf("zero policy: %v %v, want reject with ErrRetriesExhausted", d.Action, d.Err)
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[Action]string{Execute: "execute", Replay: "replay", InProgress: "in_progress", Reject: "reject", Action(99): "Action(99)"} {
		if got := a.String(); got != want {
			t.Errorf("%d.String() = %q want %q", int(a), got, want)
		}
	}
}

func TestTransitions(t *testing.T) {
	r1 := Reserve(key, fpA, "tok1", nil, at(0), at(30), time.Hour)
	if r1.Status != StatusInProgress || r1.Attempts != 1 || !r1.ExpiresAt.Equal(at(3600)) || !r1.LeaseUntil.Equal(at(30)) {
		t.Fatalf("Reserve = %v", r1)
	}
	f1 := Fail(r1, errors.New("busy"), true, at(5), time.Hour)
	r2 := Reserve(key, fpA, "tok2", &f1, at(5), at(30), time.Hour)
	if r2.Attempts != 2 || r1.Attempts != 1 || r2.LeaseToken != "tok2" {
		t.Fatalf("Reserve over a retryable failure = %v (input %v)", r2, f1)
	}
	s := Succeed(r2, []byte("x"), at(6), time.Minute)
	if s.Status != StatusSucceeded || string(s.Result) != "x" || !s.LeaseUntil.IsZero() || !s.ExpiresAt.Equal(at(66)) || s.LeaseToken != "tok2" {
		t.Fatalf("Succeed = %v", s)
	}
	f := Fail(r2, nil, true, at(7), time.Minute)
	if f.Status != StatusFailed || !f.Retryable || f.Error != "" {
		t.Fatalf("Fail(nil) = %v", f)
	}
	expired := s
	if !expired.Expired(at(66)) || expired.Expired(at(65)) {
		t.Fatalf("Expired boundary wrong")
	}
	if (&Record{}).Expired(at(0)) {
		t.Fatalf("zero ExpiresAt must never expire")
	}
	// Reserving over an expired record starts again at attempt 1.
	again := Reserve(key, fpA, "tok9", &f, at(7).Add(time.Hour), at(7).Add(time.Hour+time.Minute), time.Hour)
	if again.Attempts != 1 {
		t.Fatalf("attempts over expired record = %d want 1", again.Attempts)
	}
	if !StatusInProgress.Valid() || Status("x").Valid() {
		t.Fatalf("Status.Valid wrong")
	}
	if r1.String() == "" {
		t.Fatalf("empty String")
	}
}

// TestLiveLeaseOutlivesRetention is the rule that an in-progress record never
// counts as absent while its lease lives, whatever the retention.
func TestLiveLeaseOutlivesRetention(t *testing.T) {
	rec := Reserve(key, fpA, "tok1", nil, at(0), at(900), time.Minute)
	if !rec.ExpiresAt.Equal(at(900)) {
		t.Fatalf("Reserve with retention 1m and lease 15m: ExpiresAt = %v, want the lease end %v", rec.ExpiresAt, at(900))
	}
	forged := rec
	forged.ExpiresAt = at(60) // as written by a store or version that did not extend it
	for _, tc := range []struct {
		name string
		sec  int
		want bool
	}{
		{"retention ended, lease live", 61, false},
		{"lease ends", 900, true},
		{"after both", 1000, true},
	} {
		if got := forged.Expired(at(tc.sec)); got != tc.want {
			t.Errorf("%s: Expired(t0+%ds) = %v want %v", tc.name, tc.sec, got, tc.want)
		}
	}
	if d := Decide(key, &forged, fpA, at(61), Policy{MaxAttempts: 3}); d.Action != InProgress {
		t.Fatalf("Decide on a live lease past retention = %v, want in_progress", d.Action)
	}
}

// TestTakeoverCountsTowardMaxAttempts: a holder that crashed used an attempt,
// so a key whose holders keep crashing stops at the bound.
func TestTakeoverCountsTowardMaxAttempts(t *testing.T) {
	rec := Reserve(key, fpA, "tok1", nil, at(0), at(30), time.Hour)
	rec.Attempts = 3
	d := Decide(key, &rec, fpA, at(31), Policy{MaxAttempts: 3})
	if d.Action != Reject || !errors.Is(d.Err, ErrRetriesExhausted) {
		t.Fatalf("takeover at the bound = %v %v, want reject ErrRetriesExhausted", d.Action, d.Err)
	}
	rec.Attempts = 2
	if d := Decide(key, &rec, fpA, at(31), Policy{MaxAttempts: 3}); d.Action != Execute || !d.Takeover || d.Attempt != 3 {
		t.Fatalf("takeover below the bound = %+v, want execute attempt 3", d)
	}
}
