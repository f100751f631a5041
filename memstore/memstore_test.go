package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/memstore"
	"github.com/idemgo/idem/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idem.Store { return memstore.New() })
}

func TestConformanceSharedStore(t *testing.T) {
	s := memstore.New()
	storetest.Run(t, func(t *testing.T) idem.Store { return s })
}

func TestConformanceFaults(t *testing.T) {
	s := memstore.New()
	storetest.RunFaults(t, func(t *testing.T, f *storetest.Faults) idem.Store { return &faulty{s: s, f: f} })
}

// faulty puts a memstore.Store behind a transport that does what f says to
// each call, as a network store's transport would: each method is one
// request.
type faulty struct {
	s *memstore.Store
	f *storetest.Faults
}

// Errors of the faults, as a network transport returns them.
var (
	errRefused   = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	errReset     = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	errTimeout   = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	errThrottled = core.MarkTransient(errors.New("throttled"))
)

// request runs apply as one request of op, under the fault f gives it.
func (w *faulty) request(op storetest.Op, apply func() error) error {
	switch fault := w.f.Next(op); fault {
	case storetest.NoFault:
		return apply()
	case storetest.AnswerLost:
		_ = apply()
		return fmt.Errorf("memstore test: %s answer lost: %w", op, errReset)
	case storetest.FailBefore:
		return fmt.Errorf("memstore test: %s not sent: %w", op, errRefused)
	case storetest.Throttled:
		return fmt.Errorf("memstore test: %s refused: %w", op, errThrottled)
	case storetest.TimedOut:
		return fmt.Errorf("memstore test: %s unanswered: %w", op, errTimeout)
	default:
		return fmt.Errorf("memstore test: unknown fault %s", fault)
	}
}

func (w *faulty) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	return w.request(storetest.Write, func() error { return w.s.Reserve(ctx, rec, prev, now) })
}

func (w *faulty) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	var stored core.Record
	err := w.request(storetest.Write, func() (err error) {
		stored, err = w.s.Complete(ctx, rec)
		return err
	})
	if err != nil {
		return core.Record{}, err
	}
	return stored, nil
}

func (w *faulty) Get(ctx context.Context, key string, now time.Time) (core.Record, error) {
	var rec core.Record
	err := w.request(storetest.Read, func() (err error) {
		rec, err = w.s.Get(ctx, key, now)
		return err
	})
	if err != nil {
		return core.Record{}, err
	}
	return rec, nil
}

func TestConformanceStaged(t *testing.T) {
	storetest.RunStaged(t, func(t *testing.T) idem.Store { return memstore.New() },
		func(t *testing.T, key string) (any, func() bool) {
			var applied atomic.Bool
			return memstore.Write{Apply: func() { applied.Store(true) }}, applied.Load
		})
}
