package idem

import "context"

type tenantKey struct{}

// ContextWithTenant returns a copy of ctx that names the tenant of the calls
// made with it (Do, Report): the runner logs it as the attribute "tenant"
// and puts it in the call's Observation (Tenant), from which a Tracer may
// make a span attribute (the otel module's idem.tenant). It is not a metric
// dimension of the observers idem provides: how many tenants there are is
// the user's, and every one would be a time series. The Lambda wrappers set
// it from the invocation's tenant id (tenant isolation mode) or, with
// idemlambda.WithMessageGroupTenant, from a message's group; a wrapper
// outside Lambda may set it from its own. An empty tenant names none. It
// does not scope keys: the wrappers do that (docs/security.md).
func ContextWithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// TenantFromContext returns the tenant ContextWithTenant put in ctx ("" for
// none).
func TenantFromContext(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}
