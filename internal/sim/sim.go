package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"time"

	"github.com/idemgo/idem"
)

// Result is the report of a run.
type Result struct {
	// Seed is the run's seed.
	Seed uint64
	// Deliveries is the number of Runner.Do calls made.
	Deliveries int
	// Steps is the number of scheduler steps.
	Steps int64
	// SimTime is the simulated time the run covered.
	SimTime time.Duration
	// Hash digests the run's every step: equal for equal runs.
	Hash uint64
	// Violations holds the first violation of each broken invariant, in
	// the order found; ViolationCount counts them all.
	Violations     []Violation
	ViolationCount int
	// Stats counts what happened.
	Stats Stats
}

// Stats counts the events of a run.
type Stats struct {
	// Tries counts handler tries.
	Tries int
	// Crashes and Kills count calls unwound by a crash or by their deadline.
	Crashes, Kills int
	// LostAnswers, Throttles and Timeouts count injected store faults.
	LostAnswers, Throttles, Timeouts int
	// Redeliveries counts deliveries scheduled again.
	Redeliveries int
	// TakeOvers counts calls that returned with Outcome.TookOver.
	TakeOvers int
	// The rest count calls by how they ended: a new success, a replay, in
	// progress, key reused, a permanent failure (new or replayed), retries
	// exhausted, a transient failure, the outcome not recorded (or the lease
	// lost), a store error, an undocumented error.
	Successes, Replays, InProgress, KeyReused, Permanent int
	Exhausted, Transient, NotRecorded, StoreErrors       int
	Undocumented                                         int
	// StaleRefused counts completions refused to a holder that lost its
	// lease; OverrunOverlaps, tries started beside an overrunning one.
	StaleRefused, OverrunOverlaps int
	// StepRuns counts runs of step functions (Service.Steps); StepsRecorded,
	// steps the store accepted.
	StepRuns, StepsRecorded int
	// StoreWrites counts the writes that reached the store under test
	// (Reserve, Acquire, Complete, RecordStep; not those an injected
	// throttle or timeout stopped); StoreRefusals, those it refused with a
	// conflict or a lost lease (on DynamoDB, each a failed conditional write,
	// charged as a write); StoreReads, its Get calls.
	StoreWrites, StoreRefusals, StoreReads int
}

func (st *Stats) count(c outClass, out idem.Outcome) {
	if out.TookOver {
		st.TakeOvers++
	}
	p := [...]*int{outSuccess: &st.Successes, outReplay: &st.Replays, outInProgress: &st.InProgress,
		outKeyReused: &st.KeyReused, outPermanent: &st.Permanent, outExhausted: &st.Exhausted,
		outTransient: &st.Transient, outNotRecorded: &st.NotRecorded, outStoreError: &st.StoreErrors,
		outOther: &st.Undocumented}
	if c != outCrash {
		*p[c]++
	}
}

// simulation is the state of one run. Only one goroutine uses it at a time: the
// scheduler's, or the task it handed control to.
type simulation struct {
	cfg  Config
	rng  *rand.Rand
	now  time.Duration
	q    eventQueue
	seq  uint64
	back chan struct{}

	steps int64
	hash  uint64

	store    *faultStore
	services []*service
	keys     map[string]*keyState
	results  map[string]resultInfo

	spawned, finished   int
	taskN, tryN, tokenN int64

	stats       Stats
	violations  []Violation
	nViolations int
	seen        map[Invariant]bool
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
	s.loop()
	if !s.halted() && s.finished != s.spawned {
		return Result{}, fmt.Errorf("sim: %d calls started, %d ended", s.spawned, s.finished)
	}
	return Result{
		Seed: cfg.Seed, Deliveries: s.spawned, Steps: s.steps, SimTime: s.now, Hash: s.hash,
		Violations: s.violations, ViolationCount: s.nViolations, Stats: s.stats,
	}, nil
}

var serviceName = regexp.MustCompile(`^[a-z0-9-]{1,40}$`)

func newSim(cfg Config) (*simulation, error) {
	if cfg.Deliveries < 1 || len(cfg.Services) == 0 || cfg.NewStore == nil {
		return nil, errors.New("sim: a config needs deliveries, services and a store")
	}
	s := &simulation{
		cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		back: make(chan struct{}), hash: 14695981039346656037,
		keys: make(map[string]*keyState), results: make(map[string]resultInfo), seen: make(map[Invariant]bool),
	}
	s.store = &faultStore{s: s, inner: cfg.NewStore()}
	for i := range cfg.Services {
		sv := &service{Service: cfg.Services[i]}
		if err := s.addService(sv); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// service is a Service in a run: its sandboxes and its active keys.
type service struct {
	Service
	sandboxes []*sandbox
	active    []string
	nextKey   int
}

func (s *simulation) addService(sv *service) error {
	if !serviceName.MatchString(sv.Name) || sv.Sandboxes < 1 || sv.ActiveKeys < 1 || len(sv.Deadlines) == 0 ||
		sv.ArrivalGap <= 0 || sv.Success+sv.Transient+sv.Permanent <= 0 {
		return fmt.Errorf("sim: service %q is incomplete", sv.Name)
	}
	for i := range sv.Sandboxes {
		sb := &sandbox{s: s, name: fmt.Sprintf("%s/%d", sv.Name, i)}
		// Each clock is off by less than half the margin: two clocks
		// differ by less than the margin, the skew the lease allows.
		half := sv.leaseMargin() / 2
		sb.skew = time.Duration((s.rng.Float64()*2 - 1) * 0.99 * float64(half))
		r, err := idem.New(s.store.runnerStore(), runnerOptions(sv, sb)...)
		if err != nil {
			return fmt.Errorf("sim: service %s: %w", sv.Name, err)
		}
		sb.runner = r
		sv.sandboxes = append(sv.sandboxes, sb)
	}
	s.services = append(s.services, sv)
	return nil
}

// runnerOptions returns the options of a sandbox's runner: the service's
// own, then the simulation's clock, sleep, randomness and lease tokens.
func runnerOptions(sv *service, sb *sandbox) []idem.Option {
	// An in-process retry starts only if the longest simulated try still
	// fits before min(deadline, lease end - margin).
	opts := []idem.Option{idem.WithRetryReserve(sv.HandlerMax)}
	if sv.InProgressMemory != 0 {
		opts = append(opts, idem.WithInProgressMemory(max(sv.InProgressMemory, 0)))
	}
	opts = append(opts, sv.Options...)
	return append(opts, idem.WithClock(sb.clock), idem.WithSleep(sb.sleep),
		idem.WithRand(sb.s.rng.Float64), idem.WithTokens(sb.token))
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
