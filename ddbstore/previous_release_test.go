package ddbstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
)

// previousRelease is testdata/v0.1.0: the packages of idem v0.1.0, the
// previous release, as it released them (commit a620ee7: idem, core,
// ddbstore, blob, awsclassify and internal/fit, unchanged), in a module of
// their own, with cmd/previous, which runs v0.1.0's Runner.Do over a table.
const previousRelease = "testdata/v0.1.0"

// previousAnswer is what cmd/previous answers for one call.
type previousAnswer struct {
	Key     string `json:"key"`
	Verdict string `json:"verdict"`
	Err     string `json:"error"`
	Result  []byte `json:"result"`
	Omitted bool   `json:"omitted"`
	Ran     bool   `json:"ran"`
	Steps   []struct {
		Name   string `json:"name"`
		Ran    bool   `json:"ran"`
		Result []byte `json:"result"`
	} `json:"steps"`
}

// TestPreviousReleaseReadsThisOnesRecords: during a rolling deployment (or
// after a rollback), v0.1.0 calls meet the records this release writes:
// successes (raw, compressed, omitted, kept in a result item), a permanent failure, a retryable
// failure and a crashed holder whose steps are referenced from the record
// (which v0.1.0 cannot read), and a live lease. v0.1.0 never runs a
// completed key again, never answers bytes other than those recorded (a
// result, or a step it skips), and leaves every completed record as it
// was; where it cannot read a record it fails the call (a store error),
// which the event source retries.
func TestPreviousReleaseReadsThisOnesRecords(t *testing.T) {
	integration(t)
	bin := buildPrevious(t)
	f := newFixture(t)
	now := time.Now().Truncate(time.Second)
	runner, err := idem.New(f.store, idem.WithClock(func() time.Time { return now }), idem.WithRetention(time.Hour),
		idem.WithRetry(1, time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"order":1}`)
	compressible := bytes.Repeat([]byte(`{"sku":"SKU-000001","qty":1},`), 1000)
	noise := make([]byte, 500<<10)
	_, _ = rand.Read(noise)
	results := map[string][]byte{"done:small": []byte(`{"ok":1}`), "done:gzip": compressible, "done:omitted": noise, "done:apart": noise[:4096]}
	for key, result := range results {
		if out, err := runner.Do(context.Background(), key, payload, func(context.Context) ([]byte, error) { return result, nil }); err != nil {
			t.Fatalf("%s: %v, %v", key, out.Verdict, err)
		}
	}
	if _, err := runner.Do(context.Background(), "failed:permanent", payload, func(context.Context) ([]byte, error) {
		return nil, core.MarkPermanent(errors.New("card declined"))
	}); !errors.Is(err, core.ErrPermanentFailure) {
		t.Fatalf("failed:permanent: %v", err)
	}
	charge := func(ctx context.Context) error {
		_, err := idem.Step(ctx, "charge", func(context.Context) ([]byte, error) { return []byte(`"ch_1"`), nil })
		return err
	}
	if _, err := runner.Do(context.Background(), "failed:steps", payload, func(ctx context.Context) ([]byte, error) {
		if err := charge(ctx); err != nil {
			return nil, err
		}
		return nil, core.MarkTransient(errors.New("mail server busy"))
	}); !errors.Is(err, idem.ErrTransientFailure) {
		t.Fatalf("failed:steps: %v", err)
	}
	held := core.Reserve("held:live", emptyFPOf(t, payload), "tok-held", nil, now, now.Add(time.Hour), time.Hour)
	crashed := core.Reserve("crashed:steps", emptyFPOf(t, payload), "tok-crashed", nil, now, now.Add(time.Second), time.Hour)
	for _, rec := range []core.Record{held, crashed} {
		if _, _, err := f.store.Acquire(context.Background(), rec, now, core.Policy{MaxAttempts: 5}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.store.RecordStep(context.Background(), "crashed:steps", "tok-crashed", core.Step{Name: "charge", Result: []byte(`"ch_1"`)}, now); err != nil {
		t.Fatal(err)
	}
	before := storedRecords(t, f.store, now, "done:small", "done:gzip", "done:omitted", "done:apart", "failed:permanent")

	keys := []string{"done:small", "done:gzip", "done:omitted", "done:apart", "failed:permanent", "failed:steps", "held:live", "crashed:steps"}
	answers := runPrevious(t, bin, f.table, now.Add(2*time.Minute), keys, string(payload))
	for _, a := range answers {
		t.Logf("v0.1.0 on %s: %s, ran %v, %d result bytes, omitted %v, steps %+v, error %q", a.Key, a.Verdict, a.Ran, len(a.Result), a.Omitted, a.Steps, a.Err)
		completed := strings.HasPrefix(a.Key, "done:") || a.Key == "failed:permanent"
		if completed && a.Ran {
			t.Errorf("%s: v0.1.0 ran the handler of a completed key again", a.Key)
		}
		if want, ok := results[a.Key]; ok && a.Result != nil && !bytes.Equal(a.Result, want) {
			t.Errorf("%s: v0.1.0 answered %d bytes other than the %d recorded", a.Key, len(a.Result), len(want))
		}
		if a.Key == "done:apart" && (a.Verdict != "replayed" || !a.Omitted || a.Result != nil) {
			t.Errorf("done:apart: v0.1.0 answered %s, omitted %v, %d bytes; want a replay without the body it cannot read", a.Verdict, a.Omitted, len(a.Result))
		}
		if a.Key == "held:live" && a.Ran {
			t.Errorf("held:live: v0.1.0 ran the handler beside a live lease")
		}
		for _, st := range a.Steps {
			if !st.Ran && string(st.Result) != `"ch_1"` {
				t.Errorf("%s: v0.1.0 skipped step %s with %q, not the recorded %q", a.Key, st.Name, st.Result, `"ch_1"`)
			}
		}
	}
	after := storedRecords(t, f.store, now, "done:small", "done:gzip", "done:omitted", "done:apart", "failed:permanent")
	for key, rec := range before {
		if got := after[key]; !core.SameWrite(got, rec) || !bytes.Equal(got.Result, rec.Result) {
			t.Errorf("%s: stored %v after v0.1.0's call, was %v", key, got, rec)
		}
	}
	// Back on this release, once any lease v0.1.0 took has ended, the
	// records with steps resume after their step: it does not run again.
	later := now.Add(time.Hour)
	again, err := idem.New(f.store, idem.WithClock(func() time.Time { return later }), idem.WithRetention(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"failed:steps", "crashed:steps"} {
		charges := 0
		out, err := again.Do(context.Background(), key, payload, func(ctx context.Context) ([]byte, error) {
			_, err := idem.Step(ctx, "charge", func(context.Context) ([]byte, error) { charges++; return []byte(`"ch_2"`), nil })
			return []byte(`"sent"`), err
		})
		if err != nil || out.Verdict != idem.Executed || charges != 0 {
			t.Errorf("%s on this release after v0.1.0's call: %v, %v, the step ran %d times; want executed after the recorded step", key, out.Verdict, err, charges)
		}
	}
}

// emptyFPOf is the fingerprint of payload.
func emptyFPOf(t *testing.T, payload []byte) string {
	t.Helper()
	fp, err := core.Fingerprint(payload)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// storedRecords reads keys through this release's store.
func storedRecords(t *testing.T, s *ddbstore.Store, now time.Time, keys ...string) map[string]core.Record {
	t.Helper()
	recs := map[string]core.Record{}
	for _, k := range keys {
		rec, err := s.Get(context.Background(), k, now)
		if err != nil {
			t.Fatalf("Get(%s) = %v", k, err)
		}
		recs[k] = rec
	}
	return recs
}

// buildPrevious builds cmd/previous of testdata/v0.1.0 into the test's
// temporary directory, with the go command on PATH and the module cache the
// repository's own build filled (no download needed).
func buildPrevious(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "previous")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/previous")
	cmd.Dir = previousRelease
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building v0.1.0's cmd/previous: %v\n%s", err, out)
	}
	return bin
}

// runPrevious makes one v0.1.0 call of each key, with payload and the step
// charge, at now, over table.
func runPrevious(t *testing.T, bin, table string, now time.Time, keys []string, payload string) []previousAnswer {
	t.Helper()
	type call struct {
		Key     string   `json:"key"`
		Payload string   `json:"payload"`
		Steps   []string `json:"steps"`
	}
	in := struct {
		Table string `json:"table"`
		NowMs int64  `json:"now_ms"`
		Calls []call `json:"calls"`
	}{Table: table, NowMs: now.UnixMilli()}
	for _, k := range keys {
		in.Calls = append(in.Calls, call{Key: k, Payload: payload, Steps: []string{"charge"}})
	}
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Stdin = bytes.NewReader(body)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("v0.1.0's cmd/previous: %v\n%s", err, stderr.String())
	}
	var answers []previousAnswer
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var a previousAnswer
		if err := dec.Decode(&a); err != nil {
			t.Fatal(err)
		}
		answers = append(answers, a)
	}
	if len(answers) != len(keys) {
		t.Fatalf("v0.1.0 answered %d calls, want %d", len(answers), len(keys))
	}
	return answers
}
