package redisstore

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// TestStageIsRefused: redisstore cannot commit staged writes with a
// success (it is no idem.StagedCompleter), so a handler's Stage answers
// idem.ErrNoStaging and nothing is staged; the handler decides, here by
// returning the error, and no success is recorded.
func TestStageIsRefused(t *testing.T) {
	t.Parallel()
	integration(t)
	store := newStore(t, newClient(t, "", nil))
	if _, ok := any(store).(idem.StagedCompleter); ok {
		t.Fatal("redisstore implements idem.StagedCompleter: update this test and docs/effectively-once.md")
	}
	r, err := idem.New(store)
	if err != nil {
		t.Fatal(err)
	}
	key := "evt:stage-refused:" + strconv.FormatInt(time.Now().UnixNano(), 10)
	out, err := r.Do(context.Background(), key, []byte(`{}`), func(ctx context.Context) ([]byte, error) {
		return []byte(`"ok"`), idem.Stage(ctx, "a write")
	})
	if !errors.Is(err, idem.ErrNoStaging) || out.Verdict != idem.FailedPermanently {
		t.Fatalf("Do with a staged write = %s, %v; want failed_permanently wrapping idem.ErrNoStaging", out.Verdict, err)
	}
}
