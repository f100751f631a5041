package durable_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

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
