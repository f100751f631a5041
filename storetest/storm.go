package storetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// runnerStorm delivers the rig's key every 100 ms while another process
// holds it in progress (a 30-second lease), through a runner with its
// default memory of keys in progress: 10 s of deliveries, then 10 s while
// every write is refused at the transport, then, once the holder has
// recorded its success, until the replay comes.
func runnerStorm(e *fenv, _ Fault) {
	var calls atomic.Int64
	g := e.rig(idem.WithLogger(slog.New(slog.DiscardHandler)),
		idem.WithObserver(idem.ObserverFunc(func(_ context.Context, o idem.Observation) { calls.Add(int64(o.StoreCalls)) })))
	fp, err := core.Fingerprint([]byte(`{}`))
	if err != nil {
		e.t.Fatal(err)
	}
	holder := core.Reserve(g.key, fp, "tok-holder", nil, e.at(0), e.at(30), retention)
	if err := e.s.Reserve(context.Background(), holder, nil, e.at(0)); err != nil {
		e.t.Fatalf("the holder's Reserve = %v", err)
	}
	stormPhase(e, g, &calls, holder, 11)
	e.f.Always(Write, Throttled)
	failed := stormPhase(e, g, &calls, holder, 5)
	g.reached()
	e.f.Clear()
	if failed == 0 {
		e.t.Fatalf("no delivery under throttling got the store's error: none rechecked the store")
	}
	e.mustComplete(core.Succeed(holder, []byte(`"holder"`), g.clock.Now(), retention))
	for {
		out, err := g.r.Do(context.Background(), g.key, []byte(`{}`), g.handler)
		if err == nil && out.Verdict == idem.Replayed && string(out.Result) == `"holder"` && !out.Cached {
			break
		}
		if !errors.Is(err, core.ErrInProgress) || !g.clock.Now().Before(holder.LeaseUntil) {
			e.t.Fatalf("at t0+%v, after the holder's success: %s %q, %v; want in progress (until the lease end at most), then the success replayed from the store",
				g.clock.Now().Sub(e.t0), out.Verdict, out.Result, err)
		}
		g.clock.Advance(100 * time.Millisecond)
	}
	if n := g.runs.Load(); n != 0 {
		e.t.Fatalf("the handler ran %d times, want 0", n)
	}
}

// stormPhase delivers the rig's key every 100 ms for 10 s while holder
// holds it: each delivery is answered in progress with the holder's lease
// end (from the runner's memory, with its next recheck before it), or with
// a transient store error; the phase makes at most maxCalls
// store calls. It returns the deliveries that got the store's error.
func stormPhase(e *fenv, g *rig, calls *atomic.Int64, holder core.Record, maxCalls int64) (failed int) {
	e.t.Helper()
	start, before := g.clock.Now(), calls.Load()
	for i := range 100 {
		out, err := g.r.Do(context.Background(), g.key, []byte(`{}`), g.handler)
		var ipe *core.InProgressError
		switch {
		case errors.As(err, &ipe) && (ipe.RetryAt.Equal(holder.LeaseUntil) ||
			out.Cached && ipe.RetryAt.After(g.clock.Now()) && ipe.RetryAt.Before(holder.LeaseUntil)):
		case out.Verdict == idem.StoreFailed && e.transient(err):
			failed++
		default:
			e.t.Fatalf("delivery %d at t0+%v = %s, %v; want in progress until %s (from memory, until the next recheck), or a transient store error",
				i, g.clock.Now().Sub(e.t0), out.Verdict, err, holder.LeaseUntil.Format(time.RFC3339))
		}
		g.clock.Advance(100 * time.Millisecond)
	}
	if n := calls.Load() - before; n > maxCalls {
		e.t.Fatalf("100 deliveries from t0+%v made %d store calls, want at most %d (%s)", start.Sub(e.t0), n, maxCalls,
			fmt.Sprintf("one per %v recheck, backing off while throttled", idem.DefaultInProgressRecheck))
	}
	return failed
}
