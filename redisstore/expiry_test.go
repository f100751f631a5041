package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
)

// TestServerExpiryNeverBeforeLeaseEnd: the server deletes a record at the
// later of its retention's end and its lease's end, plus the margin; never
// while its lease lives.
func TestServerExpiryNeverBeforeLeaseEnd(t *testing.T) {
	t.Parallel()
	integration(t)
	client := newClient(t, "", nil)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	for _, tc := range []struct {
		name      string
		margin    time.Duration
		lease     time.Duration
		retention time.Duration // overrides core.Reserve's ExpiresAt when positive
		want      time.Time
	}{
		{"retention after the lease", 0, time.Minute, 0, now.Add(time.Hour)},
		{"lease after retention", 0, 3 * time.Hour, 0, now.Add(3 * time.Hour)},
		{"retention cut before a live lease", 0, 10 * time.Minute, time.Minute, now.Add(10 * time.Minute)},
		{"margin added", time.Minute, 10 * time.Minute, time.Minute, now.Add(11 * time.Minute)},
		{"sub-millisecond lease end rounded up", 0, 2*time.Hour + 300*time.Microsecond, 0, now.Add(2*time.Hour + time.Millisecond)},
	} {
		s := newStore(t, client, WithExpiryMargin(tc.margin))
		rec := core.Reserve("evt:"+tc.name, fp, "tok-a", nil, now, now.Add(tc.lease), time.Hour)
		if tc.retention > 0 {
			rec.ExpiresAt = now.Add(tc.retention)
		}
		if err := s.Reserve(ctx, rec, nil, now); err != nil {
			t.Fatal(err)
		}
		got, err := client.Do(ctx, "pexpiretime", s.Name(rec.Key)).Int64()
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want.UnixMilli() || got < ceilMillis(rec.LeaseUntil) {
			t.Errorf("%s: server expiry %v, want %v (lease ends %v)", tc.name, time.UnixMilli(got), tc.want, rec.LeaseUntil)
		}
	}
}

// TestServerExpiryOfCompletedAndEternalRecords: a completion moves the
// server-side expiry to its own retention; a record with no retention end
// is kept.
func TestServerExpiryOfCompletedAndEternalRecords(t *testing.T) {
	t.Parallel()
	integration(t)
	client := newClient(t, "", nil)
	s := newStore(t, client)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	rec := reservation("evt:completed", "tok-a", now, time.Minute)
	if err := s.Reserve(ctx, rec, nil, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(ctx, core.Succeed(rec, []byte(`1`), now, 5*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := client.Do(ctx, "pexpiretime", s.Name(rec.Key)).Val(); got != now.Add(5*time.Hour+DefaultExpiryMargin).UnixMilli() {
		t.Errorf("server expiry after completion = %v, want retention end plus margin", got)
	}
	eternal := reservation("evt:eternal", "tok-a", now, time.Minute)
	eternal.ExpiresAt = time.Time{}
	if err := s.Reserve(ctx, eternal, nil, now); err != nil {
		t.Fatal(err)
	}
	if got := client.Do(ctx, "pexpiretime", s.Name(eternal.Key)).Val(); got != int64(-1) {
		t.Errorf("server expiry of a record without retention end = %v, want -1 (none)", got)
	}
}

// TestClockIsTheCallers: the store compares with the now it is given, not
// with the server's clock, which serves only to delete records. For a
// caller whose clock is ten seconds behind the server's, a margin of 0 lets
// the server delete a fresh reservation at once (its lease is over by the
// server's clock): the holder then loses its lease. The default margin
// keeps the record, and the caller sees it until its own clock reaches the
// record's end.
func TestClockIsTheCallers(t *testing.T) {
	t.Parallel()
	integration(t)
	client := newClient(t, "", nil)
	ctx := context.Background()
	behind := time.Now().Add(-10 * time.Second).Truncate(time.Millisecond) // the caller's clock
	for _, tc := range []struct {
		name     string
		margin   time.Duration
		wantKept bool
	}{
		{"no margin", 0, false},
		{"default margin", DefaultExpiryMargin, true},
	} {
		s := newStore(t, client, WithExpiryMargin(tc.margin))
		rec := core.Reserve("evt:skew", fp, "tok-a", nil, behind, behind.Add(2*time.Second), time.Second)
		if err := s.Reserve(ctx, rec, nil, behind); err != nil {
			t.Fatal(err)
		}
		if kept := client.Exists(ctx, s.Name(rec.Key)).Val() == 1; kept != tc.wantKept {
			t.Fatalf("%s: record kept by the server = %v, want %v", tc.name, kept, tc.wantKept)
		}
		_, err := s.Complete(ctx, core.Succeed(rec, []byte(`1`), behind.Add(time.Second), 2*time.Second))
		if !tc.wantKept {
			if !errors.Is(err, idem.ErrLeaseLost) {
				t.Errorf("%s: Complete = %v, want ErrLeaseLost", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: Complete = %v", tc.name, err)
		}
		if _, err := s.Get(ctx, rec.Key, behind.Add(2999*time.Millisecond)); err != nil {
			t.Errorf("%s: Get before the record's end = %v, want the record", tc.name, err)
		}
		if _, err := s.Get(ctx, rec.Key, behind.Add(3*time.Second)); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("%s: Get at the record's end = %v, want ErrNotFound", tc.name, err)
		}
	}
}

// TestShortRetention: through a runner with a short retention and a fake
// clock, a key runs again once its retention has ended, whether or not the
// server has deleted the record yet.
func TestShortRetention(t *testing.T) {
	t.Parallel()
	integration(t)
	s := newStore(t, newClient(t, "", nil))
	clock := fakeclock.New(time.Now().Add(time.Hour).Truncate(time.Millisecond))
	r, err := idem.New(s, idem.WithRetention(2*time.Second), idem.WithClock(clock.Now), idem.WithSleep(clock.Sleep))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	runs := 0
	handler := func(context.Context) ([]byte, error) { runs++; return []byte(`"done"`), nil }
	steps := []struct {
		advance      time.Duration
		wantReplayed bool
		wantRuns     int
	}{
		{0, false, 1},
		{1900 * time.Millisecond, true, 1},
		{100 * time.Millisecond, false, 2}, // retention (2 s) ended
		{time.Second, true, 2},
	}
	for i, st := range steps {
		clock.Advance(st.advance)
		out, err := r.Do(ctx, "evt:short:retention", []byte(`{}`), handler)
		if err != nil || out.Replayed != st.wantReplayed || runs != st.wantRuns {
			t.Fatalf("step %d: Do = %+v, %v; runs %d; want replayed %v, runs %d", i, out, err, runs, st.wantReplayed, st.wantRuns)
		}
	}
}
