package sim

import "time"

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
// a minute, killed when they pass; handlers of up to 10 s, some failing
// with ordinary errors.
func Lambda() Service {
	return keyTraffic(Service{
		Name:       "lambda",
		Deadlines:  []DeadlineMode{{Kind: Kill, Min: time.Second, Max: time.Minute}},
		HandlerMin: time.Millisecond, HandlerMax: 10 * time.Second,
		Success: 0.8, Transient: 0.12, Permanent: 0.04, Ordinary: 0.04,
		RedeliverMin: time.Second, RedeliverMax: 2 * time.Minute,
	}, 2*time.Second)
}

// ShortRetention keeps records one minute, far less than its 15-minute
// deadlines (and the 15-minute lease without one): handlers run up to 4
// minutes.
func ShortRetention() Service {
	return keyTraffic(Service{
		Name:      "short-retention",
		Retention: time.Minute,
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
		Name: "no-deadline", InProgressMemory: -1,
		Retry:      Retry{Attempts: 3, Base: 100 * time.Millisecond, Max: 2 * time.Second},
		Deadlines:  []DeadlineMode{{Kind: NoDeadline}},
		HandlerMin: 10 * time.Second, HandlerMax: 14 * time.Minute,
		Success: 0.4, Transient: 0.55, Permanent: 0.05,
		RedeliverMin: time.Minute, RedeliverMax: 20 * time.Minute,
	}, 30*time.Second)
}

// MaxAttempts3 allows three executions per key, three tries per call, on a
// Lambda with 5 to 30 s deadlines; most tries fail transiently, some with
// ordinary errors.
func MaxAttempts3() Service {
	return keyTraffic(Service{
		Name:        "max-attempts",
		MaxAttempts: 3,
		Retry:       Retry{Attempts: 3, Base: 100 * time.Millisecond, Max: 2 * time.Second},
		Deadlines:   []DeadlineMode{{Kind: Kill, Min: 5 * time.Second, Max: 30 * time.Second}},
		HandlerMin:  time.Millisecond, HandlerMax: 3 * time.Second,
		Success: 0.25, Transient: 0.6, Permanent: 0.05, Ordinary: 0.1,
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
// cancel the context, callers that hang up, a result cache, a memory of
// keys in progress small enough to forget keys, rechecked every 250 ms, and
// handlers that now and then refuse a request for its credentials (an
// answer that leaves no record), and ordinary errors kept permanent
// (idem.WithUnclassifiedPermanent).
func HTTPService() Service {
	return keyTraffic(Service{
		Name:  "http",
		Cache: 64, InProgressMemory: 4, InProgressRecheck: 250 * time.Millisecond,
		UnclassifiedPermanent: true,
		Deadlines: []DeadlineMode{
			{Kind: Cancel, Min: time.Second, Max: 30 * time.Second},
			{Kind: NoDeadline},
		},
		ClientCancel: 0.1,
		HandlerMin:   time.Millisecond, HandlerMax: 5 * time.Second,
		Success: 0.75, Transient: 0.12, Permanent: 0.04, NoRecord: 0.05, Ordinary: 0.04,
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

// Renewing is a Lambda whose leases are renewed every second (2 s + the
// margin each), with handlers of up to 40 s, the slow ones beyond their
// 5 to 60 s deadlines, and in-process retries, which start while half a
// second (or the call's longest try) is left in the lease held: each next
// try renews it. Its calls are marked as from a source that limits its
// deliveries (idem.ContextWithSourceLimit), so its keys have no bound.
func Renewing() Service {
	sv := Lambda()
	sv.Name, sv.Renewal, sv.HandlerMax = "renewing", time.Second, 40*time.Second
	sv.Retry, sv.SourceLimited = Retry{Attempts: 3, Base: 100 * time.Millisecond, Max: 2 * time.Second}, true
	sv.RetryReserve = 500 * time.Millisecond
	sv.Deadlines = []DeadlineMode{{Kind: Kill, Min: 5 * time.Second, Max: time.Minute}, {Kind: NoDeadline}}
	return sv
}

// Waiting is a service whose callers wait up to 20 s for a concurrent
// execution (WithWait), and coalesce within a process, with bursts of
// copies; its leases are renewed every 200 ms with a 1 s margin, so that a
// waiter that takes over a crashed holder's key runs under a lease much
// shorter than its wait.
func Waiting() Service {
	sv := keyTraffic(Service{
		Name: "waiting", Wait: 20 * time.Second, Renewal: 200 * time.Millisecond, LeaseMargin: time.Second,
		Deadlines:  []DeadlineMode{{Kind: Cancel, Min: 10 * time.Second, Max: time.Minute}, {Kind: NoDeadline}},
		HandlerMin: time.Millisecond, HandlerMax: 8 * time.Second,
		Success: 0.85, Transient: 0.1, Permanent: 0.05,
		RedeliverMin: time.Second, RedeliverMax: time.Minute,
	}, time.Second)
	sv.Burst, sv.Sandboxes = 0.3, 3
	return sv
}

// Mixed returns every named service but Conservative and Storm, for a run
// that covers them all at once over one store.
func Mixed() []Service {
	return []Service{Lambda(), ShortRetention(), NoDeadlineRetries(), MaxAttempts3(), TinyTimeouts(), HTTPService(),
		Renewing(), Waiting(), Steps(), Staging()}
}

// Staging is a service whose handlers run steps, stage writes to be
// committed with their success (one in ten refused by its own condition),
// and return large results now and then. Its records are retained 10 s and
// its many keys come back after up to 90 s, often with another payload, so
// that new executions meet expired records that hold steps (retryable
// failures, in the previous encoding too).
func Staging() Service {
	sv := keyTraffic(Service{
		Name: "staging", Retention: 10 * time.Second, Steps: true,
		Stage: 0.6, StageRefused: 0.1, Large: 0.2,
		Deadlines:  []DeadlineMode{{Kind: Kill, Min: 5 * time.Second, Max: time.Minute}, {Kind: NoDeadline}},
		HandlerMin: time.Millisecond, HandlerMax: 3 * time.Second,
		Success: 0.55, Transient: 0.35, Permanent: 0.1,
		RedeliverMin: 2 * time.Second, RedeliverMax: 90 * time.Second,
	}, 2*time.Second)
	sv.Reuse, sv.ActiveKeys = 0.2, 12
	return sv
}
