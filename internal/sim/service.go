package sim

import (
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
)

// Service is one function over the shared store: its keys (prefixed with
// Name), its runner's options and capabilities, its deliveries and its
// handler. Zero runner fields mean the runner's defaults.
type Service struct {
	// Name prefixes the service's keys: 1 to 40 characters of [a-z0-9-].
	Name string
	// Options are runner options beyond those the fields below make (see
	// runnerOptions), such as WithBackoff, WithClassifiers and
	// WithObserver; the simulation adds its clock, sleep, randomness,
	// tokens, logger and tracer.
	Options []idem.Option

	// Retention is WithRetention's.
	Retention time.Duration
	// LeaseMargin and LeaseWithoutDeadline are WithLease's. Sandbox clocks
	// are skewed by less than half the margin, so two clocks differ by
	// less than the margin.
	LeaseMargin, LeaseWithoutDeadline time.Duration
	// MaxAttempts is WithMaxAttempts's.
	MaxAttempts int
	// Retry is WithRetry's, if Retry.Attempts is set.
	Retry Retry
	// CompletionAttempts is WithCompletionAttempts's.
	CompletionAttempts int
	// RetryReserve is WithRetryReserve's; 0 means HandlerMax, so that an
	// in-process retry starts only if the longest simulated try fits.
	RetryReserve time.Duration
	// Cache and CacheTTL are WithCache's and WithCacheTTL's.
	Cache    int
	CacheTTL time.Duration
	// Wait is WithWait's bound.
	Wait time.Duration
	// Renewal is WithLeaseRenewal's interval.
	Renewal time.Duration
	// Selection makes each copy of a payload carry its own sent_at, which
	// the fingerprint leaves out (WithFingerprintSelection; the batch
	// wrappers' option of that name for a batch service).
	Selection bool

	// ReserveOnly reserves with Reserve even over a store that is an
	// idem.Acquirer.
	ReserveOnly bool
	// Steps makes every handler try run two steps (idem.Step): one at its
	// start, one at its end.
	Steps bool
	// InProgressMemory is the size of each sandbox runner's memory of keys
	// in progress (idem.WithInProgressMemory): 0 keeps the runner's
	// default, a negative size turns the memory off; InProgressRecheck, if
	// set, is its recheck interval (idem.WithInProgressRecheck). Options,
	// if they set them too, win.
	InProgressMemory  int
	InProgressRecheck time.Duration
	// Stage is the probability that a try stages writes (Config.Stager)
	// to be committed with its success; StageRefused, that the last of them
	// is refused by its own condition at the commit.
	Stage, StageRefused float64
	// Large is the probability that a success's result is large (1 KB to
	// 32 KB, or 32 KB to 600 KB, of incompressible bytes).
	Large float64
	// Batch, if set, delivers the service's messages in batches through the
	// batch wrapper it names, BatchMax records at most.
	Batch    BatchKind
	BatchMax int
	// GroupTenant, with SQSStandard or SQSFIFO, makes every message carry
	// the group simGroup and the wrapper take it as the message's tenant
	// (idemlambda.WithMessageGroupTenant): keys are scoped by it.
	GroupTenant bool

	// Sandboxes is the number of processes (each with its own runner and
	// clock) deliveries are spread over.
	Sandboxes int
	// Deadlines are the ways deliveries are made, one drawn per delivery.
	Deadlines []DeadlineMode
	// ClientCancel is the probability that a delivery without Kill is
	// cancelled by its caller at a random time (context.Canceled).
	ClientCancel float64
	// HandlerMin and HandlerMax bound a handler try's duration. Without
	// renewal, HandlerMax must stay below the lease without a deadline less
	// twice the margin.
	HandlerMin, HandlerMax time.Duration
	// Overrun is the probability that a try ignores its context and runs
	// OverrunMin to OverrunMax, past any lease (a platform kill still ends
	// it). Such a try is exempt from the overlap check once it has run
	// longer than HandlerMax: it makes stale holders, whose completions the
	// store must refuse.
	Overrun                float64
	OverrunMin, OverrunMax time.Duration
	// Success, Transient, Permanent and Ordinary weigh a try's outcome: a
	// result, an error marked transient, one marked permanent, an ordinary
	// error that nothing classifies; NoRecord a try that asks to leave no
	// record (core.MarkNoRecord: an HTTP handler's 401 or 403), whose
	// reservation the runner releases.
	Success, Transient, Permanent, NoRecord, Ordinary float64
	// UnclassifiedPermanent makes ordinary errors permanent
	// (idem.WithUnclassifiedPermanent).
	UnclassifiedPermanent bool
	// SourceLimited marks the service's calls as from a source that limits
	// its deliveries itself (idem.ContextWithSourceLimit): without
	// MaxAttempts, its keys have no bound. The SQS wrapper marks its own.
	SourceLimited bool
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
	// Copies, if set, delivers each arrival Copies times: the first at
	// once, each other an exponential gap of mean CopyGap after the one
	// before (a sender's retry, a message fanned out to a queue in each
	// Region); in a run of two Regions (Config.Regions), each copy arrives
	// in the Region Regions.Cross draws. New arrivals stop when the run has
	// made its deliveries; the copies and redeliveries of those admitted
	// are all made.
	Copies  int
	CopyGap time.Duration
	// Redeliver bounds the delay before an unfinished delivery (crashed,
	// in progress, failed transiently, not recorded) is delivered again;
	// Redeliveries bounds how often.
	RedeliverMin, RedeliverMax time.Duration
	Redeliveries               int
}

// Retry is WithRetry's arguments.
type Retry struct {
	Attempts  int
	Base, Max time.Duration
}

// BatchKind names a batch wrapper of package lambda.
type BatchKind int

const (
	// SQSStandard is idemlambda.SQS over a standard queue: records of a
	// batch run one at a time (WithConcurrency(1)), reported ones are
	// redelivered one by one.
	SQSStandard BatchKind = iota + 1
	// SQSFIFO is idemlambda.SQS over a FIFO queue with one message group
	// per batch: an ordered lane that stops at its first record that did
	// not succeed; the group is redelivered from it.
	SQSFIFO
	// Kinesis is idemlambda.Kinesis, a batch being one shard: an ordered
	// lane, redelivered from its checkpoint.
	Kinesis
)

func (k BatchKind) ordered() bool { return k == SQSFIFO || k == Kinesis }

// batchAction is the action of every batch service's keys (EventKey).
const batchAction = "sim"

// storedKey is the key the store sees for the event name: name itself, or
// for a batch service the wrapper's EventKey of it.
func (sv *Service) storedKey(name string) string {
	if sv.Batch == 0 {
		return name
	}
	key, err := idemlambda.EventKey(name, batchAction)
	if err == nil && sv.GroupTenant {
		key, err = idemlambda.ScopedKey(key, idemlambda.ScopeMessageGroup+"="+simGroup)
	}
	if err != nil {
		panic("sim: " + err.Error())
	}
	return key
}

// simGroup is the message group of every message of an SQS FIFO service,
// and of a service with GroupTenant.
const simGroup = "g"

// maxAttempts is the bound of the executions of the service's keys:
// WithMaxAttempts's; else none for calls marked source-limited
// (SourceLimited, or through the SQS wrapper); else the default.
func (sv *Service) maxAttempts() int {
	switch {
	case sv.MaxAttempts > 0:
		return sv.MaxAttempts
	case sv.SourceLimited || sv.Batch == SQSStandard || sv.Batch == SQSFIFO:
		return core.NoAttemptLimit
	}
	return idem.DefaultMaxAttempts
}

// attemptsPerCall is the bound of a call's tries (WithRetry's).
func (sv *Service) attemptsPerCall() int {
	if sv.Retry.Attempts > 0 {
		return sv.Retry.Attempts
	}
	return idem.DefaultAttemptsPerCall
}

func (sv *Service) leaseMargin() time.Duration {
	if sv.LeaseMargin > 0 {
		return sv.LeaseMargin
	}
	return idem.DefaultLeaseMargin
}

func (sv *Service) leaseWithoutDeadline() time.Duration {
	if sv.LeaseWithoutDeadline > 0 {
		return sv.LeaseWithoutDeadline
	}
	return idem.DefaultLease
}

func (sv *Service) cacheTTL() time.Duration {
	if sv.CacheTTL > 0 {
		return sv.CacheTTL
	}
	return idem.DefaultCacheTTL
}
