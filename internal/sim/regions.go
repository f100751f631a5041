package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/memstore"
)

// The model of two Regions (Config.Regions): the store is a DynamoDB global
// table with a replica in Region A and one in Region B, each an in-memory
// store that applies its own conditional writes against its own state.
// Every write a replica applies is replicated to the other after a lag
// drawn from the seed, and applied there unless that replica holds a later
// write of the item: last writer wins, per item, by the write's timestamp
// (the simulated instant it was applied), silently. The shadow model of
// the single-Region runs stays in place: in the modes that promise nothing
// more than each replica does, its verdicts are counted, not reported
// (see simulation.excused).

// RegionMode is how the runners of a run of two Regions reach the table.
type RegionMode int

const (
	// MRECEveryRegion: multi-Region eventual consistency, each sandbox
	// calling its own Region's replica (writes in every Region).
	MRECEveryRegion RegionMode = iota + 1
	// MRECHomeRegion: multi-Region eventual consistency, every call sent to
	// the home Region, whichever Region the delivery arrives in (a store
	// whose DynamoDB client is configured with the home Region): Region A,
	// or A and B in turn with Regions.SwitchEvery.
	MRECHomeRegion
	// MRSC: multi-Region strong consistency: both Regions read and write
	// one linearizable state; a write to an item that the other Region
	// wrote less than Regions.ConflictWindow before is refused with a
	// replicated write conflict (transient, not applied).
	MRSC
)

var regionModeNames = map[RegionMode]string{
	MRECEveryRegion: "MREC, writes in every Region", MRECHomeRegion: "MREC, home Region", MRSC: "MRSC",
}

// String names the mode.
func (m RegionMode) String() string { return regionModeNames[m] }

// Regions makes the run's store a global table of two Regions, A and B
// (its sandboxes alternate: even ones in A, odd ones in B). The zero value
// is not usable: Mode must be set.
type Regions struct {
	// Mode is how the runners reach the table.
	Mode RegionMode
	// LagMin and LagMax bound the replication lag of each write, drawn
	// uniformly (MREC modes). Writes of one Region arrive in the other in
	// any order, as DynamoDB's replication makes no promise of order
	// across items; last writer wins settles an item's.
	LagMin, LagMax time.Duration
	// Cross is the probability that a copy of an event (Service.Copies)
	// arrives in the Region other than the one its first copy arrived in
	// (drawn at random): 0, every copy in one Region (a queue per Region,
	// each event in one); 1, a copy in each (a topic fanned out to a queue
	// in each Region).
	Cross float64
	// SwitchEvery, with MRECHomeRegion, moves the home Region from A to B,
	// and back, every SwitchEvery: a failover, at once.
	SwitchEvery time.Duration
	// ConflictWindow is, with MRSC, how long after the other Region's
	// write an item refuses a write (DynamoDB: the item "is being modified
	// by a request in another Region").
	ConflictWindow time.Duration
}

// RegionStats counts what happened in a run of two Regions.
type RegionStats struct {
	// Keys counts the keys delivered; Executions, the calls that ran a
	// handler (a call's first try).
	Keys, Executions int
	// Duplicates counts executions that began while another execution of
	// their key ran, or while a success of their key was retained
	// (invariant NoDuplicate).
	Duplicates int
	// Completions counts the outcomes (successes and failures) the replicas
	// accepted; LostCompletions, those a write that never saw them
	// overwrote (invariant NoLostOutcome).
	Completions, LostCompletions int
	// Replicated and Discarded count replicated writes applied in the
	// other Region and discarded there (it held a later write of the item).
	Replicated, Discarded int
	// Switches counts the home Region's switches; InFlightAtSwitch, the
	// keys with a write on its way to the new home Region at a switch.
	Switches, InFlightAtSwitch int
	// Conflicts counts writes refused with a replicated write conflict
	// (MRSC), and ReserveConflicts those of them that reserved a key (the
	// call fails with a store error; the source delivers it again).
	Conflicts, ReserveConflicts int
	// Excused counts the violations the mode allows: every one on
	// MRECEveryRegion; on MRECHomeRegion, those of keys with a write in
	// flight at a switch.
	Excused int
}

// replica is one Region's table: an in-memory store, and the version of
// each item it holds.
type replica struct {
	mem *memstore.Store
	cur map[string]*version
}

// version is a write a replica applied: its record (nil: deleted), its
// timestamp and Region, and the version it replaced in that Region (the
// one its condition was checked against).
type version struct {
	id     int64
	at     time.Duration
	region int
	rec    *core.Record
	parent *version
}

// later reports whether v wins over w by last writer wins: the later
// timestamp, then (in a tie) the later write.
func (v *version) later(w *version) bool { return v.at > w.at || v.at == w.at && v.id > w.id }

// writeMark is the last write of an item (MRSC).
type writeMark struct {
	region int
	at     time.Duration
}

// regionsStore is the store under test of a run of two Regions: an
// idem.Store (with Acquire, steps, renewals and releases) whose calls go
// to the replica of the caller's Region, or of the home Region.
type regionsStore struct {
	s           *simulation
	cfg         Regions
	reps        [2]replica
	home        int
	n           int64
	inFlight    [2]map[string]int    // writes on their way to each Region, by key
	lastWrite   map[string]writeMark // MRSC
	success     map[string]time.Time // the latest retention end of a success accepted for each key, in either Region
	leases      map[string]time.Time // the lease end of each reservation a replica accepted, by token, until completed or released
	running     map[string][]string  // the lease tokens of each key's executions, in the order they began
	own         map[*call]string     // the lease token of each call's last accepted reservation
	execs       map[string]int       // executions of each key
	excusedKeys map[string]bool      // keys with a write in flight at a switch
	completions []*version
	stats       RegionStats
}

var (
	_ idem.Store        = (*regionsStore)(nil)
	_ idem.Acquirer     = (*regionsStore)(nil)
	_ idem.StepRecorder = (*regionsStore)(nil)
	_ idem.LeaseRenewer = (*regionsStore)(nil)
	_ idem.Releaser     = (*regionsStore)(nil)
)

func newRegions(s *simulation, cfg Regions) (*regionsStore, error) {
	switch {
	case cfg.Mode < MRECEveryRegion || cfg.Mode > MRSC:
		return nil, fmt.Errorf("sim: regions: unknown mode %d", cfg.Mode)
	case cfg.LagMin < 0 || cfg.LagMax < cfg.LagMin || cfg.Cross < 0 || cfg.Cross > 1 || cfg.SwitchEvery < 0 || cfg.ConflictWindow < 0:
		return nil, fmt.Errorf("sim: regions: invalid %+v", cfg)
	case cfg.SwitchEvery > 0 && cfg.Mode != MRECHomeRegion:
		return nil, errors.New("sim: regions: only a home Region switches")
	case s.cfg.NewStore != nil || s.cfg.NewStoreBlob != nil:
		return nil, errors.New("sim: regions: the Regions' replicas are the store: leave NewStore unset")
	}
	m := &regionsStore{
		s: s, cfg: cfg, lastWrite: map[string]writeMark{}, success: map[string]time.Time{},
		leases: map[string]time.Time{}, running: map[string][]string{}, own: map[*call]string{},
		execs: map[string]int{}, excusedKeys: map[string]bool{},
	}
	for r := range m.reps {
		m.reps[r] = replica{mem: memstore.New(), cur: map[string]*version{}}
		m.inFlight[r] = map[string]int{}
	}
	return m, nil
}

// regionName names Region r.
func regionName(r int) string { return string(rune('A' + r)) }

// callerRegion is the Region of the sandbox whose call the store is
// serving; the operator's calls (on the scheduler) are the home Region's.
func (m *regionsStore) callerRegion() int {
	s := m.s
	if s.operating || s.cur == nil || s.cur.t == nil {
		return m.home
	}
	return s.cur.t.sb.region
}

// caller is the call whose thread makes the current store call, if any
// (not a renewal goroutine's, nor the operator's).
func (m *regionsStore) caller() *call {
	s := m.s
	if s.operating || s.cur == nil || s.cur.t == nil || s.cur.rn != nil {
		return nil
	}
	return s.cur.t.cur
}

// region is the Region whose replica serves the current call.
func (m *regionsStore) region() int {
	if m.cfg.Mode == MRECHomeRegion {
		return m.home
	}
	return m.callerRegion()
}

// replica returns Region r's table (under MRSC, the one state).
func (m *regionsStore) replica(r int) *replica {
	if m.cfg.Mode == MRSC {
		return &m.reps[0]
	}
	return &m.reps[r]
}

// raw returns the record the replica holds for key, whether or not it is
// past its retention.
func (rp *replica) raw(key string) (core.Record, bool) {
	rec, err := rp.mem.Get(context.Background(), key, time.Time{})
	return rec, err == nil
}

// install writes rec (nil: none) as the replica's record of key, whatever
// it held: a replicated write, applied without a condition. It goes through
// the in-memory store's own calls: the record held is released, rec is
// reserved (a finished record first as in progress under its own token,
// with no end), then completed.
func (rp *replica) install(key string, rec *core.Record) {
	ctx := context.Background()
	if cur, ok := rp.raw(key); ok {
		if err := rp.mem.Release(ctx, cur); err != nil {
			panic("sim: regions: release of the record held: " + err.Error())
		}
	}
	if rec == nil {
		return
	}
	hold := *rec
	hold.Status, hold.ExpiresAt = core.StatusInProgress, time.Time{}
	err := rp.mem.Reserve(ctx, hold, nil, time.Time{})
	if err == nil && rec.Status != core.StatusInProgress {
		_, err = rp.mem.Complete(ctx, *rec)
	}
	if err != nil {
		panic("sim: regions: install: " + err.Error())
	}
}

// write runs one write (op, on key) against the replica of the current
// call's Region, and replicates what it changed. Under MRSC a write other
// than a release is refused first if the other Region wrote the item less
// than the conflict window before.
func (m *regionsStore) write(op, key string, fn func(*memstore.Store) error) error {
	r := m.region()
	if err := m.conflict(op, key, r); err != nil {
		return err
	}
	rp := m.replica(r)
	before, had := rp.raw(key)
	if err := fn(rp.mem); err != nil {
		return err
	}
	after, has := rp.raw(key)
	if has == had && (!has || reflect.DeepEqual(before, after)) {
		return nil // nothing changed: a retried write recognised
	}
	if has && after.Status == core.StatusInProgress && (op == "reserve" || op == "acquire") {
		if c := m.caller(); c != nil {
			m.own[c] = after.LeaseToken
		}
	}
	m.commit(r, key, before, had, after, has)
	return nil
}

// conflict refuses, under MRSC, a write of key from Region r while the
// other Region's last write of the item is less than the window old.
func (m *regionsStore) conflict(op, key string, r int) error {
	if m.cfg.Mode != MRSC || op == "release" {
		return nil
	}
	w, ok := m.lastWrite[key]
	if !ok || w.region == r || m.s.now-w.at >= m.cfg.ConflictWindow {
		return nil
	}
	m.stats.Conflicts++
	if op == "reserve" || op == "acquire" {
		m.stats.ReserveConflicts++
	}
	return core.MarkTransient(&InjectedError{Op: op, Kind: "replicated write conflict"})
}

// commit records the version Region r just wrote, and sends it to the
// other Region (MREC) or marks the item as written (MRSC).
func (m *regionsStore) commit(r int, key string, before core.Record, had bool, after core.Record, has bool) {
	s, rp := m.s, m.replica(r)
	m.n++
	v := &version{id: m.n, at: s.now, region: r, parent: rp.cur[key]}
	rp.cur[key] = v
	switch {
	case has && after.Status == core.StatusInProgress:
		v.rec = &after
		m.leases[after.LeaseToken] = after.LeaseUntil
	case has:
		v.rec = &after
		if after.Status == core.StatusSucceeded && after.ExpiresAt.After(m.success[key]) {
			m.success[key] = after.ExpiresAt
		}
		m.completions = append(m.completions, v)
		m.stats.Completions++
		delete(m.leases, after.LeaseToken)
	case before.Status == core.StatusSucceeded:
		delete(m.success, key) // released: the key may run again
	}
	if had && !has {
		delete(m.leases, before.LeaseToken)
	}
	if m.cfg.Mode == MRSC {
		m.lastWrite[key] = writeMark{region: r, at: s.now}
		return
	}
	dst := 1 - r
	m.inFlight[dst][key]++
	s.after(s.between(m.cfg.LagMin, m.cfg.LagMax), func() { m.arrive(dst, key, v) })
}

// arrive applies, in Region dst, a write replicated from the other Region,
// unless the replica holds a later write of the item (last writer wins).
func (m *regionsStore) arrive(dst int, key string, v *version) {
	if m.inFlight[dst][key]--; m.inFlight[dst][key] == 0 {
		delete(m.inFlight[dst], key)
	}
	rp := &m.reps[dst]
	kind := hReplicated
	if cur := rp.cur[key]; cur != nil && cur.later(v) {
		m.stats.Discarded++
		kind = hReplicaDiscarded
	} else {
		rp.install(key, v.rec)
		rp.cur[key] = v
		m.stats.Replicated++
	}
	if ks := m.s.keys[key]; ks != nil {
		var rec core.Record
		if v.rec != nil {
			rec = *v.rec
		}
		m.s.histKey(ks, nil, kind, rec, nil)
		ks.histWho("replication", fmt.Sprintf("(written in Region %s at %s, arrived in Region %s)", regionName(v.region), fmtRel(v.at), regionName(dst)))
	}
}

// describe says what each replica holds for key.
func (m *regionsStore) describe(key string) string {
	if m.cfg.Mode == MRSC {
		return m.holds(0, key)
	}
	return "Region A holds " + m.holds(0, key) + ", Region B " + m.holds(1, key)
}

func (m *regionsStore) holds(r int, key string) string {
	if rec, ok := m.reps[r].raw(key); ok {
		return rec.String()
	}
	return "no record"
}

func (m *regionsStore) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	return m.write("reserve", rec.Key, func(st *memstore.Store) error { return st.Reserve(ctx, rec, prev, now) })
}

func (m *regionsStore) Acquire(ctx context.Context, rec core.Record, now time.Time, p core.Policy) (got core.Record, prev *core.Record, err error) {
	err = m.write("acquire", rec.Key, func(st *memstore.Store) error {
		var e error
		got, prev, e = st.Acquire(ctx, rec, now, p)
		return e
	})
	return got, prev, err
}

func (m *regionsStore) Complete(ctx context.Context, rec core.Record) (got core.Record, err error) {
	err = m.write("complete", rec.Key, func(st *memstore.Store) error {
		var e error
		got, e = st.Complete(ctx, rec)
		return e
	})
	return got, err
}

func (m *regionsStore) Get(ctx context.Context, key string, now time.Time) (core.Record, error) {
	return m.replica(m.region()).mem.Get(ctx, key, now)
}

func (m *regionsStore) RecordStep(ctx context.Context, key, token string, step core.Step, now time.Time) error {
	return m.write("step", key, func(st *memstore.Store) error { return st.RecordStep(ctx, key, token, step, now) })
}

func (m *regionsStore) RenewLease(ctx context.Context, rec core.Record, until, now time.Time) (got core.Record, err error) {
	err = m.write("renew", rec.Key, func(st *memstore.Store) error {
		var e error
		got, e = st.RenewLease(ctx, rec, until, now)
		return e
	})
	return got, err
}

func (m *regionsStore) Release(ctx context.Context, rec core.Record) error {
	return m.write("release", rec.Key, func(st *memstore.Store) error { return st.Release(ctx, rec) })
}

// startRegions schedules the first switch of the home Region, if the run
// has switches.
func (s *simulation) startRegions() {
	if m := s.regions; m != nil && m.cfg.SwitchEvery > 0 {
		s.after(m.cfg.SwitchEvery, m.switchHome)
	}
}

// switchHome moves every call to the other Region, at once, while
// deliveries remain. A key with a write on its way there is excused from
// the invariants from now on: its new home may not hold its last write.
func (m *regionsStore) switchHome() {
	s := m.s
	if s.spawned >= s.cfg.Deliveries {
		return
	}
	to := 1 - m.home
	for _, key := range slices.Sorted(maps.Keys(m.inFlight[to])) {
		m.excusedKeys[key] = true
		m.stats.InFlightAtSwitch++
		if ks := s.keys[key]; ks != nil {
			s.histKey(ks, nil, hHomeSwitch, core.Record{}, nil)
			ks.histWho("switch", fmt.Sprintf("(to Region %s, a write on its way there)", regionName(to)))
		}
	}
	m.home = to
	m.stats.Switches++
	s.after(m.cfg.SwitchEvery, m.switchHome)
}

// excused reports whether a violation about ks is one the run's mode
// allows, and counts it: every one with writes in every Region, and, with
// a home Region, those of a key that had a write in flight at a switch.
func (s *simulation) excused(ks *keyState) bool {
	m := s.regions
	if m == nil {
		return false
	}
	if m.cfg.Mode == MRECEveryRegion || m.excusedKeys[ks.key] {
		m.stats.Excused++
		return true
	}
	return false
}

// checkExecution counts, in a run of two Regions, a call's first handler
// try as an execution of its key, and checks NoDuplicate: it must not
// begin while an earlier execution of the key holds a live lease (its
// reservation, neither completed nor released, with its lease as last
// written not ended), nor while a success of the key that a replica
// accepted is retained, unless it was released; both allowing for clock
// skew. (A reservation replaced while its lease lives was replaced by a
// write that never saw it: its holder still runs.)
func (s *simulation) checkExecution(c *call) {
	m := s.regions
	if m == nil || c.tries > 0 {
		return
	}
	ks := c.ks
	m.execs[ks.key]++
	live := epoch.Add(s.now + ks.sv.leaseMargin()/2)
	why, running := "", m.running[ks.key][:0]
	for _, tok := range m.running[ks.key] {
		end, ok := m.leases[tok]
		if !ok {
			continue // completed or released
		}
		running = append(running, tok)
		if why == "" && live.Before(end) {
			why = fmt.Sprintf("while the execution of lease %s, live until %s, runs", tok, s.fmtAbs(end))
		}
	}
	m.running[ks.key] = append(running, m.own[c])
	delete(m.own, c)
	if end, ok := m.success[ks.key]; why == "" && ok && live.Before(end) {
		why = "while a success of the key is retained until " + s.fmtAbs(end)
	}
	if why == "" {
		return
	}
	m.stats.Duplicates++
	s.violate(NoDuplicate, ks, "delivery %d (%s, Region %s) began an execution %s; %s",
		c.d.id, c.t.sb.name, regionName(c.t.sb.region), why, m.describe(ks.key))
}

// finishRegions counts, once the run drained (every replicated write
// arrived), the keys, the executions and the outcomes lost: those no
// replica's last write descends from, which a write that never saw them
// overwrote (invariant NoLostOutcome).
func (s *simulation) finishRegions() {
	m := s.regions
	m.stats.Keys = len(s.keys)
	for _, n := range m.execs {
		m.stats.Executions += n
	}
	kept := map[*version]bool{}
	for r := range m.reps {
		for _, v := range m.reps[r].cur {
			for ; v != nil && !kept[v]; v = v.parent {
				kept[v] = true
			}
		}
	}
	for _, v := range m.completions {
		if kept[v] {
			continue
		}
		m.stats.LostCompletions++
		if ks := s.keys[v.rec.Key]; ks != nil {
			s.violate(NoLostOutcome, ks, "outcome %s, written in Region %s at %s, was overwritten by a write that never saw it; %s",
				v.rec, regionName(v.region), fmtRel(v.at), m.describe(ks.key))
		}
	}
}

// arriveCopies delivers an arrival of sv Copies times (Service.Copies):
// in a run of two Regions, the first copy in a Region drawn at random, each
// other in the other Region with probability Regions.Cross.
func (s *simulation) arriveCopies(sv *service) {
	d := s.newDelivery(sv)
	first := 0
	if s.regions != nil {
		first = 1 + s.rng.IntN(2)
	}
	d.region = first
	s.spawn(d)
	var at time.Duration
	for range sv.Copies - 1 {
		at += s.expGap(sv.CopyGap)
		cp := *d
		if first != 0 && s.chance(s.regions.cfg.Cross) {
			cp.region = 3 - first
		}
		s.after(at, func() { s.spawn(&cp) })
	}
}

// sandboxFor draws the sandbox that takes delivery d: any of its service's,
// or, for a delivery that arrives in a Region, one of that Region's.
func (s *simulation) sandboxFor(d *delivery) *sandbox {
	sbs := d.sv.sandboxes
	if d.region == 0 {
		return sbs[s.rng.IntN(len(sbs))]
	}
	r := d.region - 1
	return sbs[r+2*s.rng.IntN((len(sbs)-r+1)/2)]
}

// Regional is a function deployed in two Regions (Config.Regions): every
// event is delivered twice, the copy an exponential gap of mean gap after
// the first (in the Region Regions.Cross draws); handlers of 10 to 200 ms
// that succeed, under Lambda's 30-second deadline; a delivery found in
// progress comes back 1 to 10 s later, as from a queue's visibility
// timeout. New events arrive every 200 ms on average, each with its own
// key.
func Regional(gap time.Duration) Service {
	return Service{
		Name:       "regional",
		Sandboxes:  4,
		Deadlines:  []DeadlineMode{{Kind: Kill, Min: 30 * time.Second, Max: 30 * time.Second}},
		HandlerMin: 10 * time.Millisecond, HandlerMax: 200 * time.Millisecond,
		Success:    1,
		ArrivalGap: 200 * time.Millisecond, ActiveKeys: 1, NewKey: 1,
		Copies: 2, CopyGap: gap,
		RedeliverMin: time.Second, RedeliverMax: 10 * time.Second, Redeliveries: 6,
	}
}
