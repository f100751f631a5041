package sim

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/blob"
	"github.com/idemgo/idem/core"
)

// Result is the report of a run.
type Result struct {
	// Seed is the run's seed.
	Seed uint64
	// Deliveries is the number of deliveries made.
	Deliveries int
	// Steps is the number of scheduler steps.
	Steps int64
	// SimTime is the simulated time the run covered.
	SimTime time.Duration
	// Hash digests the run's every step: equal for equal runs.
	Hash uint64
	// Services are the run's services, the drawn ones included.
	Services []Service
	// Violations holds the first violation of each broken invariant, in
	// the order found; ViolationCount counts them all.
	Violations     []Violation
	ViolationCount int
	// Stats counts what happened.
	Stats Stats
	// Regions counts what happened in a run of two Regions.
	Regions RegionStats
}

// Stats counts the events of a run.
type Stats struct {
	// Tries counts handler tries; NextTries, those after a call's first
	// (under its reservation, after a backoff); RenewedNextTries, next
	// tries that renewed the lease held (a renewal goroutine started).
	Tries, NextTries, RenewedNextTries int
	// Crashes and Kills count tasks unwound by a crash or by their deadline.
	Crashes, Kills int
	// LostAnswers, Throttles and Timeouts count injected store faults.
	LostAnswers, Throttles, Timeouts int
	// Redeliveries counts deliveries scheduled again.
	Redeliveries int
	// TakeOvers counts calls that returned with Outcome.TookOver; Waited,
	// those that waited (Outcome.Waited); CacheHits, replays from a
	// runner's cache.
	TakeOvers, Waited, CacheHits int
	// The rest count calls by how they ended: a new success, a replay, in
	// progress, key reused, a permanent failure (new or replayed), retries
	// exhausted, a transient failure, an unclassified failure, the outcome
	// not recorded (or the lease lost), the commit refused, a store error,
	// an undocumented error.
	Successes, Replays, InProgress, KeyReused, Permanent           int
	Exhausted, Transient, Unclassified, NotRecorded, CommitRefused int
	StoreErrors, Undocumented                                      int
	// StaleRefused counts completions refused to a holder that lost its
	// lease; OverrunOverlaps, tries started beside an overrunning one.
	StaleRefused, OverrunOverlaps int
	// StepRuns counts runs of step functions (Service.Steps); StepsRecorded,
	// steps the store accepted.
	StepRuns, StepsRecorded int
	// Renewals counts lease renewals the store accepted; LeasesLost, tries
	// whose renewal goroutine lost the lease and cancelled the handler's
	// context.
	Renewals, LeasesLost int
	// Staged counts tries that staged writes; StagedLanded, those whose
	// writes landed with their success; StagedRefused, commits refused by
	// a staged write's own condition; StagedThrottled, commits throttled
	// (refused as a whole: idem.ErrCommitRefused).
	Staged, StagedLanded, StagedRefused, StagedThrottled int
	// LargeResults counts large results recorded; BlobFaults, faults
	// injected into the blob store.
	LargeResults, BlobFaults int
	// Releases and Downgrades count the operator's releases and records
	// rewritten in the previous encoding; NoRecords, the reservations
	// released by their own holder, for a try marked core.MarkNoRecord.
	Releases, Downgrades, NoRecords int
	// Swept counts the records a sweep deleted (Faults.Sweep), SweepErrors
	// the sweep's pages that failed.
	Swept, SweepErrors int
	// Batches counts batch invocations; BatchReported, records they
	// reported for redelivery; Blocked, records an ordered lane did not
	// start after a failure.
	Batches, BatchReported, Blocked int
	// StoreWrites counts the writes that reached the store under test
	// (Reserve, Acquire, Complete, RecordStep, RenewLease, Release; not those an
	// injected throttle or timeout stopped); StoreRefusals, those it
	// refused with a conflict or a lost lease (on DynamoDB, each a failed
	// conditional write, charged as a write); StoreReads, its Get calls.
	StoreWrites, StoreRefusals, StoreReads int
}

// simulation is the state of one run. Only one goroutine uses it at a time:
// the scheduler's, or the actor it handed control to.
type simulation struct {
	cfg  Config
	rng  *rand.Rand
	now  time.Duration
	q    eventQueue
	seq  uint64
	back chan struct{}
	cur  *actor // the actor holding the turn

	steps int64
	hash  uint64

	store     *faultStore
	regions   *regionsStore // the two Regions' store, in a run of two Regions
	blobs     *faultBlob
	services  []*service
	keys      map[string]*keyState
	results   map[string]resultInfo
	followers map[followKey][]parked

	spawned, finished        int
	taskN, tryN, tokenN      int64
	actorN, deliveryN, sentN int64
	stagedMem                *memStager
	operating                bool // the operator is at work (on the scheduler)
	stats                    Stats
	violations               []Violation
	nViolations              int
	seen                     map[Invariant]bool
	logger                   *slog.Logger
	allServices              []Service
}

// Run runs the simulation cfg describes and reports it. An error is a bad
// configuration; broken invariants are in Result.Violations.
func Run(cfg Config) (Result, error) {
	s, err := newSim(cfg)
	if err != nil {
		return Result{}, err
	}
	for _, sv := range s.services {
		s.after(s.expGap(sv.ArrivalGap), func() { s.arrive(sv) })
	}
	s.startOperator()
	s.startSweeper()
	s.startRegions()
	s.loop()
	if !s.halted() && s.finished != s.spawned {
		return Result{}, fmt.Errorf("sim: %d deliveries started, %d ended", s.spawned, s.finished)
	}
	res := Result{
		Seed: cfg.Seed, Deliveries: s.spawned, Steps: s.steps, SimTime: s.now, Hash: s.hash, Services: s.allServices,
	}
	if s.regions != nil && !s.halted() {
		s.finishRegions()
		res.Regions = s.regions.stats
	}
	res.Violations, res.ViolationCount, res.Stats = s.violations, s.nViolations, s.stats
	return res, nil
}

var serviceName = regexp.MustCompile(`^[a-z0-9-]{1,40}$`)

func newSim(cfg Config) (*simulation, error) {
	if cfg.Deliveries < 1 || len(cfg.Services)+cfg.Draw == 0 || (cfg.NewStore == nil && cfg.NewStoreBlob == nil && cfg.Regions == nil) {
		return nil, errors.New("sim: a config needs deliveries, services and a store")
	}
	s := &simulation{
		cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		back: make(chan struct{}), hash: 14695981039346656037,
		keys: make(map[string]*keyState), results: make(map[string]resultInfo), seen: make(map[Invariant]bool),
		followers: make(map[followKey][]parked),
	}
	s.logger = slog.New(logHandler{s})
	s.store = &faultStore{s: s}
	if cfg.Regions != nil {
		m, err := newRegions(s, *cfg.Regions)
		if err != nil {
			return nil, err
		}
		s.regions, s.store.inner = m, m
	} else if cfg.NewStoreBlob != nil {
		s.blobs = &faultBlob{s: s, inner: blob.NewMemory()}
		s.store.inner = cfg.NewStoreBlob(s.blobs)
	} else {
		s.store.inner = cfg.NewStore()
	}
	if s.cfg.Stager == nil {
		s.stagedMem = &memStager{s: s, landed: map[string]int{}}
		s.cfg.Stager = s.stagedMem
	}
	services := append(append([]Service(nil), cfg.Services...), s.draw(cfg.Draw)...)
	for i := range services {
		if err := s.addService(&service{Service: services[i]}); err != nil {
			return nil, err
		}
		s.allServices = append(s.allServices, services[i])
	}
	return s, nil
}

// service is a Service in a run: its sandboxes, its active keys, and its
// ordered lanes.
type service struct {
	Service
	sandboxes []*sandbox
	active    []string
	nextKey   int
	lanes     []*lane
}

func (s *simulation) addService(sv *service) error {
	if !serviceName.MatchString(sv.Name) || sv.Sandboxes < 1 || sv.ActiveKeys < 1 || len(sv.Deadlines) == 0 ||
		s.regions != nil && sv.Copies > 0 && sv.Sandboxes < 2 ||
		sv.ArrivalGap <= 0 || sv.Success+sv.Transient+sv.Permanent+sv.Ordinary <= 0 {
		return fmt.Errorf("sim: service %q is incomplete", sv.Name)
	}
	for i := range sv.Sandboxes {
		sb := &sandbox{s: s, sv: sv, name: fmt.Sprintf("%s/%d", sv.Name, i), region: i % 2}
		// Each clock is off by less than half the margin: two clocks
		// differ by less than the margin, the skew the lease allows.
		half := sv.leaseMargin() / 2
		sb.skew = time.Duration((s.rng.Float64()*2 - 1) * 0.99 * float64(half))
		r, err := idem.New(s.store.runnerStore(sv), s.runnerOptions(sv, sb)...)
		if err != nil {
			return fmt.Errorf("sim: service %s: %w", sv.Name, err)
		}
		sb.runner = r
		if err := sb.wrap(); err != nil {
			return fmt.Errorf("sim: service %s: %w", sv.Name, err)
		}
		sv.sandboxes = append(sv.sandboxes, sb)
	}
	s.services = append(s.services, sv)
	return nil
}

// runnerOptions returns the options of a sandbox's runner: those the
// service's fields make, its own, then the simulation's clock, sleep,
// randomness, lease tokens, logger and tracer.
func (s *simulation) runnerOptions(sv *service, sb *sandbox) []idem.Option {
	reserve := sv.RetryReserve
	if reserve == 0 {
		reserve = sv.HandlerMax
	}
	opts := []idem.Option{idem.WithRetryReserve(reserve)}
	if sv.Retention > 0 {
		opts = append(opts, idem.WithRetention(sv.Retention))
	}
	if sv.LeaseMargin > 0 || sv.LeaseWithoutDeadline > 0 {
		opts = append(opts, idem.WithLease(sv.leaseMargin(), sv.leaseWithoutDeadline()))
	}
	if sv.MaxAttempts > 0 {
		opts = append(opts, idem.WithMaxAttempts(sv.MaxAttempts))
	}
	if sv.Retry.Attempts > 0 {
		opts = append(opts, idem.WithRetry(sv.Retry.Attempts, sv.Retry.Base, sv.Retry.Max))
	}
	if sv.CompletionAttempts > 0 {
		opts = append(opts, idem.WithCompletionAttempts(sv.CompletionAttempts))
	}
	if sv.UnclassifiedPermanent {
		opts = append(opts, idem.WithUnclassifiedPermanent())
	}
	opts = append(opts, sv.capabilityOptions()...)
	opts = append(opts, sv.Options...)
	return append(opts, idem.WithClock(sb.clock), idem.WithSleep(sb.sleep),
		idem.WithRand(s.rng.Float64), idem.WithTokens(sb.token), idem.WithLogger(s.logger), idem.WithTracer(tracer{s}))
}

// capabilityOptions are the options of the service's cache, wait, renewal,
// memory of keys in progress and fingerprint selection.
func (sv *Service) capabilityOptions() []idem.Option {
	var opts []idem.Option
	if sv.Cache > 0 {
		opts = append(opts, idem.WithCache(sv.Cache))
	}
	if sv.CacheTTL > 0 {
		opts = append(opts, idem.WithCacheTTL(sv.CacheTTL))
	}
	if sv.Wait > 0 {
		opts = append(opts, idem.WithWait(sv.Wait))
	}
	if sv.Renewal > 0 {
		opts = append(opts, idem.WithLeaseRenewal(sv.Renewal))
	}
	if sv.InProgressMemory != 0 {
		opts = append(opts, idem.WithInProgressMemory(max(sv.InProgressMemory, 0)))
	}
	if sv.InProgressRecheck > 0 {
		opts = append(opts, idem.WithInProgressRecheck(sv.InProgressRecheck))
	}
	if sv.Selection && sv.Batch == 0 {
		opts = append(opts, idem.WithFingerprintSelection(core.IgnoreFields("sent_at")))
	}
	return opts
}

// mix folds two words into the run's hash (FNV-1a over 64-bit words).
func (s *simulation) mix(a, b uint64) {
	const prime = 1099511628211
	s.hash = (s.hash ^ a) * prime
	s.hash = (s.hash ^ b) * prime
}

func (s *simulation) chance(p float64) bool { return p > 0 && s.rng.Float64() < p }

// between draws a duration uniformly in [lo, hi].
func (s *simulation) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)+1))
}

// expGap draws an exponential gap of the given mean.
func (s *simulation) expGap(mean time.Duration) time.Duration {
	return time.Duration(s.rng.ExpFloat64() * float64(mean))
}
