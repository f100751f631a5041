package durable

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/httprule"
)

// MaxPayload is the largest payload, in bytes, that the dispatcher sends: Lambda's
// limit for an asynchronous invocation (1 MB). A larger event is not sent: its
// verdict is invalid_payload, its error wraps ErrPayloadTooLarge.
const MaxPayload = 1 << 20

// ExecutionNamePrefix starts every execution name the dispatcher gives (see
// ExecutionName), so that its executions are told apart in the function's
// list of durable executions.
const ExecutionNamePrefix = "idem-"

// ErrPayloadTooLarge is the error (checked with errors.Is) of an event whose
// payload is larger than MaxPayload, or that Lambda refused as too large
// (RequestTooLargeException). It also wraps core.ErrInvalidPayload: the
// verdict is invalid_payload, and no redelivery can make it succeed.
var ErrPayloadTooLarge = errors.New("durable: payload larger than an asynchronous invocation accepts")

// ErrAlreadyStarted is the error (checked with errors.Is) of an event whose
// execution name Lambda knows with another payload, running or closed within
// the function's retention (DurableExecutionAlreadyStartedException, also
// found with errors.As). It also wraps core.ErrKeyReused: the verdict is
// key_reused.
var ErrAlreadyStarted = errors.New("durable: an execution of this name was started with another payload")

// Invoker is the part of the Lambda client that the dispatcher calls. A
// *lambda.Client (service/lambda of the AWS SDK for Go v2) is one; its
// endpoint, retries and credentials are the SDK's own configuration.
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// Dispatcher starts the durable executions of one durable function: the
// handler that the wrappers (SQS, SNS, Kinesis, DynamoDBStream, Typed, and
// for HTTP requests HTTPAPI, RESTAPI, FunctionURL, ALB) run for each event.
// A Dispatcher is immutable and safe for concurrent use; its zero value is
// not usable: create one with New.
type Dispatcher struct {
	client   Invoker
	function string
	forward  []string // WithForwardedHeaders
}

// An Option configures a Dispatcher (New).
type Option func(*Dispatcher) error

// WithForwardedHeaders names request headers (looked up
// case-insensitively) that the HTTP wrappers send to the durable function
// beside the request, under "headers" (see the package documentation):
// what the function needs to act on a request that neither its body nor
// its key says, such as GitHub's X-GitHub-Event or Shopify's
// X-Shopify-Topic and X-Shopify-Shop-Domain. Forward only headers the
// sender keeps on every delivery of one event: Lambda compares payloads
// whole, so a header that changed (a timestamp, a signature, a user agent)
// makes a redelivery another payload, refused 422 key_reused. Never a
// credential (Authorization, a signature): the durable function's input
// is kept in its execution history. The batch wrappers ignore it.
func WithForwardedHeaders(names ...string) Option {
	return func(d *Dispatcher) error {
		for _, n := range names {
			if _, err := httprule.HeaderPart(n); err != nil {
				return fmt.Errorf("durable: WithForwardedHeaders: %w", err)
			}
			d.forward = append(d.forward, strings.ToLower(n))
		}
		return nil
	}
}

// qualifiedARN is a Lambda function ARN with a version or alias: durable
// functions are invoked by a qualified ARN.
var qualifiedARN = regexp.MustCompile(`^arn:aws[a-zA-Z-]*:lambda:[a-z0-9-]+:\d{12}:function:[a-zA-Z0-9_-]{1,64}:(\$LATEST|[a-zA-Z0-9_-]{1,128})$`)

// New returns the dispatcher that starts executions of the durable function
// functionARN through client. functionARN must be the function's qualified
// ARN, with a version or an alias (arn:aws:lambda:REGION:ACCOUNT:function:
// NAME:ALIAS): Lambda invokes a durable function only by a qualified ARN.
// A bad option is an error.
func New(client Invoker, functionARN string, opts ...Option) (*Dispatcher, error) {
	if client == nil {
		return nil, errors.New("durable: nil Lambda client")
	}
	if !qualifiedARN.MatchString(functionARN) {
		return nil, fmt.Errorf("durable: %q is not a qualified function ARN: give arn:aws:lambda:REGION:ACCOUNT:function:NAME:VERSION-OR-ALIAS", functionARN)
	}
	d := &Dispatcher{client: client, function: functionARN}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("durable: nil Option")
		}
		if err := o(d); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// FunctionARN returns the qualified ARN of the durable function.
func (d *Dispatcher) FunctionARN() string { return d.function }

// ExecutionName returns the durable execution name of an event whose stored
// key is key: ExecutionNamePrefix and the SHA-256 digest of the key in
// unpadded base64url (43 characters), 48 characters of [A-Za-z0-9_-] in all,
// within Lambda's 1 to 64 characters of that set. The same key always gives
// the same name; two keys give the same name only if SHA-256 collides. Keys
// name the event and the action (idemlambda.EventKey), so one event gets
// one name per action.
func ExecutionName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return ExecutionNamePrefix + base64.RawURLEncoding.EncodeToString(sum[:])
}

// Started is what the dispatcher records for an event, and what a
// duplicate replays: the execution's name and the ARN Lambda answered.
type Started struct {
	// ExecutionName is ExecutionName of the event's stored key.
	ExecutionName string `json:"durable_execution_name"`
	// ExecutionARN is the durable execution's ARN, as Lambda answered it.
	ExecutionARN string `json:"durable_execution_arn"`
}

// start is the handler of the batch wrappers and Typed: it sends the
// call's payload (httprule.CallPayload) to the durable function under the
// execution name of the call's stored key, and returns Started as JSON.
func (d *Dispatcher) start(ctx context.Context) ([]byte, error) {
	key, ok := httprule.StoredKey(ctx)
	if !ok {
		return nil, core.MarkPermanent(errors.New("durable: the handler's context has no stored key"))
	}
	raw, _ := httprule.CallPayload(ctx)
	payload, err := invokePayload(raw)
	if err != nil {
		return nil, core.MarkPermanent(err)
	}
	s, err := d.invoke(ctx, key, payload)
	if err != nil {
		return nil, err
	}
	return json.Marshal(s)
}

// invoke starts the execution of the event whose stored key is key,
// giving it payload: one asynchronous Invoke of the durable function under
// ExecutionName(key). The error is invokeError's.
func (d *Dispatcher) invoke(ctx context.Context, key string, payload []byte) (Started, error) {
	name := ExecutionName(key)
	out, err := d.client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:         aws.String(d.function),
		InvocationType:       types.InvocationTypeEvent,
		DurableExecutionName: aws.String(name),
		Payload:              payload,
	})
	if err != nil {
		return Started{}, invokeError(name, err)
	}
	return Started{ExecutionName: name, ExecutionARN: aws.ToString(out.DurableExecutionArn)}, nil
}

// invokePayload is what the durable function receives for a payload: its
// canonical JSON (core.Canonicalize: keys sorted, no whitespace, numbers as
// sent), or, for a payload that is not JSON, the JSON string of its bytes, as
// the batch wrappers fingerprint it; so two payloads are the same for Lambda
// exactly when they are for idem's fingerprint (without a selection).
func invokePayload(raw []byte) ([]byte, error) {
	payload, err := core.Canonicalize(raw)
	switch {
	case errors.Is(err, core.ErrTooDeep):
		return nil, err
	case err != nil:
		payload = core.AppendJSONString(nil, raw)
	}
	return payload, checkSize(payload)
}

// checkSize refuses a payload larger than MaxPayload.
func checkSize(payload []byte) error {
	if len(payload) > MaxPayload {
		return fmt.Errorf("%w: %w: %d bytes, at most %d (Lambda's asynchronous invocation limit)", core.ErrInvalidPayload, ErrPayloadTooLarge, len(payload), MaxPayload)
	}
	return nil
}

// invokeError translates Invoke's error for the runner: another payload
// under the name is key_reused, a payload too large invalid_payload, both
// permanent; anything else is returned as it is, for the wrapper to mark
// what the SDK knows to be retryable (throttling, 5xx) transient.
func invokeError(name string, err error) error {
	var started *types.DurableExecutionAlreadyStartedException
	var tooLarge *types.RequestTooLargeException
	switch {
	case errors.As(err, &started):
		return core.MarkPermanent(fmt.Errorf("%w: %w: execution %s: %w", core.ErrKeyReused, ErrAlreadyStarted, name, err))
	case errors.As(err, &tooLarge):
		return core.MarkPermanent(fmt.Errorf("%w: %w: %w", core.ErrInvalidPayload, ErrPayloadTooLarge, err))
	}
	return fmt.Errorf("durable: invoke %s: %w", name, err)
}
