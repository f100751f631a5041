package redisstore

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// cutProxy is a TCP proxy to a Redis server that, once armed, passes only
// the first byte of the server's next reply and then closes (or resets)
// the client's connection: the command ran, and its reply was cut short.
type cutProxy struct {
	addr  string
	armed atomic.Bool
	reset bool
}

func newCutProxy(t *testing.T, server string, reset bool) *cutProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{addr: l.Addr().String(), reset: reset}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); p.serve(client, server) }()
		}
	}()
	return p
}

func (p *cutProxy) serve(client net.Conn, server string) {
	defer client.Close()
	up, err := net.Dial("tcp", server)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { _, _ = io.Copy(up, client); _ = up.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 && p.armed.CompareAndSwap(true, false) {
			_, _ = client.Write(buf[:1])
			if tc, ok := client.(*net.TCPConn); ok && p.reset {
				_ = tc.SetLinger(0)
			}
			return
		}
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestCutShortRepliesAreRecognised: Redis replies to a script in one
// RESP value, and go-redis reads an error reply only whole, so a reply cut
// short is never taken for the server's answer: it is a transport failure
// (io.ErrUnexpectedEOF, or a reset), ErrUnavailable and possibly applied,
// and the store reads the key to recognise its own write (core.SameWrite)
// before it calls the write failed. Through a proxy that lets the script
// run and cuts its reply after one byte.
func TestCutShortRepliesAreRecognised(t *testing.T) {
	t.Parallel()
	integration(t)
	for _, reset := range []bool{false, true} {
		name := map[bool]string{false: "closed", true: "reset"}[reset]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := newCutProxy(t, os.Getenv("IDEM_REDIS_ADDR"), reset)
			s := newStore(t, newClient(t, p.addr, nil, func(o *redis.Options) { o.MaxRetries = -1 }))
			ctx, now := context.Background(), time.Now().Truncate(time.Millisecond)
			// The scripts are loaded (EVAL) before the replies are cut, so
			// that the cut reply is the script's own.
			warm := reservation("warm", "tok-w", now, time.Minute)
			if err := s.Reserve(ctx, warm, nil, now); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Complete(ctx, core.Succeed(warm, []byte(`1`), now, time.Hour)); err != nil {
				t.Fatal(err)
			}

			rec := reservation("cut", "tok-1", now, time.Minute)
			p.armed.Store(true)
			if err := s.Reserve(ctx, rec, nil, now); err != nil || p.armed.Load() {
				t.Fatalf("Reserve whose reply was cut short (cut: %v) = %v; want nil (its own reservation recognised)", !p.armed.Load(), err)
			}
			done := core.Succeed(rec, []byte(`{"ok":true}`), now.Add(time.Second), time.Hour)
			p.armed.Store(true)
			got, err := s.Complete(ctx, done)
			if err != nil || !core.SameWrite(got, done) || p.armed.Load() {
				t.Fatalf("Complete whose reply was cut short (cut: %v) = %v, %v; want the stored success", !p.armed.Load(), got, err)
			}

			// Not applied (the key is held by another token): the cut reply
			// is still no answer, only a transient error.
			other := reservation("cut", "tok-2", now, time.Minute)
			p.armed.Store(true)
			err = s.Reserve(ctx, other, nil, now)
			var ce *idem.ConflictError
			if !errors.Is(err, ErrUnavailable) || core.Classify(err) != core.Transient || errors.As(err, &ce) {
				t.Fatalf("Reserve refused, its reply cut short = %v; want a transient ErrUnavailable", err)
			}
		})
	}
}
