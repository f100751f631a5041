package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
)

// keyFlags select a key: given verbatim, or computed from an event file as
// the Lambda wrappers compute it.
type keyFlags struct {
	key                         string
	sqsEvent, keySource, action string
	message                     messageIndex
	groupTenant                 bool
	httpEvent, kind             string
	tenant                      string
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
	fs.StringVar(&k.key, "key", "", "the stored `key`, verbatim (it is never printed; output shows its hash)")
	fs.StringVar(&k.sqsEvent, "sqs-event", "", "`file` with an SQS event (Records), a receive-message answer (Messages) or one message")
	fs.StringVar(&k.keySource, "key-source", "", "with --sqs-event: the `source` the SQS wrapper takes the event id from: body:FIELD, attribute:NAME, dedup or message-id")
	fs.StringVar(&k.action, "action", "", "with --sqs-event: the wrapper's action `name`")
	fs.Var(&k.message, "message", "with --sqs-event: `index` (from 0) of the message in the file, when it has several")
	fs.StringVar(&k.httpEvent, "http-event", "", "`file` with an API Gateway or function URL request event")
	fs.StringVar(&k.kind, "kind", "", "with --http-event: the request's `kind`: rest (REST API), httpapi (HTTP API) or url (function URL)")
	fs.BoolVar(&k.groupTenant, "group-tenant", false, "with --sqs-event: the SQS wrapper has WithMessageGroupTenant (the message's MessageGroupId scopes its key)")
	fs.StringVar(&k.tenant, "tenant", "", "the Lambda tenant `id` the event was invoked for (tenant isolation mode): it scopes the key selected")
}

// resolve returns the selected key and a description of where it came from
// that holds no user data.
func (k *keyFlags) resolve() (key, source string, err error) {
	n := 0
	for _, set := range []bool{k.key != "", k.sqsEvent != "", k.httpEvent != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return "", "", usageErrorf("select the key with exactly one of --key, --sqs-event or --http-event")
	}
	switch {
	case k.groupTenant && k.sqsEvent == "":
		return "", "", usageErrorf("--group-tenant goes with --sqs-event")
	case k.key != "":
		if err := core.ValidateKey(k.key); err != nil {
			return "", "", usageErrorf("--key: %v", err)
		}
		key, source = k.key, "--key"
	case k.sqsEvent != "":
		key, source, err = k.sqsKey()
	default:
		key, source, err = k.httpKey()
	}
	if err != nil || k.tenant == "" {
		return key, source, err
	}
	if key, err = idemlambda.ScopedKey(key, idemlambda.ScopeTenant+"="+k.tenant); err != nil {
		return "", "", usageErrorf("--tenant: %v", err)
	}
	return key, source + ", tenant " + k.tenant, nil
}

// keySourceOf parses --key-source.
func keySourceOf(s string) (idemlambda.KeySource, error) {
	name, arg, _ := strings.Cut(s, ":")
	switch {
	case name == "body" && arg != "":
		return idemlambda.KeyFromBodyField(arg), nil
	case name == "attribute" && arg != "":
		return idemlambda.KeyFromAttribute(arg), nil
	case s == "dedup":
		return idemlambda.KeyFromDeduplicationID(), nil
	case s == "message-id":
		return idemlambda.KeyFromMessageID(), nil
	}
	return idemlambda.KeySource{}, usageErrorf("--key-source %q: want body:FIELD, attribute:NAME, dedup or message-id", s)
}

func (k *keyFlags) sqsKey() (string, string, error) {
	if k.keySource == "" || k.action == "" {
		return "", "", usageErrorf("--sqs-event needs --key-source and --action, as given to the SQS wrapper")
	}
	src, err := keySourceOf(k.keySource)
	if err != nil {
		return "", "", err
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
	key, err := idemlambda.SQSKey(src, k.action, msgs[i])
	if err == nil && k.groupTenant {
		g := msgs[i].Attributes["MessageGroupId"]
		if g == "" {
			err = errors.New("no MessageGroupId, which --group-tenant takes its tenant from")
		} else {
			key, err = idemlambda.ScopedKey(key, idemlambda.ScopeMessageGroup+"="+g)
		}
	}
	if err != nil {
		return "", "", usageErrorf("message %d has no usable key (the wrapper stores no record for it): %v", i, err)
	}
	return key, fmt.Sprintf("SQS message %d (id %s), %s, action %s", i, msgs[i].MessageId, src, k.action), nil
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

// httpRequest is what the key of an API request is made of.
type httpRequest struct {
	headers      map[string]string
	multi        map[string][]string
	identity     []string
	method, path string
}

func (k *keyFlags) httpKey() (string, string, error) {
	data, err := os.ReadFile(k.httpEvent)
	if err != nil {
		return "", "", usageErrorf("--http-event: %v", err)
	}
	req, err := httpRequestOf(k.kind, data)
	if err != nil {
		return "", "", err
	}
	if req.method == "" {
		// Every request of the kind has a method where the kind puts it;
		// an event of another kind does not.
		return "", "", usageErrorf("--http-event is not a %s request event: it has no HTTP method where a %s request has one", k.kind, k.kind)
	}
	value, ok, err := idemlambda.IdempotencyKeyHeader(req.headers, req.multi)
	switch {
	case err != nil:
		return "", "", usageErrorf("the request's %s header is invalid (the wrapper answered 400 and stored nothing): %v", idemlambda.HeaderIdempotencyKey, err)
	case !ok:
		return "", "", usageErrorf("the request has no %s header (the wrapper answered 400, or ran it unkeyed with WithOptionalKey): it has no record", idemlambda.HeaderIdempotencyKey)
	}
	key, err := httpKey(value, req.identity)
	if err != nil {
		return "", "", usageErrorf("the request gives no key: %v", err)
	}
	return key, fmt.Sprintf("%s request %s %s, caller %s", k.kind, req.method, req.path, identityLabels(req.identity)), nil
}

// httpKey is this command's one call of idemlambda.HTTPKey: the header value
// scoped by the caller (method and path are part of the request's
// fingerprint, not of its key).
func httpKey(headerValue string, identity []string) (string, error) {
	return idemlambda.HTTPKey(headerValue, identity)
}

// httpRequestOf decodes a request event of kind. The identity is the
// wrappers' own (idemlambda.RESTIdentity...); method and path fall back as
// the wrappers' do.
func httpRequestOf(kind string, data []byte) (httpRequest, error) {
	bad := func(err error) (httpRequest, error) {
		return httpRequest{}, usageErrorf("--http-event is not a %s request event: %v", kind, err)
	}
	switch kind {
	case "rest":
		var r events.APIGatewayProxyRequest
		if err := strictJSON(data, &r); err != nil {
			return bad(err)
		}
		method := r.HTTPMethod
		if method == "" {
			method = r.RequestContext.HTTPMethod
		}
		identity, err := idemlambda.RESTIdentity(r)
		return httpRequest{headers: r.Headers, multi: r.MultiValueHeaders, identity: identity, method: method, path: r.Path}, unidentified(err)
	case "httpapi":
		var r events.APIGatewayV2HTTPRequest
		if err := strictJSON(data, &r); err != nil {
			return bad(err)
		}
		identity, err := idemlambda.HTTPAPIIdentity(r)
		return httpRequest{headers: r.Headers, identity: identity, method: r.RequestContext.HTTP.Method, path: rawPath(r.RawPath, r.RequestContext.HTTP.Path)}, unidentified(err)
	case "url":
		var r events.LambdaFunctionURLRequest
		if err := strictJSON(data, &r); err != nil {
			return bad(err)
		}
		identity, err := idemlambda.FunctionURLIdentity(data)
		return httpRequest{headers: r.Headers, identity: identity, method: r.RequestContext.HTTP.Method, path: rawPath(r.RawPath, r.RequestContext.HTTP.Path)}, unidentified(err)
	case "":
		return httpRequest{}, usageErrorf("--http-event needs --kind rest, httpapi or url")
	}
	return httpRequest{}, usageErrorf("--kind %q: want rest, httpapi or url", kind)
}

// unidentified is the usage error of a request whose caller the wrapper
// cannot identify (err wraps idemlambda.ErrUnidentifiedCaller): it was
// answered 500 and has no record.
func unidentified(err error) error {
	if err == nil {
		return nil
	}
	return usageErrorf("the request's caller cannot be identified (the wrapper answered 500 and stored nothing): %v", err)
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
		return fmt.Sprintf("check --action %q and --key-source %q: they must be the action name and key source the function "+
			"passes to idemlambda.SQS (in its code or its configuration; the key is a hash of both, so a record cannot show them), "+
			"and %s", k.action, k.keySource, prefix)
	case k.httpEvent != "":
		return fmt.Sprintf("check --kind %q (the caller identity the key is scoped by depends on it) and %s", k.kind, prefix)
	}
	return "check the key (as the function passes it to Runner.Do) and " + prefix
}
