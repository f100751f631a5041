package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemgo/idem/core"
)

// Violation is a broken invariant, with what is needed to replay and
// understand it.
type Violation struct {
	// Invariant is the property broken.
	Invariant Invariant
	// Seed is the run's seed: Run with the same Config replays it.
	Seed uint64
	// Step is the scheduler step at which it was found.
	Step int64
	// At is the simulated time at which it was found.
	At time.Duration
	// Key is the key concerned.
	Key string
	// Message says what happened.
	Message string
	// History is the key's last events, oldest first.
	History []string
}

// Error describes the violation with the key's history.
func (v Violation) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s violated (seed %d, step %d, %s, key %s):\n  %s\n  history of the key, oldest first:\n",
		v.Invariant, v.Seed, v.Step, fmtRel(v.At), v.Key, v.Message)
	for _, h := range v.History {
		b.WriteString("    ")
		b.WriteString(h)
		b.WriteByte('\n')
	}
	return b.String()
}

// violate records a violation of inv about ks: the first of each invariant
// is kept; the run halts after cfg.MaxViolations.
func (s *simulation) violate(inv Invariant, ks *keyState, format string, args ...any) {
	if s.excused(ks) {
		return
	}
	s.nViolations++
	s.mix(uint64(inv), 0)
	if s.seen[inv] {
		return
	}
	s.seen[inv] = true
	s.violations = append(s.violations, Violation{
		Invariant: inv, Seed: s.cfg.Seed, Step: s.steps, At: s.now, Key: ks.key,
		Message: fmt.Sprintf(format, args...), History: ks.hist.lines(),
	})
}

func (s *simulation) halted() bool {
	limit := s.cfg.MaxViolations
	if limit < 1 {
		limit = 1
	}
	return s.nViolations >= limit
}

// fmtRel formats a simulated instant as an offset from the epoch.
func fmtRel(d time.Duration) string { return "T+" + d.Round(time.Microsecond).String() }

func (s *simulation) fmtRel(d time.Duration) string { return fmtRel(d) }

// fmtAbs formats a clock reading as an offset from the epoch.
func (s *simulation) fmtAbs(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return fmtRel(t.Sub(epoch))
}

// histKind is the kind of a history event.
type histKind uint8

const (
	hDeliver histKind = iota + 1
	hReserveAccepted
	hReserveRefused
	hCompleteAccepted
	hCompleteRefused
	hTryStart
	hTryEnd
	hSleep
	hEnd
	hStep
	hRenewAccepted
	hRenewRefused
	hLeaseLost
	hReleased
	hDowngraded
	hReleasedByHolder
	hReleaseRefused
	hReplicated
	hReplicaDiscarded
	hHomeSwitch
	hSwept
)

var histNames = [...]string{
	hDeliver: "delivered", hReserveAccepted: "reserve accepted", hReserveRefused: "reserve refused",
	hCompleteAccepted: "complete accepted", hCompleteRefused: "complete refused",
	hTryStart: "handler try starts", hTryEnd: "handler try ends", hSleep: "sleeps", hEnd: "call ends",
	hStep: "step accepted", hRenewAccepted: "renewal accepted", hRenewRefused: "renewal refused",
	hLeaseLost: "lease lost: handler's context cancelled", hReleased: "released by an operator",
	hDowngraded: "rewritten in the previous encoding", hReleasedByHolder: "released by its holder (no record)",
	hReleaseRefused: "release refused", hReplicated: "replicated write applied", hSwept: "deleted by a sweep, past retention",
	hReplicaDiscarded: "replicated write discarded (the replica holds a later one)", hHomeSwitch: "home Region switched",
}

var classNames = [...]string{
	outCrash: "crashed", outSuccess: "success", outReplay: "replayed", outInProgress: "in progress",
	outKeyReused: "key reused", outPermanent: "permanent failure", outExhausted: "retries exhausted",
	outTransient: "transient failure", outUnclassified: "unclassified failure", outNotRecorded: "outcome not recorded", outCommitRefused: "commit refused", outStoreError: "store error",
	outOther: "UNDOCUMENTED",
}

// histEvent is one event of a key's history.
type histEvent struct {
	at       time.Duration
	kind     histKind
	call     int64
	sandbox  string
	skew     time.Duration
	tok      string
	status   core.Status
	attempts int
	steps    string
	lease    time.Time
	expires  time.Time
	err      error
	note     string
}

// histRing keeps a key's last events.
type histRing struct {
	buf [48]histEvent
	n   int
}

// hist adds an event of call c (nil: the operator's) to its key's history.
func (s *simulation) hist(c *call, k histKind, rec core.Record, err error) {
	s.histKey(c.ks, c, k, rec, err)
}

func (s *simulation) histKey(ks *keyState, c *call, k histKind, rec core.Record, err error) {
	e := histEvent{at: s.now, kind: k, sandbox: "operator",
		tok: rec.LeaseToken, status: rec.Status, attempts: rec.Attempts, lease: rec.LeaseUntil, expires: rec.ExpiresAt, err: err}
	if len(rec.Steps) > 0 {
		e.steps = stepNames(rec.Steps)
	}
	if c != nil {
		e.call, e.sandbox, e.skew = c.d.id, c.t.sb.name, c.t.sb.skew
	}
	s.mix(uint64(k), uint64(e.call))
	ks.hist.buf[ks.hist.n%len(ks.hist.buf)] = e
	ks.hist.n++
}

// note sets the note of the key's last event.
func (ks *keyState) note(s string) {
	if ks.hist.n > 0 {
		ks.hist.buf[(ks.hist.n-1)%len(ks.hist.buf)].note = s
	}
}

// histWho sets who made the key's last event (in place of "operator", for
// an event of no call) and its note.
func (ks *keyState) histWho(who, note string) {
	if ks.hist.n > 0 {
		e := &ks.hist.buf[(ks.hist.n-1)%len(ks.hist.buf)]
		e.sandbox, e.note = who, note
	}
}

func (h *histRing) lines() []string {
	start := 0
	if h.n > len(h.buf) {
		start = h.n - len(h.buf)
	}
	out := make([]string, 0, h.n-start)
	for i := start; i < h.n; i++ {
		out = append(out, h.buf[i%len(h.buf)].String())
	}
	return out
}

func (e histEvent) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s delivery %-6d %s(skew %+v)  %s", fmtRel(e.at), e.call, e.sandbox, e.skew.Round(time.Millisecond), histNames[e.kind])
	if e.tok != "" {
		fmt.Fprintf(&b, " [%s token=%s attempts=%d", e.status, e.tok, e.attempts)
		if !e.lease.IsZero() {
			fmt.Fprintf(&b, " lease_until=%s", fmtRel(e.lease.Sub(epoch)))
		}
		fmt.Fprintf(&b, " expires=%s", fmtRel(e.expires.Sub(epoch)))
		if e.steps != "" {
			fmt.Fprintf(&b, " steps=%s", e.steps)
		}
		b.WriteString("]")
	}
	if e.note != "" {
		b.WriteString(" " + e.note)
	}
	if e.err != nil {
		fmt.Fprintf(&b, ": %v", e.err)
	}
	return b.String()
}
