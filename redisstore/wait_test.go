package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem/core"
)

// TestWithWait: with a replica, every write returns once the replica has
// it; asking for more replicas than there are fails the write as not
// replicated (transient), and a retry of that write waits again.
func TestWithWait(t *testing.T) {
	t.Parallel()
	// Redis waits 5 s (repl-diskless-sync-delay) for more replicas before a
	// first sync; here there is one.
	primary := startRedis(t, "--repl-diskless-sync-delay", "0")
	_, port, _ := strings.Cut(primary.Addr, ":")
	replica := startRedis(t, "--replicaof", "127.0.0.1", port)
	ctx := context.Background()
	client := newClient(t, primary.Addr, nil)
	// The replica is in sync once it acknowledges a write made on one connection.
	conn := client.Conn()
	if err := conn.Set(ctx, "sync", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Wait(ctx, 1, 10*time.Second).Result(); n != 1 || err != nil {
		t.Fatalf("WAIT for the replica = %d, %v", n, err)
	}
	conn.Close()
	replicaClient := newClient(t, replica.Addr, nil)

	s := newStore(t, client, WithWait(1, 2*time.Second))
	now := time.Now()
	rec := reservation("evt:replicated", "tok-a", now, time.Minute)
	if err := s.Reserve(ctx, rec, nil, now); err != nil {
		t.Fatalf("Reserve = %v", err)
	}
	if got := replicaClient.HGet(ctx, s.Name(rec.Key), fieldToken).Val(); got != "tok-a" {
		t.Errorf("replica holds token %q right after Reserve, want tok-a", got)
	}
	done, err := s.Complete(ctx, core.Succeed(rec, []byte(`1`), now, time.Hour))
	if err != nil {
		t.Fatalf("Complete = %v", err)
	}
	if got := replicaClient.HGet(ctx, s.Name(rec.Key), fieldStatus).Val(); got != string(core.StatusSucceeded) {
		t.Errorf("replica holds status %q right after Complete, want succeeded", got)
	}
	if again, err := s.Complete(ctx, core.Succeed(rec, []byte(`1`), now, time.Hour)); err != nil || !core.SameWrite(again, done) {
		t.Errorf("retried Complete = %v, %v; want the stored outcome", again, err)
	}

	greedy := newStore(t, client, WithWait(2, 50*time.Millisecond))
	other := reservation("evt:under-replicated", "tok-b", now, time.Minute)
	assertErr(t, "Reserve waiting for 2 replicas of 1", greedy.Reserve(ctx, other, nil, now), ErrNotReplicated, true)
	if got := client.HGet(ctx, greedy.Name(other.Key), fieldToken).Val(); got != "tok-b" {
		t.Errorf("primary holds token %q, want the applied reservation tok-b", got)
	}
	assertErr(t, "retried Reserve", greedy.Reserve(ctx, other, nil, now), ErrNotReplicated, true)
	// The same write through a store that waits for one replica succeeds.
	same, err := New(client, WithPrefix(greedy.prefix), WithWait(1, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := same.Reserve(ctx, other, nil, now); err != nil {
		t.Errorf("retried Reserve waiting for 1 replica = %v, want nil", err)
	}

	// A write whose answer (and so its WAIT's) is lost is found by the
	// store's re-read, but no WAIT confirmed it: not replicated, transient.
	proxy := startLossyProxy(t, primary.Addr)
	lossy := newStore(t, newClient(t, proxy.addr(), nil, noRetries), WithPrefix(s.prefix), WithWait(1, 50*time.Millisecond))
	lost := reservation("evt:wait-lost", "tok-c", now, time.Minute)
	proxy.armed.Store(true)
	assertErr(t, "Reserve whose answer is lost", lossy.Reserve(ctx, lost, nil, now), ErrNotReplicated, true)
	if got := client.HGet(ctx, s.Name(lost.Key), fieldToken).Val(); got != "tok-c" || proxy.dropped.Load() != 1 {
		t.Errorf("primary holds token %q after %d lost answers, want tok-c after 1", got, proxy.dropped.Load())
	}
}

func TestNewOptions(t *testing.T) {
	t.Parallel()
	short := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: time.Second})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	t.Cleanup(func() { short.Close(); ring.Close() })
	for _, tc := range []struct {
		name   string
		client Client
		opts   []Option
		ok     bool
	}{
		{"defaults", fakeClient{}, nil, true},
		{"nil client", nil, nil, false},
		{"empty prefix", fakeClient{}, []Option{WithPrefix("")}, true},
		{"prefix with a brace", fakeClient{}, []Option{WithPrefix("app:{x}:")}, false},
		{"prefix too long", fakeClient{}, []Option{WithPrefix(strings.Repeat("p", 257))}, false},
		{"no compression", fakeClient{}, []Option{WithCompressionThreshold(NoCompression)}, true},
		{"negative threshold", fakeClient{}, []Option{WithCompressionThreshold(-2)}, false},
		{"record size too small", fakeClient{}, []Option{WithMaxRecordSize(MinRecordSize - 1)}, false},
		{"record size too large", fakeClient{}, []Option{WithMaxRecordSize(MaxRecordSize + 1)}, false},
		{"negative margin", fakeClient{}, []Option{WithExpiryMargin(-time.Second)}, false},
		{"nil option", fakeClient{}, []Option{nil}, true},
		{"wait: no replicas", short, []Option{WithWait(0, 100*time.Millisecond)}, false},
		{"wait: no timeout", short, []Option{WithWait(1, 0)}, false},
		{"wait: timeout below ReadTimeout", short, []Option{WithWait(1, 500*time.Millisecond)}, true},
		{"wait: timeout not below ReadTimeout", short, []Option{WithWait(1, time.Second)}, false},
		{"wait: a ring cannot", ring, []Option{WithWait(1, 100*time.Millisecond)}, false},
		{"wait: a fake cannot", fakeClient{}, []Option{WithWait(1, 100*time.Millisecond)}, false},
	} {
		s, err := New(tc.client, tc.opts...)
		if (err == nil) != tc.ok || (err == nil) != (s != nil) {
			t.Errorf("%s: New = %v, %v; want ok %v", tc.name, s, err, tc.ok)
		}
	}
	s, err := New(fakeClient{}, WithPrefix("app:"))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Name("evt:1:charge"); got != "app:{evt:1:charge}" {
		t.Errorf("Name = %q, want app:{evt:1:charge}", got)
	}
}
