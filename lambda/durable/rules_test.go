package durable_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	awslambda "github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
	"github.com/idemgo/idem/lambda/durable"
	"github.com/idemgo/idem/memstore"
)

// refusingStore is a memstore whose Complete refuses the next refuse
// commits of a success, certainly writing nothing, as ddbstore refuses a
// record too large for its table (idem.ErrCommitRefused).
type refusingStore struct {
	*memstore.Store
	refuse atomic.Int32
}

func (s *refusingStore) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	if rec.Status == core.StatusSucceeded && s.refuse.Add(-1) >= 0 {
		return core.Record{}, errors.Join(idem.ErrCommitRefused, core.MarkPermanent(errors.New("item size has exceeded the maximum allowed size")))
	}
	return s.Store.Complete(ctx, rec)
}

// refusingSandbox is a sandbox whose store refuses its first commit of a
// success (refusingStore).
func refusingSandbox(t *testing.T, opts ...idem.Option) *sandbox {
	t.Helper()
	store := &refusingStore{Store: memstore.New()}
	store.refuse.Store(1)
	return newSandboxOver(t, store, opts...)
}

// noCredentials is a dispatcher of r's durable function whose client has
// no credentials, so that the SDK never sends the Invoke: an error no
// classifier knows.
func noCredentials(t *testing.T, r *rig) *durable.Dispatcher {
	t.Helper()
	client := lambda.New(lambda.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(r.srv.URL), RetryMaxAttempts: 1,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, errors.New("no credentials: the function's role is missing")
		}),
	})
	d, err := durable.New(client, fulfilARN)
	fatalIf(t, err)
	return d
}

// A start whose record the store refuses (commit_refused) is reported, or
// answered 503 commit-refused: the execution started, and the redelivery,
// or the sender's retry, reaches it again by its name: one execution.
func TestCommitRefusedStartsOnce(t *testing.T) {
	t.Run("sqs", func(t *testing.T) {
		r := newRig(t)
		s := refusingSandbox(t)
		equal(t, "first delivery: reported", s.sqs(t, r.d, batch("", order("o-1", 10))), []string{"m-1"})
		equal(t, "first delivery: verdicts", s.verdicts(), []string{"commit_refused"})
		equal(t, "redelivery: reported", s.sqs(t, r.d, batch("", order("o-1", 10))), nil)
		equal(t, "redelivery: verdicts", s.verdicts(), []string{"executed"})
		equal(t, "statuses", statuses(r.srv, 0), []int{202, 202})
		if got := r.srv.Started(); got != 1 {
			t.Errorf("executions started = %d, want 1", got)
		}
	})
	t.Run("http", func(t *testing.T) {
		r := newRig(t)
		s := refusingSandbox(t, idem.WithRetention(72*time.Hour))
		a := s.send(t, r, githubPush("d-1", pushBody))
		if a.status != 503 || a.problem() != idemlambda.ProblemCommitRefused || a.headers["retry-after"] == "" {
			t.Fatalf("refused commit: %+v, want 503 %s with Retry-After", a, idemlambda.ProblemCommitRefused)
		}
		first := r.srv.Invocations()[0].ARN
		if got := s.send(t, r, githubPush("d-1", pushBody)).started(t); got.ExecutionARN != first {
			t.Errorf("retry answered %s, want the execution started first, %s", got.ExecutionARN, first)
		}
		equal(t, "verdicts", s.verdicts(), []string{"commit_refused", "executed"})
		if got := r.srv.Started(); got != 1 {
			t.Errorf("executions started = %d, want 1", got)
		}
	})
}

// An Invoke error no classifier knows (here: the dispatcher's role has no
// credentials, so the SDK never sends the request) is, in a batch,
// failed_unclassified: reported, logged at ERROR, for the queue to deliver
// again; over HTTP a 500 that leaves no record, as every handler failure
// of an HTTP wrapper. Once fixed, the redelivery starts the execution.
func TestUnclassifiedInvokeError(t *testing.T) {
	r := newRig(t)
	broken := noCredentials(t, r)

	s := newSandbox(t)
	equal(t, "sqs: reported", s.sqs(t, broken, batch("", order("o-1", 10))), []string{"m-1"})
	obs := s.take()
	if len(obs) != 1 || obs[0].Verdict != idem.FailedUnclassified || obs[0].Level().String() != "ERROR" {
		t.Fatalf("sqs: observations %+v, want one failed_unclassified at ERROR", obs)
	}
	equal(t, "sqs: fixed, reported", s.sqs(t, r.d, batch("", order("o-1", 10))), nil)
	equal(t, "sqs: fixed, verdicts", s.verdicts(), []string{"executed"})

	h := webhookSandbox(t)
	if a := httpAPI.send(t, h, broken, githubOptions(), githubPush("d-1", pushBody)); a.status != 500 || a.problem() != idemlambda.ProblemInternal {
		t.Fatalf("http: %+v, want 500 %s", a, idemlambda.ProblemInternal)
	}
	h.send(t, r, githubPush("d-1", pushBody)).started(t)
	equal(t, "http: verdicts", h.verdicts(), []string{"failed_transiently", "executed"})
	if got, n := r.srv.Started(), len(r.srv.Invocations()); got != 2 || n != 2 {
		t.Errorf("executions started = %d of %d invocations, want 2 of 2 (none sent without credentials)", got, n)
	}
}

// identityPoolRequest is a function URL request with IAM authorization as
// Lambda sends it, from the Cognito identity pool user identityID, with
// the Idempotency-Key pay-1: every such user signs with the pool's one
// role, and only cognitoIdentity tells them apart.
func identityPoolRequest(identityID string) []byte {
	return []byte(`{
	"version": "2.0", "rawPath": "/pay", "rawQueryString": "",
	"headers": {"idempotency-key": "pay-1", "content-type": "application/json"},
	"requestContext": {
		"accountId": "123456789012", "apiId": "urlid", "domainName": "urlid.lambda-url.us-east-1.on.aws", "domainPrefix": "urlid",
		"authorizer": {"iam": {"accessKey": "ASIA2ZJZYVUEREEIHAKY", "accountId": "123456789012",
			"callerId": "AROA7ZJZYVRE7C3DUXHH6:CognitoIdentityCredentials",
			"cognitoIdentity": {"amr":["authenticated"],"identityId":"` + identityID + `","identityPoolId":"us-east-1:4f291106-8703-466b-8f2b-3ecee1ca56ce"},
			"principalOrgId": null, "userArn": "arn:aws:sts::123456789012:assumed-role/Cognito_OrdersAuth_Role/CognitoIdentityCredentials",
			"userId": "AROA7ZJZYVRE7C3DUXHH6:CognitoIdentityCredentials"}},
		"http": {"method": "POST", "path": "/pay", "protocol": "HTTP/1.1", "sourceIp": "192.0.2.1", "userAgent": "agent"},
		"requestId": "id", "time": "12/Mar/2030:19:03:58 +0000", "timeEpoch": 1899999838390
	},
	"body": "{\"cents\":100}", "isBase64Encoded": false
}`)
}

// Two users of one Cognito identity pool, one Idempotency-Key and one body,
// through a function URL dispatcher run as lambda.Start runs it: two
// executions, each told its own caller. (The identity scopes are the HTTP
// wrapper's; the dispatcher keeps them.)
func TestIdentityPoolCallersApart(t *testing.T) {
	r := newRig(t)
	h, err := durable.FunctionURL(newSandbox(t).runner, r.d)
	fatalIf(t, err)
	invoke := awslambda.NewHandler(h) // what lambda.Start runs the handler with
	var callers [][]string
	for _, id := range []string{"us-east-1:3f291106-8703-466b-8f2b-3ecee1ca56ce", "us-east-1:9c1d2e3f-0000-4b5c-8d9e-0a1b2c3d4e5f"} {
		out, err := invoke.Invoke(context.Background(), identityPoolRequest(id))
		fatalIf(t, err)
		var resp events.LambdaFunctionURLResponse
		fatalIf(t, json.Unmarshal(out, &resp))
		a := answerOf(t, resp.StatusCode, resp.Headers, nil, resp.Body, nil)
		got, _ := receivedBy(t, r, a.started(t))
		callers = append(callers, got.Caller)
		if !slices.ContainsFunc(got.Caller, func(p string) bool { return strings.Contains(p, id) }) {
			t.Errorf("user %s: the durable function was told the caller %v, want one naming the identity", id, got.Caller)
		}
	}
	if r.srv.Started() != 2 || slices.Equal(callers[0], callers[1]) {
		t.Errorf("%d executions for callers %v, want 2 executions for 2 callers", r.srv.Started(), callers)
	}
}
