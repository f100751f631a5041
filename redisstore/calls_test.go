package redisstore

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fakeclock"
)

// TestCallsPerPath counts the commands a runner's calls send, on a server of
// the test's own (so that its script cache starts empty): one EVALSHA per
// store write, one EVAL more the first time the server sees each script, a
// conflict answered in the same round trip, and a takeover or a retry made by
// the script that acquires the key, like a first run.
func TestCallsPerPath(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	cnt := &counter{}
	s := newStore(t, newClient(t, srv.Addr, cnt))
	clock := fakeclock.New(time.Now().Truncate(time.Millisecond))
	r, err := idem.New(s, idem.WithClock(clock.Now), idem.WithSleep(clock.Sleep), idem.WithLease(time.Second, 30*time.Second),
		idem.WithRetry(1, time.Millisecond, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ok := func(context.Context) ([]byte, error) { return []byte(`{"ok":true}`), nil }
	holder := reservation("evt:held:elsewhere", "tok-elsewhere", clock.Now(), time.Minute)
	if holder.Fingerprint, err = core.Fingerprint([]byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name       string
		key        string
		setup      func()
		want       map[string]int
		wantErr    error
		wantReplay bool
		fail       bool
	}{
		{name: "first run, scripts not loaded", key: "evt:first", want: map[string]int{
			"evalsha acquire": 1, "eval acquire": 1, "evalsha complete": 1, "eval complete": 1}},
		{name: "first run", key: "evt:second", want: map[string]int{"evalsha acquire": 1, "evalsha complete": 1}},
		{name: "duplicate of a completed key", key: "evt:second", want: map[string]int{"evalsha acquire": 1}, wantReplay: true},
		{name: "in progress elsewhere", key: "evt:held:elsewhere", want: map[string]int{"evalsha acquire": 1}, wantErr: core.ErrInProgress,
			setup: func() {
				if err := s.Reserve(ctx, holder, nil, clock.Now()); err != nil {
					t.Fatal(err)
				}
			}},
		// A takeover costs what a first run does: the script that acquires
		// the key replaces the ended lease.
		{name: "takeover of an expired lease", key: "evt:held:elsewhere", want: map[string]int{"evalsha acquire": 1, "evalsha complete": 1},
			setup: func() { clock.Advance(2 * time.Minute) }},
		{name: "transient failure", key: "evt:retry", fail: true, wantErr: idem.ErrTransientFailure,
			want: map[string]int{"evalsha acquire": 1, "evalsha complete": 1}},
		{name: "retry of a retryable failure", key: "evt:retry", want: map[string]int{"evalsha acquire": 1, "evalsha complete": 1}},
	}
	for _, st := range steps {
		if st.setup != nil {
			st.setup()
		}
		cnt.take()
		fn := ok
		if st.fail {
			fn = func(context.Context) ([]byte, error) { return nil, core.MarkTransient(errors.New("try later")) }
		}
		out, err := r.Do(ctx, st.key, []byte(`{}`), fn)
		if st.wantErr != nil && !errors.Is(err, st.wantErr) || st.wantErr == nil && err != nil {
			t.Fatalf("%s: Do = %v, want %v", st.name, err, st.wantErr)
		}
		if out.Replayed != st.wantReplay {
			t.Errorf("%s: replayed = %v, want %v", st.name, out.Replayed, st.wantReplay)
		}
		if got := cnt.take(); !maps.Equal(got, st.want) {
			t.Errorf("%s: commands %v, want %v", st.name, got, st.want)
		}
	}
}
