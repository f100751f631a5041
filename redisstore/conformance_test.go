package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	integration(t)
	store := newStore(t, newClient(t, "", nil))
	storetest.Run(t, func(t *testing.T) idem.Store { return store })
}

func TestConformanceOptions(t *testing.T) {
	t.Parallel()
	integration(t)
	store, err := New(newClient(t, "", nil), WithPrefix(""), WithCompressionThreshold(0),
		WithMaxRecordSize(MinRecordSize), WithExpiryMargin(0))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, func(t *testing.T) idem.Store { return store })
}

// TestConformanceCluster runs the suite through a *redis.ClusterClient on a
// one-node cluster that serves every slot: the scripts touch one key, in one
// slot, and WithWait finds the key's primary.
// A cluster node takes writes only two seconds after it started (Redis's
// CLUSTER_WRITABLE_DELAY): the test runs in parallel with the others.
func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	srv := startRedis(t, "--cluster-enabled", "yes")
	ctx := context.Background()
	admin := newClient(t, srv.Addr, nil)
	if err := admin.Do(ctx, "cluster", "addslotsrange", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(admin.ClusterInfo(ctx).Val(), "cluster_state:ok") {
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // polling the server's state, not making time pass
	}
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}, DisableIdentity: true})
	t.Cleanup(func() { cluster.Close() })
	store := newStore(t, cluster)
	storetest.Run(t, func(t *testing.T) idem.Store { return store })

	// WithWait works through the cluster client (no replicas here: asking
	// for one times out, and says so).
	waiting := newStore(t, cluster, WithWait(1, 20*time.Millisecond))
	rec := reservation("k1", "tok-a", time.Now(), time.Minute)
	err := waiting.Reserve(ctx, rec, nil, rec.UpdatedAt)
	assertErr(t, "Reserve with WithWait and no replica", err, ErrNotReplicated, true)
}
