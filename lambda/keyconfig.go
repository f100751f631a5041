package idemlambda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/httprule"
	"github.com/idemgo/idem/webhook"
)

// KeyConfig is a wrapper's key configuration as data: what makes the
// stored key of a message or a request, in a form that a function's code
// and the operator's tools both read, so that the two cannot drift. The
// function builds its wrapper from it (Source and BatchOptions for SQS and
// SNS, HTTPOptions for the HTTP wrappers); the idem command reads the same
// JSON file (--key-config) and computes a message's key with MessageKey, a
// request's with RequestKey, exactly as the wrapper does. The scopes a key
// carries beyond the event's identity are in it too: the action, the
// endpoint, the caller identity's header, a fair queue's message group,
// the envelopes' topic and account; the invocation's tenant id, which the
// event does not hold, comes from the context MessageKey and RequestKey
// are given.
//
//	{"action": "ship-order", "key": ["attribute:tenant", "body:order_id"], "envelopes": ["sns"]}
//	{"endpoint": "github-hooks", "webhook": "github"}
//	{"endpoint": "payments", "key": ["body:id"], "fingerprint_ignore": ["pending_webhooks"]}
//
// A KeyConfig is a plain value, safe to copy and to use concurrently. Its
// zero value is the HTTP wrappers' default (the Idempotency-Key header);
// the batch wrappers need Action and Key.
type KeyConfig struct {
	// Action is the action of the SQS and SNS wrappers (their action
	// argument; EventKey hashes it with the event's identity).
	Action string `json:"action,omitempty"`
	// Key lists where the key's identity is found, in order; more than one
	// make a composite key (KeyFromAll for SQS and SNS; WithKeyHeader and
	// WithKeyBodyField given in that order for HTTP). Each is one of:
	// "body:PATH" (KeyFromBodyField; HTTP: WithKeyBodyField), a dotted path
	// into the JSON body; "attribute:NAME" (KeyFromAttribute); "dedup"
	// (KeyFromDeduplicationID); "message-id" (KeyFromMessageID);
	// "header:NAME" (HTTP: WithKeyHeader). Empty, for HTTP, is the
	// Idempotency-Key header.
	Key []string `json:"key,omitempty"`
	// Envelopes are taken off every message body before the key is read,
	// outermost first (WithEnvelope): "sns" (SNSEnvelope), "eventbridge"
	// (EventBridgeEnvelope). SQS and SNS only.
	Envelopes []string `json:"envelopes,omitempty"`
	// FingerprintSelect and FingerprintIgnore choose the payload's fields
	// the fingerprint covers (WithFingerprintSelection with
	// core.SelectFields or core.IgnoreFields); at most one of them.
	FingerprintSelect []string `json:"fingerprint_select,omitempty"`
	FingerprintIgnore []string `json:"fingerprint_ignore,omitempty"`
	// MessageGroupTenant scopes each message's key by its MessageGroupId,
	// a fair queue's tenant (WithMessageGroupTenant). SQS only.
	MessageGroupTenant bool `json:"message_group_tenant,omitempty"`
	// Endpoint names the endpoint whose keys a sender's delivery id makes
	// (WithEndpoint): an HTTP wrapper keyed by a header or a body field, or
	// by a webhook sender, needs it. HTTP only.
	Endpoint string `json:"endpoint,omitempty"`
	// Webhook names the sender whose duplicate-detection id is the key and
	// whose fingerprint selection applies (WithWebhook): "github"
	// (webhook.GitHub), "stripe" (webhook.Stripe) or "shopify"
	// (webhook.Shopify); with it, Key is empty. HTTP only.
	Webhook string `json:"webhook,omitempty"`
	// IdentityHeader adds a trusted header to the caller identity that
	// scopes the keys (WithIdentityHeader). HTTP only.
	IdentityHeader string `json:"identity_header,omitempty"`
	// KeyPrefix is the store's key prefix, part of every stored key: give
	// it to ddbstore.WithKeyPrefix (the idem command's --key-prefix).
	KeyPrefix string `json:"key_prefix,omitempty"`
}

// ParseKeyConfig reads a KeyConfig from one JSON object. A field it does
// not know is an error (a misspelt field is never silently ignored), and
// so is any value Check refuses.
func ParseKeyConfig(data []byte) (KeyConfig, error) {
	var k KeyConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&k); err != nil {
		return KeyConfig{}, fmt.Errorf("idemlambda: key configuration: %w", err)
	}
	if dec.More() {
		return KeyConfig{}, errors.New("idemlambda: key configuration: more than one JSON value")
	}
	return k, k.Check()
}

// Check reports what in k no wrapper accepts: an unknown key source or
// envelope, a bad path, both fingerprint fields, an action or an identity
// header that is not one. Whether k suits a batch or an HTTP wrapper is
// checked by Source, BatchOptions and HTTPOptions.
func (k KeyConfig) Check() error {
	for _, s := range k.Key {
		if _, err := parseKeySpec(s); err != nil {
			return err
		}
	}
	if _, err := k.envelopes(); err != nil {
		return err
	}
	if _, err := k.selection(); err != nil {
		return err
	}
	if k.Action != "" {
		if _, err := EventKey("probe", k.Action); err != nil {
			return fmt.Errorf("idemlambda: key configuration: action %q: %w", k.Action, err)
		}
	}
	if k.IdentityHeader != "" {
		if err := WithIdentityHeader(k.IdentityHeader).applyHTTP(&config{}); err != nil {
			return err
		}
	}
	if _, err := k.sender(); err != nil {
		return err
	}
	return nil
}

// senders are the webhook senders a KeyConfig names, by their names.
var senders = map[string]func(secrets ...string) webhook.Sender{
	"github": webhook.GitHub, "stripe": webhook.Stripe, "shopify": webhook.Shopify,
}

// sender returns the constructor of k's webhook sender (nil for none).
func (k KeyConfig) sender() (func(secrets ...string) webhook.Sender, error) {
	if k.Webhook == "" {
		return nil, nil
	}
	s, ok := senders[k.Webhook]
	switch {
	case !ok:
		return nil, fmt.Errorf("idemlambda: key configuration: webhook %q: want github, stripe or shopify", k.Webhook)
	case len(k.Key) > 0:
		return nil, fmt.Errorf("idemlambda: key configuration: the key of a %s webhook is its delivery id: give webhook or key, not both", k.Webhook)
	}
	return s, nil
}

// keySpec is one parsed entry of KeyConfig.Key.
type keySpec struct{ kind, arg string }

func parseKeySpec(s string) (keySpec, error) {
	kind, arg, hasArg := strings.Cut(s, ":")
	switch {
	case hasArg && arg != "" && (kind == "body" || kind == "attribute" || kind == "header"):
	case !hasArg && (s == "dedup" || s == "message-id"):
	default:
		return keySpec{}, fmt.Errorf("idemlambda: key configuration: key source %q: want body:PATH, attribute:NAME, header:NAME, dedup or message-id", s)
	}
	return keySpec{kind: kind, arg: arg}, nil
}

// Source returns the SQS and SNS wrappers' key source: Key's sources, made
// one with KeyFromAll when there are several.
func (k KeyConfig) Source() (KeySource, error) {
	if len(k.Key) == 0 {
		return KeySource{}, errors.New("idemlambda: key configuration: no key source (key): an SQS or SNS wrapper needs one")
	}
	sources := make([]KeySource, 0, len(k.Key))
	for _, s := range k.Key {
		spec, err := parseKeySpec(s)
		if err != nil {
			return KeySource{}, err
		}
		switch spec.kind {
		case "body":
			sources = append(sources, KeyFromBodyField(spec.arg))
		case "attribute":
			sources = append(sources, KeyFromAttribute(spec.arg))
		case "dedup":
			sources = append(sources, KeyFromDeduplicationID())
		case "message-id":
			sources = append(sources, KeyFromMessageID())
		default:
			return KeySource{}, fmt.Errorf("idemlambda: key configuration: key source %q is an HTTP wrapper's, not a message's", s)
		}
	}
	if len(sources) == 1 {
		return sources[0], nil
	}
	return KeyFromAll(sources...), nil
}

// BatchOptions returns the SQS and SNS wrappers' options of k:
// WithEnvelope, WithMessageGroupTenant and WithFingerprintSelection, as k
// sets them.
func (k KeyConfig) BatchOptions() ([]BatchOption, error) {
	if k.IdentityHeader != "" || k.Endpoint != "" || k.Webhook != "" {
		return nil, errors.New("idemlambda: key configuration: identity_header, endpoint and webhook are an HTTP wrapper's; a message has none")
	}
	envs, err := k.envelopes()
	if err != nil {
		return nil, err
	}
	var opts []BatchOption
	if len(envs) > 0 {
		opts = append(opts, WithEnvelope(envs...))
	}
	if k.MessageGroupTenant {
		opts = append(opts, WithMessageGroupTenant())
	}
	if sel, err := k.selection(); err != nil {
		return nil, err
	} else if !sel.IsZero() {
		opts = append(opts, WithFingerprintSelection(sel))
	}
	return opts, nil
}

// HTTPOptions returns the HTTP wrappers' options of k: WithKeyHeader and
// WithKeyBodyField for its key sources, or WithWebhook with the sender it
// names and secrets (the webhook's secrets, several during a rotation),
// WithEndpoint, WithIdentityHeader and WithFingerprintSelection.
func (k KeyConfig) HTTPOptions(secrets ...string) ([]HTTPOption, error) {
	opts, err := k.keyOptions()
	if err != nil {
		return nil, err
	}
	if s, _ := k.sender(); s != nil {
		sender := s(secrets...)
		if err := sender.Err(); err != nil {
			return nil, fmt.Errorf("idemlambda: key configuration: %w", err)
		}
		opts = append(opts, WithWebhook(sender))
	}
	if sel, err := k.selection(); err != nil {
		return nil, err
	} else if !sel.IsZero() {
		opts = append(opts, WithFingerprintSelection(sel))
	}
	return opts, nil
}

// keyOptions returns the HTTP options of k that make a request's key: its
// key sources, its endpoint and its identity header (a webhook sender's
// key is the sender's: keyParts adds it).
func (k KeyConfig) keyOptions() ([]HTTPOption, error) {
	if k.Action != "" || len(k.Envelopes) > 0 || k.MessageGroupTenant {
		return nil, errors.New("idemlambda: key configuration: action, envelopes and message_group_tenant are the SQS and SNS wrappers'; an HTTP wrapper takes none")
	}
	if _, err := k.sender(); err != nil {
		return nil, err
	}
	var opts []HTTPOption
	for _, s := range k.Key {
		spec, err := parseKeySpec(s)
		if err != nil {
			return nil, err
		}
		switch spec.kind {
		case "header":
			opts = append(opts, WithKeyHeader(spec.arg))
		case "body":
			opts = append(opts, WithKeyBodyField(spec.arg))
		default:
			return nil, fmt.Errorf("idemlambda: key configuration: key source %q is a message's, not an HTTP request's", s)
		}
	}
	if k.Endpoint != "" {
		opts = append(opts, WithEndpoint(k.Endpoint))
	}
	if k.IdentityHeader != "" {
		opts = append(opts, WithIdentityHeader(k.IdentityHeader))
	}
	return opts, nil
}

// requestConfig is the configuration of an HTTP wrapper built from k, as
// far as it makes keys: the key parts as the constructor settles them
// (httprule.Keying: a webhook sender's id, the endpoint checked).
func (k KeyConfig) requestConfig() (config, error) {
	opts, err := k.keyOptions()
	if err != nil {
		return config{}, err
	}
	cfg, err := configure(opts, HTTPOption.applyHTTP)
	if err != nil {
		return config{}, err
	}
	var sender *webhook.Sender
	if s, _ := k.sender(); s != nil {
		snd := s() // its key and selection; no secret: nothing is verified
		sender = &snd
	}
	var retention time.Duration // no runner: nothing to check the sender's window against
	if sender != nil {
		retention = sender.Window()
	}
	if cfg.keyParts, err = httprule.Keying(sender, cfg.keyParts, cfg.endpoint, retention); err != nil {
		return config{}, fmt.Errorf("idemlambda: key configuration: %w", err)
	}
	return cfg, nil
}

// MessageKey returns the stored key of an SQS message as the SQS wrapper
// built from k computes it in an invocation whose context is ctx: the
// envelopes taken off, EventKey of the identity that the key source finds
// and the action, scoped (ScopedKey) by the invocation's tenant id (ctx's
// lambdacontext, if any), the message group (MessageGroupTenant) and the
// envelopes' topic and account. The error is the message's key error
// (wrapping ErrMissingKey, and ErrNotEnveloped for a body outside its
// envelope), or k's own. The store's key prefix (KeyPrefix) is not part of
// it: the store adds it.
func (k KeyConfig) MessageKey(ctx context.Context, msg events.SQSMessage) (string, error) {
	w, err := k.sqsWrapper()
	if err != nil {
		return "", err
	}
	rec := w.prepare(ctx, msg)
	return rec.key, rec.keyErr
}

// MessageFingerprint returns the payload fingerprint that the SQS or SNS
// wrapper built from k stores beside the key of msg: its body once the
// envelopes are off (an EventBridge event's detail with its type), under
// k's fingerprint selection. A record whose fingerprint differs holds
// another payload under the same key: the wrapper answers the message
// key_reused. A runner's own selection (idem.WithFingerprintSelection) is
// not part of a key configuration: a function that sets one must put it in
// the configuration instead for the two to agree. The error is that of a
// payload the wrapper refuses (invalid_payload), or k's own.
func (k KeyConfig) MessageFingerprint(msg events.SQSMessage) (string, error) {
	w, err := k.sqsWrapper()
	if err != nil {
		return "", err
	}
	return w.payloadFingerprint()(w.prepare(context.Background(), msg).payload)
}

// sqsWrapper is the SQS wrapper of k, without a runner or a handler: what
// computes a message's key and payload.
func (k KeyConfig) sqsWrapper() (*sqsWrapper, error) {
	src, err := k.Source()
	if err != nil {
		return nil, err
	}
	opts, err := k.BatchOptions()
	if err != nil {
		return nil, err
	}
	cfg, err := configure(opts, BatchOption.applyBatch)
	if err != nil {
		return nil, err
	}
	if _, err := EventKey("probe", k.Action); err != nil {
		return nil, fmt.Errorf("idemlambda: key configuration: action %q: %w", k.Action, err)
	}
	return &sqsWrapper{action: k.Action, source: src, cfg: cfg}, nil
}

// envelopes returns the Envelopes k names.
func (k KeyConfig) envelopes() ([]Envelope, error) {
	envs := make([]Envelope, 0, len(k.Envelopes))
	for _, name := range k.Envelopes {
		switch name {
		case "sns":
			envs = append(envs, SNSEnvelope())
		case "eventbridge":
			envs = append(envs, EventBridgeEnvelope())
		default:
			return nil, fmt.Errorf("idemlambda: key configuration: envelope %q: want sns or eventbridge", name)
		}
	}
	return envs, nil
}

// selection returns the fingerprint selection k names (the zero Selection
// for none).
func (k KeyConfig) selection() (core.Selection, error) {
	var sel core.Selection
	switch {
	case len(k.FingerprintSelect) > 0 && len(k.FingerprintIgnore) > 0:
		return sel, errors.New("idemlambda: key configuration: fingerprint_select and fingerprint_ignore together: give one")
	case len(k.FingerprintSelect) > 0:
		sel = core.SelectFields(k.FingerprintSelect...)
	default:
		sel = core.IgnoreFields(k.FingerprintIgnore...)
	}
	if err := sel.Err(); err != nil {
		return sel, fmt.Errorf("idemlambda: key configuration: %w", err)
	}
	return sel, nil
}
