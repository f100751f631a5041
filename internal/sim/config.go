package sim

import (
	"time"

	"github.com/idemgo/idem"
)

// Config is one simulation run. The zero value is not usable: Seed,
// Deliveries, Services and NewStore must be set.
type Config struct {
	// Seed determines the whole run: the same Config with the same Seed
	// makes the same run, step by step (see Result.Hash).
	Seed uint64
	// Deliveries is the number of Runner.Do calls to make, redeliveries
	// included.
	Deliveries int
	// Services are the functions sharing the store, each with its own keys,
	// runner configuration and sandboxes.
	Services []Service
	// Faults are the store's and the processes' faults.
	Faults Faults
	// NewStore returns the store under test, empty. It is called once.
	NewStore func() idem.Store
	// StoreResolution is how far the store rounds retention ends up (1s for
	// the DynamoDB store, 0 for the in-memory store): a completion within it
	// of its record's end of retention is not judged.
	StoreResolution time.Duration
	// MaxViolations stops the run after this many violations (0 means 1).
	// The first violation of each invariant is kept.
	MaxViolations int
}

// Faults are the probabilities and latencies of injected faults. The zero
// value injects none and makes every store call instantaneous.
type Faults struct {
	// Crash is the probability that the process dies at a yield point: a
	// store call's request or answer, a handler's start or run, a sleep.
	Crash float64
	// LostAnswer is the probability that a store write is applied but its
	// answer is lost (a transient error is returned instead).
	LostAnswer float64
	// Throttle is the probability that a store call is throttled (a
	// transient error, not applied).
	Throttle float64
	// Timeout is the probability that a store call times out before it is
	// applied (an error wrapping context.DeadlineExceeded).
	Timeout float64
	// LatencyMin and LatencyMax bound each leg (request, answer) of a store
	// call.
	LatencyMin, LatencyMax time.Duration
	// Slow is the probability that a leg takes up to SlowMax instead.
	Slow    float64
	SlowMax time.Duration
}

// DeadlineKind is how a delivery's context ends.
type DeadlineKind int

const (
	// NoDeadline: the context has no deadline (a consumer loop, a job).
	NoDeadline DeadlineKind = iota + 1
	// Kill: the context has a deadline and the process is killed when it
	// passes, as Lambda does.
	Kill
	// Cancel: the context has a deadline and is cancelled when it passes;
	// the process goes on (a service's request timeout).
	Cancel
)

// DeadlineMode is one way deliveries are made: a kind and the bounds of the
// timeout (ignored for NoDeadline).
type DeadlineMode struct {
	// Kind is how the context ends.
	Kind DeadlineKind
	// Min and Max bound the timeout, drawn uniformly.
	Min, Max time.Duration
}

// Service is one function over the shared store: its keys (prefixed with
// Name), its runner options, its deliveries and its handler.
type Service struct {
	// Name prefixes the service's keys: 1 to 40 characters of [a-z0-9-].
	Name string
	// Options are the runner options the service's users chose; the
	// simulation adds its clock, sleep, randomness and tokens.
	Options []idem.Option
	// MaxAttempts must repeat the WithMaxAttempts option, if any (0:
	// idem.DefaultMaxAttempts); the attempt bound is checked against it.
	MaxAttempts int
	// LeaseMargin must repeat the margin of a WithLease option, if any (0:
	// idem.DefaultLeaseMargin). Sandbox clocks are skewed by less than half
	// of it, so two clocks differ by less than the margin.
	LeaseMargin time.Duration
	// Sandboxes is the number of processes (each with its own runner and
	// clock) deliveries are spread over.
	Sandboxes int
	// Deadlines are the ways deliveries are made, one drawn per delivery.
	Deadlines []DeadlineMode
	// ClientCancel is the probability that a delivery without Kill is
	// cancelled by its caller at a random time (context.Canceled).
	ClientCancel float64
	// HandlerMin and HandlerMax bound a handler try's duration. HandlerMax
	// must stay below the lease without a deadline less twice the margin.
	HandlerMin, HandlerMax time.Duration
	// Overrun is the probability that a try ignores its context and runs
	// OverrunMin to OverrunMax, past any lease (a platform kill still ends
	// it). Such a try is exempt from the overlap check once it has run
	// longer than HandlerMax: it makes stale holders, whose completions the
	// store must refuse.
	Overrun                float64
	OverrunMin, OverrunMax time.Duration
	// Success, Transient and Permanent weigh a try's outcome.
	Success, Transient, Permanent float64
	// ArrivalGap is the mean time between new deliveries of the service.
	ArrivalGap time.Duration
	// ActiveKeys is how many keys receive deliveries at a time; NewKey is
	// the probability that a delivery opens a new key (retiring the oldest).
	ActiveKeys int
	NewKey     float64
	// Reuse is the probability that a delivery carries another payload for
	// its key.
	Reuse float64
	// Burst is the probability that a delivery comes with 1 to 3 copies
	// within 50 ms.
	Burst float64
	// Redeliver bounds the delay before an unfinished delivery (crashed,
	// in progress, failed transiently, not recorded) is delivered again;
	// Redeliveries bounds how often.
	RedeliverMin, RedeliverMax time.Duration
	Redeliveries               int
	// Steps makes every handler try run two steps (idem.Step): one at its
	// start, one at its end; the store must implement idem.StepRecorder.
	Steps bool
	// InProgressMemory is the size of each sandbox runner's memory of keys
	// in progress (idem.WithInProgressMemory): 0 keeps the runner's
	// default, a negative size turns the memory off. Options, if they set
	// it too, win.
	InProgressMemory int
}

func (sv *Service) maxAttempts() int {
	if sv.MaxAttempts > 0 {
		return sv.MaxAttempts
	}
	return idem.DefaultMaxAttempts
}

func (sv *Service) leaseMargin() time.Duration {
	if sv.LeaseMargin > 0 {
		return sv.LeaseMargin
	}
	return idem.DefaultLeaseMargin
}

// DefaultFaults are the faults of the mixed runs: every kind, at rates that
// leave most deliveries whole.
func DefaultFaults() Faults {
	return Faults{
		Crash: 0.01, LostAnswer: 0.02, Throttle: 0.02, Timeout: 0.01,
		LatencyMin: 200 * time.Microsecond, LatencyMax: 15 * time.Millisecond,
		Slow: 0.01, SlowMax: 800 * time.Millisecond,
	}
}

// keyTraffic is the key pattern of most services: a few keys at a time,
// about ten deliveries each, some in bursts, some with another payload.
func keyTraffic(sv Service, gap time.Duration) Service {
	sv.ArrivalGap, sv.ActiveKeys, sv.NewKey, sv.Reuse, sv.Burst = gap, 4, 0.1, 0.01, 0.05
	if sv.Sandboxes == 0 {
		sv.Sandboxes = 6
	}
	if sv.Redeliveries == 0 {
		sv.Redeliveries = 6
	}
	return sv
}

// Lambda is a Lambda function with the default options: deadlines of 1 s to
// a minute, killed when they pass; handlers of up to 10 s.
func Lambda() Service {
	return keyTraffic(Service{
		Name:       "lambda",
		Deadlines:  []DeadlineMode{{Kind: Kill, Min: time.Second, Max: time.Minute}},
		HandlerMin: time.Millisecond, HandlerMax: 10 * time.Second,
		Success: 0.8, Transient: 0.15, Permanent: 0.05,
		RedeliverMin: time.Second, RedeliverMax: 2 * time.Minute,
	}, 2*time.Second)
}

// ShortRetention keeps records one minute, far less than its 15-minute
// deadlines (and the 15-minute lease without one): handlers run up to 4
// minutes.
func ShortRetention() Service {
	return keyTraffic(Service{
		Name:    "short-retention",
		Options: []idem.Option{idem.WithRetention(time.Minute)},
		Deadlines: []DeadlineMode{
			{Kind: Kill, Min: 15 * time.Minute, Max: 15 * time.Minute},
			{Kind: Kill, Min: 15 * time.Minute, Max: 15 * time.Minute},
			{Kind: NoDeadline},
		},
		HandlerMin: time.Second, HandlerMax: 4 * time.Minute,
		Success: 0.85, Transient: 0.1, Permanent: 0.05,
		RedeliverMin: 10 * time.Second, RedeliverMax: 5 * time.Minute,
	}, 20*time.Second)
}

// NoDeadlineRetries runs without deadlines (the 15-minute default lease)
// with in-process retries, handlers of up to 14 minutes, and no memory of
// keys in progress.
func NoDeadlineRetries() Service {
	return keyTraffic(Service{
		Name:             "no-deadline",
		InProgressMemory: -1,
		Options:          []idem.Option{idem.WithRetry(3, 100*time.Millisecond, 2*time.Second)},
		Deadlines:        []DeadlineMode{{Kind: NoDeadline}},
		HandlerMin:       10 * time.Second, HandlerMax: 14 * time.Minute,
		Success: 0.4, Transient: 0.55, Permanent: 0.05,
		RedeliverMin: time.Minute, RedeliverMax: 20 * time.Minute,
	}, 30*time.Second)
}

// MaxAttempts3 allows three executions per key, three per call, on a
// Lambda with 5 to 30 s deadlines; most tries fail transiently.
func MaxAttempts3() Service {
	return keyTraffic(Service{
		Name:        "max-attempts",
		Options:     []idem.Option{idem.WithMaxAttempts(3), idem.WithRetry(3, 100*time.Millisecond, 2*time.Second)},
		MaxAttempts: 3,
		Deadlines:   []DeadlineMode{{Kind: Kill, Min: 5 * time.Second, Max: 30 * time.Second}},
		HandlerMin:  time.Millisecond, HandlerMax: 3 * time.Second,
		Success: 0.25, Transient: 0.7, Permanent: 0.05,
		RedeliverMin: time.Second, RedeliverMax: time.Minute,
	}, time.Second)
}

// TinyTimeouts has deadlines of 5 to 300 ms, killed or cancelled, about as
// long as its store calls and handlers.
func TinyTimeouts() Service {
	return keyTraffic(Service{
		Name: "tiny-timeouts",
		Deadlines: []DeadlineMode{
			{Kind: Kill, Min: 5 * time.Millisecond, Max: 300 * time.Millisecond},
			{Kind: Cancel, Min: 5 * time.Millisecond, Max: 300 * time.Millisecond},
		},
		HandlerMin: time.Millisecond, HandlerMax: 200 * time.Millisecond,
		Success: 0.8, Transient: 0.15, Permanent: 0.05,
		RedeliverMin: 10 * time.Millisecond, RedeliverMax: 10 * time.Second,
	}, 200*time.Millisecond)
}

// HTTPService is a service behind HTTP: request timeouts of 1 to 30 s that
// cancel the context, callers that hang up, a result cache, and a memory
// of keys in progress small enough to forget keys, rechecked every 250 ms.
func HTTPService() Service {
	return keyTraffic(Service{
		Name: "http",
		Options: []idem.Option{idem.WithCache(64), idem.WithInProgressMemory(4),
			idem.WithInProgressRecheck(250 * time.Millisecond)},
		Deadlines: []DeadlineMode{
			{Kind: Cancel, Min: time.Second, Max: 30 * time.Second},
			{Kind: NoDeadline},
		},
		ClientCancel: 0.1,
		HandlerMin:   time.Millisecond, HandlerMax: 5 * time.Second,
		Success: 0.8, Transient: 0.15, Permanent: 0.05,
		RedeliverMin: 100 * time.Millisecond, RedeliverMax: 30 * time.Second,
	}, time.Second)
}

// Conservative avoids every configuration known to break an invariant: long
// retention, deadlines longer than the handlers, a generous attempt bound,
// no in-process retry without a deadline, no caller cancellation. Some
// handlers overrun their lease (see Service.Overrun), so that stale holders
// try to complete.
func Conservative() Service {
	return keyTraffic(Service{
		Name:        "conservative",
		Options:     []idem.Option{idem.WithMaxAttempts(100000)},
		MaxAttempts: 100000,
		Deadlines: []DeadlineMode{
			{Kind: Kill, Min: 500 * time.Millisecond, Max: 30 * time.Second},
			{Kind: Cancel, Min: 500 * time.Millisecond, Max: 30 * time.Second},
		},
		HandlerMin: time.Millisecond, HandlerMax: 10 * time.Second,
		Overrun: 0.02, OverrunMin: 40 * time.Second, OverrunMax: 3 * time.Minute,
		Success: 0.6, Transient: 0.35, Permanent: 0.05,
		RedeliverMin: time.Second, RedeliverMax: 2 * time.Minute,
	}, time.Second)
}

// Storm is one key delivered again and again while its first execution
// runs: a queue's redrive, a client retrying hard. Deliveries arrive about 2
// ms apart at sandboxes processes; the first executes for 50 s of its 60 s
// deadline and the others find it in progress, all within its lease as long
// as the run has at most about 20,000 deliveries. No delivery is redelivered.
// Run it without faults to count the store calls a storm costs
// (Stats.StoreWrites, StoreRefusals, StoreReads).
func Storm(sandboxes int) Service {
	return Service{
		Name:       "storm",
		Sandboxes:  sandboxes,
		Deadlines:  []DeadlineMode{{Kind: Kill, Min: time.Minute, Max: time.Minute}},
		HandlerMin: 50 * time.Second, HandlerMax: 50 * time.Second,
		Success:    1,
		ArrivalGap: 2 * time.Millisecond, ActiveKeys: 1,
	}
}

// Mixed returns every service above but Conservative, for a run that
// covers them all at once over one store.
func Mixed() []Service {
	return []Service{Lambda(), ShortRetention(), NoDeadlineRetries(), MaxAttempts3(), TinyTimeouts(), HTTPService()}
}
