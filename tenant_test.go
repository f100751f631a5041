package idem_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/idemgo/idem"
)

// TestTenant: a call whose context names a tenant has it in its log record
// (tenant) and its observation, Do's and Report's alike; a call without one
// has neither, and the handler's context carries it.
func TestTenant(t *testing.T) {
	var buf bytes.Buffer
	var obs observations
	f := newFixture(t, idem.WithLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))), idem.WithObserver(&obs))
	ctx := idem.ContextWithTenant(context.Background(), "tenant-a")
	var inHandler string
	if _, err := f.runner.Do(ctx, "evt:t1:notify", []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		inHandler = idem.TenantFromContext(ctx)
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	f.runner.Report(ctx, "", idem.Outcome{Verdict: idem.MissingKey}, nil)
	if _, err := f.runner.Do(context.Background(), "evt:t2:notify", []byte(`{}`), func(context.Context) ([]byte, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	recs := records(t, &buf)
	if len(recs) != 3 || len(obs.obs) != 3 {
		t.Fatalf("%d records and %d observations, want 3 each", len(recs), len(obs.obs))
	}
	for i, want := range []string{"tenant-a", "tenant-a", ""} {
		got, _ := recs[i]["tenant"].(string)
		if got != want || obs.obs[i].Tenant != want {
			t.Errorf("call %d: logged tenant %q, observed %q; want %q", i, got, obs.obs[i].Tenant, want)
		}
	}
	if _, ok := recs[2]["tenant"]; ok {
		t.Errorf("a call without a tenant logs one: %v", recs[2])
	}
	if inHandler != "tenant-a" {
		t.Errorf("the handler's context names tenant %q; want tenant-a", inHandler)
	}
	if got := idem.TenantFromContext(context.Background()); got != "" {
		t.Errorf("TenantFromContext of a plain context = %q", got)
	}
}
