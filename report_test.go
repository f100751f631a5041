package idem_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/logtest"
)

// observations collects a runner's observations; safe for concurrent use.
type observations struct {
	mu  sync.Mutex
	obs []idem.Observation
}

func (o *observations) Observe(_ context.Context, ob idem.Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.obs = append(o.obs, ob)
}

// records decodes the JSON lines of buf.
func records(t *testing.T, buf *bytes.Buffer) []map[string]any {
	return logtest.JSONLines(t, buf.String())
}

// TestReport: a verdict a caller reached without Do is logged once, at its
// level, and observed once, exactly as a call of Do: its annotation names
// the event, a missing key has no key hash, and it costs no store call.
func TestReport(t *testing.T) {
	var buf bytes.Buffer
	var obs observations
	f := newFixture(t, idem.WithLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))), idem.WithObserver(&obs))
	ctx := idem.WithAnnotation(context.Background(), func(out idem.Outcome, err error) idem.Annotation {
		return idem.Annotation{Attrs: []slog.Attr{slog.String("message_id", "m-1"), slog.String("seen", out.Verdict.String())}}
	})
	f.runner.Report(ctx, "", idem.Outcome{Verdict: idem.MissingKey}, errors.New("no event_id"))
	f.runner.Report(ctx, "evt:r1:notify", idem.Outcome{}, errors.New("not started: no time left"))        // VerdictOf: store_failed
	f.runner.Report(ctx, "evt:r2:notify", idem.Outcome{Verdict: idem.Panicked}, errors.New("panic: bug")) // ERROR
	recs := records(t, &buf)
	if len(recs) != 3 || len(obs.obs) != 3 {
		t.Fatalf("%d records and %d observations, want 3 each: %s", len(recs), len(obs.obs), buf.String())
	}
	for i, want := range []struct {
		verdict, level string
		keyHash        string
	}{{"missing_key", "WARN", ""}, {"store_failed", "WARN", idem.HashKey("evt:r1:notify")}, {"panicked", "ERROR", idem.HashKey("evt:r2:notify")}} {
		r, o := recs[i], obs.obs[i]
		if r["verdict"] != want.verdict || r["level"] != want.level || r["message_id"] != "m-1" || r["seen"] != want.verdict || r["error"] == nil {
			t.Errorf("record %d = %v, want verdict %s at %s with the annotation and the error", i, r, want.verdict, want.level)
		}
		if kh, _ := r["key_hash"].(string); kh != want.keyHash || o.KeyHash != want.keyHash {
			t.Errorf("record %d: key_hash %q, observed %q, want %q", i, kh, o.KeyHash, want.keyHash)
		}
		if o.Verdict.String() != want.verdict || o.StoreCalls != 0 || o.Duration != 0 || o.Err == nil {
			t.Errorf("observation %d = %+v, want %s with no store call", i, o, want.verdict)
		}
	}
}

// TestAnnotation: Do's record carries its annotation's attributes and, when
// the annotation says so, the verdict the caller reached instead (not what
// Do returns); a call the handler makes with its own context is not
// annotated.
func TestAnnotation(t *testing.T) {
	var buf bytes.Buffer
	var obs observations
	f := newFixture(t, idem.WithLogger(slog.New(slog.NewJSONHandler(&buf, nil))), idem.WithObserver(&obs))
	undecodable := errors.New("stored result does not decode")
	ctx := idem.WithAnnotation(f.ctx(t, time.Minute), func(out idem.Outcome, err error) idem.Annotation {
		a := idem.Annotation{Attrs: []slog.Attr{slog.String("wrapper", "outer")}}
		if out.Verdict == idem.Replayed {
			a.Verdict, a.Err = idem.ReplayCorrupt, undecodable
		}
		return a
	})
	fn := func(ctx context.Context) ([]byte, error) {
		// A call of the handler's own, with the context it was given.
		_, _ = f.runner.Do(ctx, "evt:inner:a", []byte(`{}`), func(context.Context) ([]byte, error) { return nil, core.MarkPermanent(errors.New("declined")) })
		return []byte(`1`), nil
	}
	if out, err := f.runner.Do(ctx, "evt:outer:a", []byte(`{}`), fn); err != nil || out.Verdict != idem.Executed {
		t.Fatalf("first = %v, %v", out.Verdict, err)
	}
	out, err := f.runner.Do(ctx, "evt:outer:a", []byte(`{}`), fn)
	if err != nil || out.Verdict != idem.Replayed {
		t.Fatalf("replay = %v, %v; want Replayed, as the runner decided", out.Verdict, err)
	}
	recs := records(t, &buf)
	var got []string
	for _, r := range recs {
		got = append(got, r["verdict"].(string)+"/"+func() string { w, _ := r["wrapper"].(string); return w }())
	}
	if want := []string{"failed_permanently/", "executed/outer", "replay_corrupt/outer"}; !slices.Equal(got, want) {
		t.Errorf("records (verdict/wrapper) = %v, want %v", got, want)
	}
	if last := recs[len(recs)-1]; last["level"] != "ERROR" || last["error"] != undecodable.Error() {
		t.Errorf("the replaced verdict's record = %v, want ERROR with the caller's error", last)
	}
	if o := obs.obs[len(obs.obs)-1]; o.Verdict != idem.ReplayCorrupt || !errors.Is(o.Err, undecodable) || o.StoreCalls != 1 {
		t.Errorf("last observation = %+v, want replay_corrupt after one store call", o)
	}
}

// TestVerdictLevels: every verdict other than a success is at least a
// warning, so that the default logger records it.
func TestVerdictLevels(t *testing.T) {
	for _, v := range idem.Verdicts() {
		success := v == idem.Executed || v == idem.Replayed || v == idem.Unkeyed
		if got := v.Level(); success != (got < idem.DefaultLogLevel) {
			t.Errorf("%s: level %v, want below %v only for a success", v, got, idem.DefaultLogLevel)
		}
	}
}

// TestLogsNameDerivedKeys: a log record names a derived key (core.DeriveKey,
// as every wrapper's key is: a hash that holds no user data) in its key
// field beside key_hash, so that the record is one read away; a key given
// verbatim appears only as its hash, also in the record of a retry.
func TestLogsNameDerivedKeys(t *testing.T) {
	var buf bytes.Buffer
	f := newFixture(t, idem.WithLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		idem.WithRetry(2, time.Millisecond, time.Millisecond))
	derived, err := core.DeriveKey("evt", "customer-42-order", "ship")
	if err != nil {
		t.Fatal(err)
	}
	const verbatim = "evt:customer-42-order:ship"
	fail := func(context.Context) ([]byte, error) { return nil, core.MarkTransient(errors.New("busy")) }
	for _, key := range []string{derived, verbatim} {
		_, _ = f.runner.Do(f.ctx(t, time.Minute), key, []byte(`{}`), fail)
	}
	recs := records(t, &buf)
	if len(recs) != 4 { // per key: the retry's record, the call's
		t.Fatalf("%d records, want 4: %s", len(recs), buf.String())
	}
	for i, r := range recs {
		want, wantKey := idem.HashKey(derived), derived
		if i >= 2 {
			want, wantKey = idem.HashKey(verbatim), ""
		}
		if r["key_hash"] != want || (wantKey == "" && r["key"] != nil) || (wantKey != "" && r["key"] != wantKey) {
			t.Errorf("record %d = %v, want key_hash %s and key %q", i, r, want, wantKey)
		}
	}
	if bytes.Contains(buf.Bytes(), []byte(verbatim)) {
		t.Errorf("the logs hold the verbatim key: %s", buf.String())
	}
}
