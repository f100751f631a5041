package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/memstore"
)

// The one place where a service's capabilities and runner options are
// drawn from the seed (Config.Draw): every option a user can set on a
// runner, every capability of the store that the store under test has, the
// handler's steps, staged writes and large results, and the batch wrappers.
// A new capability enters the simulation here (and in runnerOptions, which
// turns a Service's fields into options).

// storeCaps are the optional capabilities of the store under test.
type storeCaps struct {
	acquire, steps, renew, stage bool
}

func (s *simulation) storeCaps() storeCaps {
	inner := s.store.inner
	_, acquire := inner.(idem.Acquirer)
	_, steps := inner.(idem.StepRecorder)
	_, renew := inner.(idem.LeaseRenewer)
	_, sc := inner.(idem.StagedCompleter)
	_, mem := inner.(*memstore.Store)
	return storeCaps{acquire: acquire, steps: steps, renew: renew, stage: sc && (mem || s.cfg.Stager != s.stagedMem)}
}

// draw returns n services drawn from the run's seed.
func (s *simulation) draw(n int) []Service {
	caps := s.storeCaps()
	out := make([]Service, 0, n)
	for i := range n {
		out = append(out, Drawn(s.rng, fmt.Sprintf("drawn-%d", i), caps.acquire, caps.steps, caps.renew, caps.stage))
	}
	return out
}

// Drawn returns a service named name whose runner options, capabilities,
// deadlines and handler are drawn from r, using only the store capabilities
// allowed (acquire: the store is an idem.Acquirer; steps, renew, stage: it
// records steps, renews leases, commits staged writes).
func Drawn(r *rand.Rand, name string, acquire, steps, renew, stage bool) Service {
	d := drawer{r}
	sv := keyTraffic(Service{Name: name, Sandboxes: 1 + r.IntN(6)}, d.dur(200*time.Millisecond, 5*time.Second))
	d.runner(&sv)
	d.deliveries(&sv)
	sv.ReserveOnly = !acquire || d.p(0.3)
	sv.Steps = steps && d.p(0.5)
	if renew && d.p(0.5) {
		sv.Renewal = d.dur(20*time.Millisecond, 3*time.Second)
	}
	if stage && d.p(0.4) {
		sv.Stage, sv.StageRefused = d.float(0.2, 0.8), d.float(0, 0.2)
	}
	if d.p(0.3) {
		sv.Large = d.float(0.01, 0.05)
	}
	d.handler(&sv)
	d.batch(&sv)
	return sv
}

// drawer draws values from r.
type drawer struct{ r *rand.Rand }

func (d drawer) p(x float64) bool             { return d.r.Float64() < x }
func (d drawer) float(lo, hi float64) float64 { return lo + d.r.Float64()*(hi-lo) }
func (d drawer) dur(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(d.r.Int64N(int64(hi-lo)+1))
}

// runner draws the runner's options: retention, lease, attempts, retries,
// completion attempts, cache, wait, fingerprint selection, memory of keys
// in progress (off, the default, or drawn), backoff policy and observer.
func (d drawer) runner(sv *Service) {
	if d.p(0.4) {
		sv.Retention = d.dur(30*time.Second, time.Hour)
	}
	if d.p(0.4) {
		sv.LeaseMargin, sv.LeaseWithoutDeadline = d.dur(time.Second, 10*time.Second), d.dur(time.Minute, 15*time.Minute)
	}
	if d.p(0.5) {
		sv.MaxAttempts = 1 + d.r.IntN(10)
	}
	if d.p(0.4) {
		sv.Retry = Retry{Attempts: 2 + d.r.IntN(3), Base: d.dur(10*time.Millisecond, 200*time.Millisecond)}
		sv.Retry.Max = sv.Retry.Base + d.dur(0, 3*time.Second)
	}
	if d.p(0.3) {
		sv.CompletionAttempts = 1 + d.r.IntN(6)
	}
	if d.p(0.4) {
		sv.Cache = 1 + d.r.IntN(128)
		if d.p(0.5) {
			sv.CacheTTL = d.dur(time.Second, 2*time.Minute)
		}
	}
	if d.p(0.4) {
		sv.Wait = d.dur(50*time.Millisecond, 30*time.Second)
	}
	sv.Selection = d.p(0.4)
	switch d.r.IntN(3) {
	case 0:
		sv.InProgressMemory = -1
	case 1:
		sv.InProgressMemory = 1 + d.r.IntN(64)
		sv.InProgressRecheck = d.dur(10*time.Millisecond, 2*time.Second)
	}
	if d.p(0.3) {
		step := d.dur(time.Millisecond, 500*time.Millisecond)
		sv.Options = append(sv.Options, idem.WithBackoff(func(attempt int, r float64) time.Duration {
			return time.Duration(float64(step) * float64(attempt) * r)
		}))
	}
	switch d.r.IntN(3) {
	case 0:
		sv.Options = append(sv.Options, idem.WithObserver(idem.NoObserver))
	case 1:
		sv.Options = append(sv.Options, idem.WithObserver(idem.ObserverFunc(func(context.Context, idem.Observation) {})))
	}
	if d.p(0.2) {
		sv.Options = append(sv.Options, idem.WithClassifiers(core.NetworkClassifier))
	}
}

// deliveries draws how the service's deliveries come: their deadlines,
// callers that hang up, redeliveries.
func (d drawer) deliveries(sv *Service) {
	modes := []DeadlineMode{
		{Kind: Kill, Min: d.dur(50*time.Millisecond, 5*time.Second), Max: d.dur(5*time.Second, time.Minute)},
		{Kind: Cancel, Min: d.dur(50*time.Millisecond, 5*time.Second), Max: d.dur(5*time.Second, time.Minute)},
		{Kind: NoDeadline},
	}
	d.r.Shuffle(len(modes), func(i, j int) { modes[i], modes[j] = modes[j], modes[i] })
	sv.Deadlines = modes[:1+d.r.IntN(2)]
	if d.p(0.3) {
		sv.ClientCancel = d.float(0, 0.2)
	}
	sv.RedeliverMin = d.dur(10*time.Millisecond, 5*time.Second)
	sv.RedeliverMax = sv.RedeliverMin + d.dur(0, 3*time.Minute)
	sv.Burst = d.float(0, 0.3)
}

// handler draws the handler's durations and outcomes (ordinary errors
// too, permanent under WithUnclassifiedPermanent now and then), and whether
// its calls are marked source-limited. Without renewal, a
// handler stays below the lease without a deadline less twice the margin.
func (d drawer) handler(sv *Service) {
	sv.HandlerMin = d.dur(0, 50*time.Millisecond)
	sv.HandlerMax = sv.HandlerMin + d.dur(time.Millisecond, 20*time.Second)
	if sv.Renewal == 0 {
		sv.HandlerMax = min(sv.HandlerMax, sv.leaseWithoutDeadline()-3*sv.leaseMargin())
	}
	sv.Success, sv.Transient, sv.Permanent = d.float(0.3, 0.9), d.float(0, 0.5), d.float(0, 0.1)
	if d.p(0.5) {
		sv.Ordinary = d.float(0, 0.1)
	}
	sv.UnclassifiedPermanent, sv.SourceLimited = d.p(0.2), d.p(0.3)
	if d.p(0.2) {
		sv.NoRecord = d.float(0, 0.1)
	}
	if d.p(0.2) {
		sv.Overrun, sv.OverrunMin = d.float(0.005, 0.03), d.dur(30*time.Second, time.Minute)
		sv.OverrunMax = sv.OverrunMin + d.dur(0, 2*time.Minute)
	}
}

// batch draws whether the service's messages come in batches, and
// through which wrapper.
func (d drawer) batch(sv *Service) {
	if !d.p(0.3) {
		return
	}
	sv.Batch, sv.BatchMax = BatchKind(1+d.r.IntN(3)), 2+d.r.IntN(9)
	sv.GroupTenant = sv.Batch != Kinesis && d.p(0.5)
}
