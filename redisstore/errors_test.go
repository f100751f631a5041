package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fit"
)

// noRetries is a client without go-redis's own retries and with short
// timeouts, so that each failure reaches the store at once.
func noRetries(o *redis.Options) {
	o.MaxRetries = -1
	o.ReadTimeout = 100 * time.Millisecond
	o.WriteTimeout = 100 * time.Millisecond
	o.DialTimeout = 200 * time.Millisecond
	o.DialerRetries = 1
}

// TestErrorReplies: a server's error answer is translated by its code; the
// write did not happen, so no re-read is made.
func TestErrorReplies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		reply     string
		sentinel  error
		transient bool
	}{
		{"-LOADING Redis is loading the dataset in memory", ErrUnavailable, true},
		{"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.", ErrUnavailable, true},
		{"-TRYAGAIN Multiple keys request during rehashing of slot", ErrUnavailable, true},
		{"-CLUSTERDOWN The cluster is down", ErrUnavailable, true},
		{"-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.", ErrUnavailable, true},
		{"-READONLY You can't write against a read only replica.", ErrUnavailable, true},
		{"-OOM command not allowed when used memory > 'maxmemory'.", ErrUnavailable, true},
		{"-NOREPLICAS Not enough good replicas to write.", ErrUnavailable, true},
		{"-MOVED 3999 127.0.0.1:6381", ErrUnavailable, true},
		{"-ASK 3999 127.0.0.1:6381", ErrUnavailable, true},
		{"-ERR max number of clients reached", ErrUnavailable, true},
		{"-NOAUTH Authentication required.", ErrAccessDenied, false},
		{"-WRONGPASS invalid username-password pair or user is disabled.", ErrAccessDenied, false},
		{"-NOPERM User default has no permissions to run the 'evalsha' command", ErrAccessDenied, false},
		{"-WRONGTYPE Operation against a key holding the wrong kind of value", ErrCorruptRecord, false},
		{"-ERR unknown command 'evalsha', with args beginning with:", ErrRejected, false},
	} {
		t.Run(strings.Fields(tc.reply)[0][1:], func(t *testing.T) {
			t.Parallel()
			f := startFake(t, func([]string) string { return tc.reply + "\r\n" })
			s := newStore(t, newClient(t, f.addr(), nil, noRetries))
			ctx := context.Background()
			now := time.Now()
			rec := reservation("evt:1", "tok-a", now, time.Minute)
			assertErr(t, "Reserve", s.Reserve(ctx, rec, nil, now), tc.sentinel, tc.transient)
			_, err := s.Complete(ctx, core.Succeed(rec, nil, now, time.Hour))
			assertErr(t, "Complete", err, tc.sentinel, tc.transient)
			_, err = s.Get(ctx, rec.Key, now)
			assertErr(t, "Get", err, tc.sentinel, tc.transient)
			if got, want := f.received(), []string{"evalsha reserve", "evalsha complete", "evalsha get"}; !slices.Equal(got, want) {
				t.Errorf("server received %v, want %v (no re-read after a refused write)", got, want)
			}
		})
	}
}

// TestNoScriptFallsBackToEval: EVALSHA's NOSCRIPT is followed by one EVAL,
// whose answer counts.
func TestNoScriptFallsBackToEval(t *testing.T) {
	t.Parallel()
	f := startFake(t, func(cmd []string) string {
		if cmd[0] == "evalsha" {
			return "-NOSCRIPT No matching script. Please use EVAL.\r\n"
		}
		return "*1\r\n:1\r\n"
	})
	s := newStore(t, newClient(t, f.addr(), nil, noRetries))
	now := time.Now()
	if err := s.Reserve(context.Background(), reservation("evt:1", "tok-a", now, time.Minute), nil, now); err != nil {
		t.Fatalf("Reserve = %v, want nil", err)
	}
	if got, want := f.received(), []string{"evalsha reserve", "eval reserve"}; !slices.Equal(got, want) {
		t.Errorf("server received %v, want %v", got, want)
	}
}

// TestSilentServer: a write whose answer never comes may have happened: the
// store reads the key once before it reports the failure, transient.
func TestSilentServer(t *testing.T) {
	t.Parallel()
	f := startFake(t, func([]string) string { return "" })
	s := newStore(t, newClient(t, f.addr(), nil, noRetries))
	now := time.Now()
	rec := reservation("evt:1", "tok-a", now, time.Minute)
	assertErr(t, "Reserve", s.Reserve(context.Background(), rec, nil, now), ErrUnavailable, true)
	if got, want := f.received(), []string{"evalsha reserve", "evalsha get"}; !slices.Equal(got, want) {
		t.Errorf("server received %v, want %v (the write, then one read)", got, want)
	}
}

// TestServerStopped: a server that is gone refuses the connection; the
// write certainly did not happen: transient, and no re-read.
func TestServerStopped(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	cnt := &counter{}
	s := newStore(t, newClient(t, srv.Addr, cnt, noRetries))
	ctx := context.Background()
	now := time.Now()
	if err := s.Reserve(ctx, reservation("evt:1", "tok-a", now, time.Minute), nil, now); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	cnt.take()
	rec := reservation("evt:2", "tok-a", now, time.Minute)
	err := s.Reserve(ctx, rec, nil, now)
	assertErr(t, "Reserve after the server stopped", err, ErrUnavailable, true)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Reserve = %v, want the refused connection inside", err)
	}
	if got := cnt.take(); got["evalsha get"] != 0 {
		t.Errorf("commands = %v, want no re-read after a refused connection", got)
	}
	_, err = s.Complete(ctx, core.Succeed(rec, nil, now, time.Hour))
	assertErr(t, "Complete after the server stopped", err, ErrUnavailable, true)
}

// TestLostAnswer: the server applies a write and the connection breaks
// before its answer arrives. The store recognises its own write, by its
// re-read (client retries off) or by the script when the client retries
// (go-redis's default).
func TestLostAnswer(t *testing.T) {
	t.Parallel()
	integration(t)
	proxy := startLossyProxy(t, newClient(t, "", nil).Options().Addr)
	ctx := context.Background()
	now := time.Now()
	// Load the scripts first: a lost NOSCRIPT answer would be a write
	// that did not happen.
	warm := newStore(t, newClient(t, proxy.addr(), nil))
	first := reservation("evt:warm-up", "tok-a", now, time.Minute)
	if err := warm.Reserve(ctx, first, nil, now); err != nil {
		t.Fatal(err)
	}
	if _, err := warm.Complete(ctx, core.Succeed(first, nil, now, time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		tune       func(*redis.Options)
		wantReread int
	}{
		{"store re-reads", noRetries, 1},
		{"client retries", func(*redis.Options) {}, 0},
	} {
		cnt := &counter{}
		s := newStore(t, newClient(t, proxy.addr(), cnt, tc.tune))
		rec := reservation("evt:lost", "tok-a", now, time.Minute)
		proxy.armed.Store(true)
		if err := s.Reserve(ctx, rec, nil, now); err != nil {
			t.Fatalf("%s: Reserve with a lost answer = %v, want nil", tc.name, err)
		}
		done := core.Succeed(rec, []byte(`"ok"`), now, time.Hour)
		proxy.armed.Store(true)
		got, err := s.Complete(ctx, done)
		if err != nil || got.Status != core.StatusSucceeded || string(got.Result) != `"ok"` {
			t.Fatalf("%s: Complete with a lost answer = %v, %v; want the outcome", tc.name, got, err)
		}
		if n := cnt.take()["evalsha get"]; n != 2*tc.wantReread {
			t.Errorf("%s: %d re-reads, want %d", tc.name, n, 2*tc.wantReread)
		}
		if stored, err := s.Get(ctx, rec.Key, now); err != nil || !core.SameWrite(stored, done) {
			t.Errorf("%s: Get = %v, %v; want the completed record", tc.name, stored, err)
		}
	}
	if n := proxy.dropped.Load(); n != 4 {
		t.Errorf("%d answers dropped, want 4", n)
	}
}

// TestCorruptRecords: what the key holds must decode as a record.
func TestCorruptRecords(t *testing.T) {
	t.Parallel()
	integration(t)
	client := newClient(t, "", nil)
	s := newStore(t, client)
	ctx := context.Background()
	now := time.Now()
	if err := client.Set(ctx, s.Name("evt:string"), "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.HSet(ctx, s.Name("evt:status"), fieldStatus, "bogus", fieldAttempts, "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.HSet(ctx, s.Name("evt:gzip"), fieldStatus, "succeeded", fieldAttempts, "1",
		fieldResult, "not gzip", fieldEncoding, fit.Gzip).Err(); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"evt:string", "evt:status", "evt:gzip"} {
		_, err := s.Get(ctx, key, now)
		assertErr(t, "Get of "+key, err, ErrCorruptRecord, false)
		err = s.Reserve(ctx, reservation(key, "tok-a", now, time.Minute), nil, now)
		assertErr(t, "Reserve of "+key, err, ErrCorruptRecord, false)
	}
}

// TestTranslate: transport failures, by what they say about the write.
func TestTranslate(t *testing.T) {
	t.Parallel()
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name         string
		err          error
		sentinel     error // nil: no sentinel
		transient    bool
		maybeApplied bool
	}{
		{"refused dial", dial, ErrUnavailable, true, false},
		{"pool timeout", redis.ErrPoolTimeout, ErrUnavailable, true, false},
		{"connection reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, ErrUnavailable, true, true},
		{"EOF", io.EOF, ErrUnavailable, true, true},
		{"deadline", context.DeadlineExceeded, ErrUnavailable, true, true},
		{"canceled", context.Canceled, nil, false, true},
		{"closed client", redis.ErrClosed, nil, false, false},
		{"unknown", errors.New("something else"), nil, false, true},
	} {
		got := translate("reserve", fmt.Errorf("wrapped: %w", tc.err))
		if tc.sentinel != nil && !errors.Is(got.err, tc.sentinel) {
			t.Errorf("%s: %v, want %v", tc.name, got.err, tc.sentinel)
		}
		if !errors.Is(got.err, tc.err) {
			t.Errorf("%s: %v does not wrap the cause", tc.name, got.err)
		}
		if tr := core.Classify(got.err) == core.Transient; tr != tc.transient || got.maybeApplied != tc.maybeApplied {
			t.Errorf("%s: transient %v, maybe applied %v; want %v, %v", tc.name, tr, got.maybeApplied, tc.transient, tc.maybeApplied)
		}
	}
	own := core.MarkTransient(&Error{Op: "reserve", Err: ErrNotReplicated})
	if got := translate("reserve", own); got.err != own || got.maybeApplied {
		t.Errorf("translate(own error) = %v, %v; want it unchanged", got.err, got.maybeApplied)
	}
}

// TestCanceledContext: nothing is sent on a context that is already done.
func TestCanceledContext(t *testing.T) {
	t.Parallel()
	s, err := New(fakeClient{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	now := time.Now()
	rec := reservation("evt:1", "tok-a", now, time.Minute)
	if err := s.Reserve(ctx, rec, nil, now); !errors.Is(err, context.Canceled) {
		t.Errorf("Reserve = %v, want context.Canceled", err)
	}
	if _, err := s.Complete(ctx, core.Succeed(rec, nil, now, time.Hour)); !errors.Is(err, context.Canceled) {
		t.Errorf("Complete = %v, want context.Canceled", err)
	}
	if _, err := s.Get(ctx, rec.Key, now); !errors.Is(err, context.Canceled) {
		t.Errorf("Get = %v, want context.Canceled", err)
	}
	var ce *idem.ConflictError
	if errors.As(s.Reserve(ctx, rec, nil, now), &ce) {
		t.Errorf("a canceled Reserve reported a conflict")
	}
}
