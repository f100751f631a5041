package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
)

// keyFlags select a key: given verbatim, or computed from an event file as
// the Lambda wrappers compute it, under the function's key configuration
// (configFlags).
type keyFlags struct {
	key       string
	sqsEvent  string
	message   messageIndex
	httpEvent string
	kind      string
	tenant    string
	config    configFlags
}

// messageIndex is --message: unset, or an index from 0.
type messageIndex struct {
	i   int
	set bool
}

func (m *messageIndex) String() string {
	if m == nil || !m.set {
		return ""
	}
	return strconv.Itoa(m.i)
}

func (m *messageIndex) Set(s string) error {
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 {
		return errors.New("want an index from 0")
	}
	m.i, m.set = i, true
	return nil
}

func (k *keyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.key, "key", "", "the stored `key`, verbatim, or as the logs' key field shows it (a key given verbatim is never printed; output shows its hash)")
	fs.StringVar(&k.sqsEvent, "sqs-event", "", "`file` with an SQS event (Records), a receive-message answer (Messages) or one message")
	fs.Var(&k.message, "message", "with --sqs-event: `index` (from 0) of the message in the file, when it has several")
	fs.StringVar(&k.httpEvent, "http-event", "", "`file` with an API Gateway, function URL or ALB request event")
	fs.StringVar(&k.kind, "kind", "", "with --http-event: the request's `kind`: rest (REST API), httpapi (HTTP API), url (function URL) or alb")
	fs.StringVar(&k.tenant, "tenant", "", "the Lambda tenant `id` the event was invoked for (tenant isolation mode): it scopes the key selected")
	k.config.register(fs)
}

// configFlags are the function's key configuration (idemlambda.KeyConfig):
// a file the function's code loads too (--key-config), or the same as
// flags.
type configFlags struct {
	file                   string
	sources, envelopes     repeated
	action, identityHeader string
	endpoint, webhook      string
	groupTenant            bool
}

func (f *configFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.file, "key-config", "", "the function's key configuration: a JSON `file` (idemlambda.ParseKeyConfig), the one its code builds the wrapper from; instead of the key flags below")
	fs.Var(&f.sources, "key-source", "where the wrapper takes the key from: body:PATH, attribute:NAME, dedup, message-id (SQS), header:NAME or body:PATH (HTTP); repeat, in order, for a composite key (`source`)")
	fs.StringVar(&f.action, "action", "", "with --sqs-event: the SQS wrapper's action `name`")
	fs.Var(&f.envelopes, "envelope", "with --sqs-event: an `envelope` the wrapper takes off (WithEnvelope): sns or eventbridge; repeat, outermost first")
	fs.BoolVar(&f.groupTenant, "group-tenant", false, "with --sqs-event: the SQS wrapper has WithMessageGroupTenant (the message's MessageGroupId scopes its key)")
	fs.StringVar(&f.identityHeader, "identity-header", "", "with --http-event: the wrapper's WithIdentityHeader `name`")
	fs.StringVar(&f.endpoint, "endpoint", "", "with --http-event: the wrapper's WithEndpoint `name`, which a key from a header, a body field or a webhook sender needs")
	fs.StringVar(&f.webhook, "webhook", "", "with --http-event: the webhook `sender` of the wrapper's WithWebhook (github, stripe or shopify): its delivery id is the key")
}

// repeated is a flag given several times, in order.
type repeated []string

func (r *repeated) String() string { return strings.Join(*r, ",") }

func (r *repeated) Set(s string) error {
	*r = append(*r, s)
	return nil
}

// set reports whether any key configuration was given.
func (f *configFlags) set() bool {
	return f.file != "" || f.flagsSet()
}

// flagsSet reports whether a key configuration flag was given.
func (f *configFlags) flagsSet() bool {
	return len(f.sources) > 0 || len(f.envelopes) > 0 || f.action != "" || f.identityHeader != "" || f.endpoint != "" || f.webhook != "" || f.groupTenant
}

// load returns the key configuration the flags give: the file of
// --key-config, or the key flags as one.
func (f *configFlags) load() (idemlambda.KeyConfig, error) {
	if f.file == "" {
		kc := idemlambda.KeyConfig{Action: f.action, Key: f.sources, Envelopes: f.envelopes, MessageGroupTenant: f.groupTenant,
			Endpoint: f.endpoint, Webhook: f.webhook, IdentityHeader: f.identityHeader}
		if err := kc.Check(); err != nil {
			return kc, usageErrorf("%v", err)
		}
		return kc, nil
	}
	if f.flagsSet() {
		return idemlambda.KeyConfig{}, usageErrorf("--key-config %s holds the key configuration: give it or the key flags (--key-source, --action, --envelope, --group-tenant, --endpoint, --webhook, --identity-header), not both", f.file)
	}
	data, err := os.ReadFile(f.file)
	if err != nil {
		return idemlambda.KeyConfig{}, usageErrorf("--key-config: %v", err)
	}
	kc, err := idemlambda.ParseKeyConfig(data)
	if err != nil {
		return kc, usageErrorf("--key-config %s: %v", f.file, err)
	}
	return kc, nil
}

// prefix gives the layout the key configuration's store key prefix, unless
// --key-prefix gives another.
func prefixFrom(kc idemlambda.KeyConfig, l *layoutFlags) error {
	switch {
	case kc.KeyPrefix == "":
	case l.keyPrefix == "":
		l.keyPrefix = kc.KeyPrefix
	case l.keyPrefix != kc.KeyPrefix:
		return usageErrorf("--key-prefix %q is not the key configuration's key_prefix %q", l.keyPrefix, kc.KeyPrefix)
	}
	return nil
}

// resolve returns the selected key and a description of where it came from
// that holds no user data. It sets the layout's key prefix from the key
// configuration (prefixFrom).
func (k *keyFlags) resolve(l *layoutFlags) (key, source string, err error) {
	n := 0
	for _, set := range []bool{k.key != "", k.sqsEvent != "", k.httpEvent != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return "", "", usageErrorf("select the key with exactly one of --key, --sqs-event or --http-event")
	}
	if k.key != "" {
		return k.verbatim()
	}
	kc, err := k.config.load()
	if err != nil {
		return "", "", err
	}
	if err := prefixFrom(kc, l); err != nil {
		return "", "", err
	}
	// The invocation's tenant id is not in the event: the wrapper reads it
	// from the invocation's context, as the key configuration does here.
	ctx := context.Background()
	if k.tenant != "" {
		ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{TenantID: k.tenant})
	}
	if k.sqsEvent != "" {
		key, source, err = k.sqsKey(ctx, kc)
	} else {
		key, source, err = k.httpKey(ctx, kc)
	}
	if err == nil && k.tenant != "" {
		source += ", tenant " + k.tenant
	}
	return key, source, err
}

// verbatim returns the key of --key: as given (a log record's key field is
// the stored key, scopes included), or scoped by --tenant.
func (k *keyFlags) verbatim() (string, string, error) {
	if k.config.set() {
		return "", "", usageErrorf("--key is the stored key itself: it takes no key configuration (--key-config, --key-source, ...)")
	}
	if err := core.ValidateKey(k.key); err != nil {
		return "", "", usageErrorf("--key: %v", err)
	}
	if k.tenant == "" {
		return k.key, "--key", nil
	}
	key, err := idemlambda.ScopedKey(k.key, idemlambda.ScopeTenant+"="+k.tenant)
	if err != nil {
		return "", "", usageErrorf("--tenant: %v", err)
	}
	return key, "--key, tenant " + k.tenant, nil
}

func (k *keyFlags) sqsKey(ctx context.Context, kc idemlambda.KeyConfig) (string, string, error) {
	if len(kc.Key) == 0 || kc.Action == "" {
		return "", "", usageErrorf("--sqs-event needs --key-source and --action, as given to the SQS wrapper (or --key-config)")
	}
	if _, err := kc.Source(); err != nil {
		return "", "", usageErrorf("%v", err)
	}
	msgs, err := readSQSMessages(k.sqsEvent)
	if err != nil {
		return "", "", err
	}
	i := k.message.i
	switch {
	case !k.message.set && len(msgs) == 1:
	case !k.message.set:
		return "", "", usageErrorf("%s has %d messages: choose one with --message 0..%d", k.sqsEvent, len(msgs), len(msgs)-1)
	case i >= len(msgs):
		return "", "", usageErrorf("--message %d: %s has %d message(s)", i, k.sqsEvent, len(msgs))
	}
	key, err := kc.MessageKey(ctx, msgs[i])
	if err != nil {
		return "", "", usageErrorf("message %d has no usable key (the wrapper stores no record for it): %v", i, err)
	}
	return key, fmt.Sprintf("SQS message %d (id %s), %s", i, msgs[i].MessageId, describe(kc)), nil
}

// describe names a key configuration's parts, for the source line: its
// envelopes, its key source (the wrappers' own names of them) and its
// action; an HTTP configuration's key sources when they are not the
// default header.
func describe(kc idemlambda.KeyConfig) string {
	var parts []string
	if len(kc.Envelopes) > 0 {
		parts = append(parts, "envelope "+strings.Join(kc.Envelopes, ", "))
	}
	if src, err := kc.Source(); kc.Action != "" && err == nil {
		parts = append(parts, src.String(), "action "+kc.Action)
	} else if len(kc.Key) > 0 {
		parts = append(parts, "key "+strings.Join(kc.Key, ", "))
	}
	if kc.MessageGroupTenant {
		parts = append(parts, "tenant: the message group")
	}
	if kc.Webhook != "" {
		parts = append(parts, "webhook "+kc.Webhook)
	}
	if kc.Endpoint != "" {
		parts = append(parts, "endpoint "+kc.Endpoint)
	}
	return strings.Join(parts, ", ")
}

// readSQSMessages reads the messages of file: a Lambda SQS event
// ({"Records": [...]}), the answer of sqs receive-message ({"Messages":
// [...]}, whose field names differ only in case and decode the same), or
// one message.
func readSQSMessages(file string) ([]events.SQSMessage, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, usageErrorf("--sqs-event: %v", err)
	}
	var doc struct {
		Records  []events.SQSMessage
		Messages []events.SQSMessage
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, usageErrorf("--sqs-event %s is not an SQS event or message: %v", file, err)
	}
	msgs := append(doc.Records, doc.Messages...)
	if len(msgs) == 0 {
		var m events.SQSMessage
		if err := json.Unmarshal(data, &m); err != nil || (m.MessageId == "" && m.Body == "") {
			return nil, usageErrorf("--sqs-event %s has no message (want Records, Messages, or a message with messageId and body)", file)
		}
		msgs = []events.SQSMessage{m}
	}
	return msgs, nil
}

func (k *keyFlags) httpKey(ctx context.Context, kc idemlambda.KeyConfig) (string, string, error) {
	data, err := os.ReadFile(k.httpEvent)
	if err != nil {
		return "", "", usageErrorf("--http-event: %v", err)
	}
	req, err := httpRequestOf(ctx, k.kind, data, kc)
	if err != nil {
		return "", "", err
	}
	if req.method == "" {
		// Every request of the kind has a method where the kind puts it;
		// an event of another kind does not.
		return "", "", usageErrorf("--http-event is not a %s request event: it has no HTTP method where a %s request has one", k.kind, k.kind)
	}
	switch {
	case errors.Is(req.keyErr, idemlambda.ErrUnidentifiedCaller):
		return "", "", usageErrorf("the request's caller cannot be identified (the wrapper answered 500 and stored nothing): %v", req.keyErr)
	case errors.Is(req.keyErr, idemlambda.ErrMissingKey):
		return "", "", usageErrorf("the request has no key where the wrapper takes it: the wrapper answered 400, or ran it unkeyed with WithOptionalKey: it has no record: %v", req.keyErr)
	case req.keyErr != nil:
		return "", "", usageErrorf("the request gives no key (the wrapper answered 400 and stored nothing), or the key configuration is not one a wrapper takes: %v", req.keyErr)
	}
	return req.key, fmt.Sprintf("%s request %s %s, caller %s%s", k.kind, req.method, req.path, identityLabels(req.identity), suffix(", ", describe(kc))), nil
}

// httpRequest is an API request's stored key (or the error that leaves it
// without one), and what names it.
type httpRequest struct {
	key          string
	keyErr       error
	identity     []string
	method, path string
}

// httpRequestOf decodes a request event of kind and computes its key as the
// wrapper built from kc does in an invocation whose context is ctx
// (idemlambda.RequestKey). The identity is the wrappers' own
// (idemlambda.RESTIdentity...); method and path fall back as the wrappers'
// do.
func httpRequestOf(ctx context.Context, kind string, data []byte, kc idemlambda.KeyConfig) (httpRequest, error) {
	switch kind {
	case "rest":
		return decodeRequest(ctx, kind, data, kc, func(ev events.APIGatewayProxyRequest) httpRequest {
			method := ev.HTTPMethod
			if method == "" {
				method = ev.RequestContext.HTTPMethod
			}
			identity, _ := idemlambda.RESTIdentity(ev)
			return httpRequest{identity: identity, method: method, path: ev.Path}
		})
	case "httpapi":
		return decodeRequest(ctx, kind, data, kc, func(ev events.APIGatewayV2HTTPRequest) httpRequest {
			identity, _ := idemlambda.HTTPAPIIdentity(ev)
			return httpRequest{identity: identity, method: ev.RequestContext.HTTP.Method, path: rawPath(ev.RawPath, ev.RequestContext.HTTP.Path)}
		})
	case "url":
		return decodeRequest(ctx, kind, data, kc, func(ev events.LambdaFunctionURLRequest) httpRequest {
			identity, _ := idemlambda.FunctionURLIdentity(data)
			return httpRequest{identity: identity, method: ev.RequestContext.HTTP.Method, path: rawPath(ev.RawPath, ev.RequestContext.HTTP.Path)}
		})
	case "alb":
		return decodeRequest(ctx, kind, data, kc, func(ev events.ALBTargetGroupRequest) httpRequest {
			return httpRequest{method: ev.HTTPMethod, path: ev.Path}
		})
	case "":
		return httpRequest{}, usageErrorf("--http-event needs --kind rest, httpapi, url or alb")
	}
	return httpRequest{}, usageErrorf("--kind %q: want rest, httpapi, url or alb", kind)
}

// decodeRequest decodes data as a request of type Req, names it with view,
// and computes its key.
func decodeRequest[Req idemlambda.HTTPRequest](ctx context.Context, kind string, data []byte, kc idemlambda.KeyConfig, view func(Req) httpRequest) (httpRequest, error) {
	var ev Req
	if err := strictJSON(data, &ev); err != nil {
		return httpRequest{}, usageErrorf("--http-event is not a %s request event: %v", kind, err)
	}
	r := view(ev)
	r.key, r.keyErr = idemlambda.RequestKey[Req](ctx, kc, data)
	return r, nil
}

func rawPath(raw, path string) string {
	if raw != "" {
		return raw
	}
	return path
}

// strictJSON decodes one JSON object.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// identityLabels names the parts of a caller identity without their
// values ("sub,iam"), or "anonymous".
func identityLabels(id []string) string {
	if len(id) == 0 {
		return "anonymous"
	}
	labels := make([]string, 0, len(id))
	for _, p := range id {
		label, _, _ := strings.Cut(p, "=")
		labels = append(labels, label)
	}
	sort.Strings(labels)
	return strings.Join(labels, ",")
}

// notFoundHint says what to check when a key selected by k has no record
// although one was expected: the flags that made the key, and the store's
// key prefix.
func (k *keyFlags) notFoundHint(l layoutFlags) string {
	prefix := "--key-prefix (the store's ddbstore.WithKeyPrefix; none was given)"
	if l.keyPrefix != "" {
		prefix = fmt.Sprintf("--key-prefix %q (the store's ddbstore.WithKeyPrefix)", l.keyPrefix)
	}
	switch {
	case k.sqsEvent != "":
		return fmt.Sprintf("check %s: it must be the key configuration the function passes to idemlambda.SQS "+
			"(in its code or its key configuration file; the key is a hash of both, so a record cannot show them), and %s", k.config.given(), prefix)
	case k.httpEvent != "":
		return fmt.Sprintf("check --kind %q (the caller identity the key is scoped by depends on it), %s, and %s", k.kind, k.config.given(), prefix)
	}
	return "check the key (as the function passes it to Runner.Do), or the key field of the log record it came from, and " + prefix
}

// given names the key configuration flags given, with their values.
func (f *configFlags) given() string {
	if f.file != "" {
		return fmt.Sprintf("--key-config %q", f.file)
	}
	var parts []string
	if f.action != "" {
		parts = append(parts, fmt.Sprintf("--action %q", f.action))
	}
	for _, s := range f.sources {
		parts = append(parts, fmt.Sprintf("--key-source %q", s))
	}
	for _, e := range f.envelopes {
		parts = append(parts, fmt.Sprintf("--envelope %q", e))
	}
	if f.identityHeader != "" {
		parts = append(parts, fmt.Sprintf("--identity-header %q", f.identityHeader))
	}
	if f.endpoint != "" {
		parts = append(parts, fmt.Sprintf("--endpoint %q", f.endpoint))
	}
	if f.webhook != "" {
		parts = append(parts, fmt.Sprintf("--webhook %q", f.webhook))
	}
	if f.groupTenant {
		parts = append(parts, "--group-tenant")
	}
	if len(parts) == 0 {
		return "the key configuration (none was given: the Idempotency-Key header)"
	}
	return strings.Join(parts, " and ")
}
