package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// TestCutShortRepliesAreRecognised: Redis replies to a script in one
// RESP value, and go-redis reads an error reply only whole, so a reply cut
// short is never taken for the server's answer: it is a transport failure
// (io.ErrUnexpectedEOF, or a reset), ErrUnavailable and possibly applied,
// and the store reads the key to recognise its own write (core.SameWrite)
// before it calls the write failed. Through a proxy that lets the script
// run and cuts its reply after one byte (lossyProxy).
func TestCutShortRepliesAreRecognised(t *testing.T) {
	t.Parallel()
	integration(t)
	for _, reset := range []bool{false, true} {
		name := map[bool]string{false: "closed", true: "reset"}[reset]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := startLossyProxy(t, newClient(t, "", nil).Options().Addr)
			p.keep, p.reset = 1, reset
			s := newStore(t, newClient(t, p.addr(), nil, func(o *redis.Options) { o.MaxRetries = -1 }))
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
