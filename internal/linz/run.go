package linz

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemgo/idem/storetest"
)

// Size is the size of a linearizability run: Histories histories, each of
// Clients random clients and Runners idem.Runners making Ops calls each on
// Keys keys.
type Size struct {
	Histories, Clients, Runners, Ops, Keys int
}

// Environment variables that override a Size (each a positive integer),
// for longer runs (make test-long); IDEM_LINZ_SEED fixes the seed of the
// first history (the others count up from it) and IDEM_LINZ_DIR is where
// failing histories' visualisations are written (default
// $TMPDIR/idem-linz).
const (
	EnvHistories = "IDEM_LINZ_HISTORIES"
	EnvClients   = "IDEM_LINZ_CLIENTS"
	EnvOps       = "IDEM_LINZ_OPS"
	EnvSeed      = "IDEM_LINZ_SEED"
	EnvDir       = "IDEM_LINZ_DIR"
)

// FromEnv returns s with the fields the environment sets replaced; a value
// that is not a positive integer fails t.
func (s Size) FromEnv(t testing.TB) Size {
	s.Histories = envInt(t, EnvHistories, s.Histories)
	s.Clients = envInt(t, EnvClients, s.Clients)
	s.Ops = envInt(t, EnvOps, s.Ops)
	return s
}

func envInt(t testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// Seed returns IDEM_LINZ_SEED, or a random seed.
func Seed(t testing.TB) uint64 {
	if v := os.Getenv(EnvSeed); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", EnvSeed, v)
		}
		return n
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) >> 1
}

// CheckTimeout bounds porcupine's search for one history. A search it
// ends is a failure (inconclusive), never a pass.
const CheckTimeout = 2 * time.Minute

// RunLinearizable runs sz's histories on the targets newTarget returns
// (one per history, given the history's faults: a store whose transport
// injects them, or a Target whose Faults they are) and checks each with
// porcupine against the target's Model. Each history has keys of its own.
// A history that is not linearizable fails t with the path of its
// visualisation. The seed and what each history did are logged.
func RunLinearizable(t *testing.T, sz Size, rates Rates, newTarget func(t *testing.T, f *Faults) *Target) {
	t.Helper()
	sz = sz.FromEnv(t)
	seed := Seed(t)
	run := RunID()
	for i := range sz.Histories {
		s := seed + uint64(i)
		faults := NewFaults(s, rates)
		target := newTarget(t, faults)
		w := Workload{Clients: sz.Clients, Runners: sz.Runners, Ops: sz.Ops,
			Prefix: fmt.Sprintf("lz:%s:%d", run, i), Keys: sz.Keys, KeyLife: KeyLife, Seed: s, Start: time.Now().Truncate(time.Millisecond)}
		h := NewHistory()
		began := time.Now()
		w.Run(context.Background(), target, h)
		ran := time.Since(began)
		CheckHistory(t, target, w.Start, h.Entries(), fmt.Sprintf("%s seed %d", t.Name(), s))
		t.Logf("%s, seed %d: %d calls in %v (%v), faults %v; %s", target.Name, s, len(h.Entries()), ran.Round(time.Millisecond),
			time.Since(began).Round(time.Millisecond), faultCounts(faults), Summary(h.Entries()))
	}
}

// CheckHistory checks entries, made on target with times from base, and
// fails t if they are not linearizable (or the check is inconclusive),
// with the path of porcupine's visualisation of them.
func CheckHistory(t testing.TB, target *Target, base time.Time, entries []Entry, name string) {
	t.Helper()
	dir := os.Getenv(EnvDir)
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "idem-linz")
	}
	m := target.Model()
	m.LostAnswers = true
	res, path, err := Check(m, base, entries, CheckTimeout, dir, name)
	switch {
	case err != nil:
		t.Errorf("%s: %s: porcupine says %s, and its visualisation could not be written: %v", name, target.Name, res, err)
	case res == porcupine.Illegal:
		why := Explain(m, base, entries)
		txt := strings.TrimSuffix(path, ".html") + ".txt"
		if err := os.WriteFile(txt, []byte(why), 0o644); err != nil {
			t.Logf("write %s: %v", txt, err)
		}
		t.Errorf("%s: the history on %s is not linearizable against the model of the store contract; visualisation: %s; explanation: %s\n%s",
			name, target.Name, path, txt, firstLines(why, 60))
	case res == porcupine.Unknown:
		t.Errorf("%s: the check of the history on %s did not end within %v (inconclusive, not a pass): make it smaller; visualisation: %s",
			name, target.Name, CheckTimeout, path)
	}
}

// KeyLife is how long (on the clients' fake clock) the clients of
// RunLinearizable share a set of keys before they move on to new ones.
const KeyLife = 500 * time.Millisecond

// RunID returns a short random id, so that runs sharing a table or a
// server use keys of their own.
func RunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func faultCounts(f *Faults) string {
	c := f.Counts()
	total := 0
	for _, n := range c {
		total += n
	}
	return fmt.Sprintf("%d of %d requests (%d lost answers)", total-c[storetest.NoFault], total, c[storetest.AnswerLost])
}

// firstLines returns the first n lines of s, and how many it left out.
func firstLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) <= n {
		return s
	}
	return strings.Join(lines[:n], "") + fmt.Sprintf("… (%d more lines)\n", len(lines)-n)
}
