package idemotel_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idemgo/idem"
	idemotel "github.com/idemgo/idem/otel"
)

// A call's tenant (idem.ContextWithTenant) is an attribute of its span, and
// of no metric: its cardinality is the user's.
func TestTenantOnSpansOnly(t *testing.T) {
	r, spans, reader := observedRunner(t)
	ok := func(context.Context) ([]byte, error) { return []byte(`1`), nil }
	ctx := context.Background()
	if _, err := r.Do(idem.ContextWithTenant(ctx, "tenant-a"), "evt:t1:a", []byte(`{}`), ok); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Do(ctx, "evt:t2:a", []byte(`{}`), ok); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range spans.Ended() {
		if s.Name() == idemotel.CallSpan {
			got = append(got, attr(s, idemotel.AttrTenant).AsString())
		}
	}
	if len(got) != 2 || got[0] != "tenant-a" || got[1] != "" {
		t.Errorf("call spans' tenants %q; want tenant-a, then none", got)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range sum.DataPoints {
					if _, has := dp.Attributes.Value(idemotel.AttrTenant); has {
						t.Errorf("metric %s has the tenant as a dimension", m.Name)
					}
				}
			}
		}
	}
}
