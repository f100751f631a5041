package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem/core"
)

// reservation is a first reservation of key at now with a lease of lease.
func reservation(key, token string, now time.Time, lease time.Duration) core.Record {
	return core.Reserve(key, fp, token, nil, now, now.Add(lease), time.Hour)
}

// assertErr checks that err wraps sentinel, is an *Error, and is transient or not.
func assertErr(t *testing.T, what string, err, sentinel error, transient bool) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s = %v, want an error wrapping %v", what, err, sentinel)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Errorf("%s = %v (%T), want an *Error", what, err, err)
	}
	if got := core.Classify(err) == core.Transient; got != transient {
		t.Errorf("%s: transient = %v, want %v (%v)", what, got, transient, err)
	}
}

// errUnexpectedCall is what fakeClient answers: the tests using it expect
// no call at all.
var errUnexpectedCall = errors.New("fake client: unexpected call")

// fakeClient is a Client that fails every call with errUnexpectedCall.
type fakeClient struct{}

func (fakeClient) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, "evalsha", sha1)
	cmd.SetErr(errUnexpectedCall)
	return cmd
}

func (fakeClient) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, "eval")
	cmd.SetErr(errUnexpectedCall)
	return cmd
}
