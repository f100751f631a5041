package idemlambda

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// The scopes of a stored key, beyond the event's identity, the action and
// the caller: labels of the parts ScopedKey takes ("tenant=blue"), in the
// order the wrappers give them. Each is set by what the platform, not the
// event's sender, decides (docs/security.md).
const (
	// ScopeTenant: the invocation's tenant id, which Lambda gives a
	// function in tenant isolation mode (lambdacontext.LambdaContext's
	// TenantID). Every wrapper, when the invocation has one.
	ScopeTenant = "tenant"
	// ScopeMessageGroup: an SQS message's MessageGroupId, the tenant of a
	// fair queue. The SQS wrapper given WithMessageGroupTenant.
	ScopeMessageGroup = "message-group"
	// ScopeTopic: the TopicArn of an SNS notification. The SNS wrapper, and
	// SNSEnvelope.
	ScopeTopic = "topic"
	// ScopeAccount: an EventBridge event's account. EventBridgeEnvelope.
	ScopeAccount = "account"
)

// ScopedKey returns the stored key of an event whose key before its scopes
// is key (EventKey, SQSKey, HTTPKey, a Typed key function's), under scopes:
// parts "<label>=<value>" of the labels above, in their order, as the
// wrappers give them. With no scopes it is key itself, so that an event
// without scopes keeps the key it had before scopes existed; else
// core.DeriveKey("scoped", key, scopes...), whose error wraps
// core.ErrInvalidKey. Operators' tools use it to find a scoped event's
// record: idem inspect's --tenant flag does.
func ScopedKey(key string, scopes ...string) (string, error) {
	if len(scopes) == 0 {
		return key, nil
	}
	return core.DeriveKey(append([]string{"scoped", key}, scopes...)...)
}

// scope returns a scope part, or nothing for an empty value.
func scope(label, value string) []string {
	if value == "" {
		return nil
	}
	return []string{label + "=" + value}
}

// lambdaTenant is the tenant id of the invocation ctx belongs to ("" for
// none: a function without tenant isolation, or a context that is not an
// invocation's).
func lambdaTenant(ctx context.Context) string {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc != nil {
		return lc.TenantID
	}
	return ""
}

// withTenant returns ctx naming tenant for the log record and the span of
// the calls made with it; ctx itself for no tenant.
func withTenant(ctx context.Context, tenant string) context.Context {
	if tenant == "" {
		return ctx
	}
	return idem.ContextWithTenant(ctx, tenant)
}

// tenantScoped returns key scoped by the invocation's tenant, and ctx
// naming the tenant. A key that cannot be scoped is an error wrapping
// core.ErrInvalidKey.
func tenantScoped(ctx context.Context, key string) (string, context.Context, error) {
	t := lambdaTenant(ctx)
	scoped, err := ScopedKey(key, scope(ScopeTenant, t)...)
	if err != nil {
		return "", ctx, fmt.Errorf("%w (scoped by the tenant id)", err)
	}
	return scoped, withTenant(ctx, t), nil
}

// WithMessageGroupTenant makes the SQS wrapper take each message's
// MessageGroupId as its tenant: the tenant of an SQS fair queue (a standard
// queue whose senders set a group to name the tenant a message is for). The
// message's key is scoped by it (ScopeMessageGroup), so that two tenants'
// messages with the same event identity never share a record, and its log
// record and span name it as the tenant (idem.ContextWithTenant; not a
// metric dimension). A message without a MessageGroupId is not run: its key
// error wraps ErrMissingKey (verdict missing_key, reported for redelivery
// and the dead-letter queue). The group is set by the sender: it keeps
// tenants apart only if each tenant's senders can only send their own
// group. SQS wrapper only: the other wrappers refuse it.
func WithMessageGroupTenant() BatchOption {
	return batchOption(func(c *config) error {
		c.groupTenant = true
		return nil
	})
}

// recordScopes returns the scopes of an SQS (or SNS) message's key beyond
// its envelopes' (the invocation's tenant id, with WithMessageGroupTenant
// its message group, for the SNS wrapper its topic), and its tenant (the
// invocation's, else its message group).
func (w *sqsWrapper) recordScopes(ctx context.Context, msg events.SQSMessage) (scopes []string, tenant string, err error) {
	tenant = lambdaTenant(ctx)
	scopes = scope(ScopeTenant, tenant)
	if w.cfg.groupTenant {
		g := msg.Attributes["MessageGroupId"]
		if g == "" {
			return nil, tenant, fmt.Errorf("%w: no MessageGroupId, which names the message's tenant (WithMessageGroupTenant)", ErrMissingKey)
		}
		scopes = append(scopes, scope(ScopeMessageGroup, g)...)
		if tenant == "" {
			tenant = g
		}
	}
	if w.topicOf != nil {
		scopes = append(scopes, scope(ScopeTopic, w.topicOf(ctx, msg))...)
	}
	return scopes, tenant, nil
}
