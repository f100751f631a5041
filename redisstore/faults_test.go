package redisstore

import (
	"context"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/storetest"
)

// TestConformanceFaults runs the fault-injection conformance kit with the
// faults injected at the client: a go-redis hook asks the script for each
// script call (Reserve and Complete are writes, Get a read) and fails it
// before it is sent, or sends it and loses the answer.
func TestConformanceFaults(t *testing.T) {
	t.Parallel()
	integration(t)
	storetest.RunFaults(t, func(t *testing.T, f *storetest.Faults) idem.Store {
		c := newClient(t, "", nil, func(o *redis.Options) { o.MaxRetries = -1 })
		c.AddHook(faultHook{f: f})
		return newStore(t, c)
	})
}

// faultHook injects storetest's faults into the store's script calls.
type faultHook struct{ f *storetest.Faults }

func (h faultHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h faultHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h faultHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		op, ok := scriptOp(cmd)
		if !ok {
			return next(ctx, cmd)
		}
		var err error
		switch h.f.Next(op) {
		case storetest.NoFault:
			return next(ctx, cmd)
		case storetest.FailBefore, storetest.Throttled:
			// Redis does not throttle; a refused connection is what a
			// store meets when it cannot reach the server: not sent.
			err = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		case storetest.AnswerLost:
			if err := next(ctx, cmd); err != nil {
				return err
			}
			err = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
		case storetest.TimedOut:
			err = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
		}
		cmd.SetErr(err)
		return err
	}
}

// scriptOp names the store call a command is: a write (acquire, reserve, complete)
// or a read (get). Other commands are not the store's calls.
func scriptOp(cmd redis.Cmder) (storetest.Op, bool) {
	args := cmd.Args()
	if len(args) < 2 || (cmd.Name() != "evalsha" && cmd.Name() != "eval") {
		return 0, false
	}
	id, _ := args[1].(string)
	switch id {
	case acquireScript.sha, acquireScript.src, reserveScript.sha, reserveScript.src, completeScript.sha, completeScript.src:
		return storetest.Write, true
	case getScript.sha, getScript.src:
		return storetest.Read, true
	}
	return 0, false
}
