package core

import (
	"testing"
	"time"
)

// TestRenewTimeline scripts a reservation renewed twice, then taken over,
// at fixed instants t0..t9, each step checked.
func TestRenewTimeline(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	rec := Reserve("evt:1:ship", "fp", "tok-a", nil, at(0), at(30), 60*time.Second) // expires at t0+60
	steps := []struct {
		name        string
		stored      Record
		token       string
		now, until  time.Time
		renewable   bool
		renewed     bool
		wantLease   time.Time
		wantExpires time.Time
	}{
		{"renew within the lease", rec, "tok-a", at(10), at(40), true, false, at(40), at(60)},
		{"renew past retention extends it", Renew(rec, at(40), at(10)), "tok-a", at(35), at(90), true, false, at(90), at(90)},
		{"retried renewal", Renew(rec, at(90), at(35)), "tok-a", at(36), at(90), true, true, at(90), at(90)},
		{"renewal that would shorten the lease", Renew(rec, at(90), at(35)), "tok-a", at(36), at(80), true, true, at(80), at(90)},
		{"another holder's token", Renew(rec, at(90), at(35)), "tok-b", at(36), at(100), false, false, at(100), at(100)},
		{"lease ended at now", Renew(rec, at(90), at(35)), "tok-a", at(90), at(120), false, false, at(120), at(120)},
	}
	for i, s := range steps {
		if got := Renewable(s.stored, s.token, s.now); got != s.renewable {
			t.Errorf("step %d (%s): Renewable = %v want %v", i, s.name, got, s.renewable)
		}
		if got := Renewed(s.stored, s.token, s.until); got != s.renewed {
			t.Errorf("step %d (%s): Renewed = %v want %v", i, s.name, got, s.renewed)
		}
		got := Renew(s.stored, s.until, s.now)
		if !got.LeaseUntil.Equal(s.wantLease) || !got.ExpiresAt.Equal(s.wantExpires) || !got.UpdatedAt.Equal(s.now) {
			t.Errorf("step %d (%s): Renew = %v updated %s, want lease %s expires %s", i, s.name, got, got.UpdatedAt, s.wantLease, s.wantExpires)
		}
		if got.LeaseToken != s.stored.LeaseToken || got.Attempts != s.stored.Attempts || got.Status != s.stored.Status {
			t.Errorf("step %d (%s): Renew changed more than the lease: %v from %v", i, s.name, got, s.stored)
		}
	}
}

func TestRenewableRefusesCompletedRecords(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	rec := Reserve("evt:1:ship", "fp", "tok-a", nil, t0, t0.Add(time.Minute), time.Hour)
	for _, tc := range []struct {
		name   string
		stored Record
	}{
		{"succeeded", Succeed(rec, []byte(`1`), t0, time.Hour)},
		{"failed", Fail(rec, nil, true, t0, time.Hour)},
	} {
		if Renewable(tc.stored, "tok-a", t0) || Renewed(tc.stored, "tok-a", t0) {
			t.Errorf("%s: a completed record is renewable", tc.name)
		}
	}
}

func TestRenewKeepsNeverExpiring(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	rec := Record{Status: StatusInProgress, LeaseToken: "tok", LeaseUntil: t0}
	if got := Renew(rec, t0.Add(time.Hour), t0); !got.ExpiresAt.IsZero() {
		t.Errorf("Renew of a record that never expires set ExpiresAt %s", got.ExpiresAt)
	}
}
