package idem_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/memstore"
)

func ExampleWithLeaseRenewal() {
	store := memstore.New()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) // a fixed clock, for the example's output
	runner, err := idem.New(store, idem.WithLeaseRenewal(time.Minute), idem.WithClock(func() time.Time { return now }))
	if err != nil {
		panic(err)
	}
	const key = "evt:export-q4:build"
	export := func(ctx context.Context) ([]byte, error) {
		rec, _ := store.Get(ctx, key, now)
		// Two intervals and the lease margin (idem.DefaultLeaseMargin),
		// renewed every minute for as long as the export runs.
		fmt.Println("lease:", rec.LeaseUntil.Sub(now))
		// ... a long job that honours ctx: if the lease cannot be renewed,
		// ctx is cancelled and context.Cause(ctx) wraps idem.ErrLeaseLost.
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("export stopped: %w", context.Cause(ctx))
		}
		return []byte(`{"rows":1200}`), nil
	}
	out, err := runner.Do(context.Background(), key, []byte(`{"quarter":"2029-Q4"}`), export)
	fmt.Println(out.Verdict, string(out.Result), err)

	// A store that cannot renew leases is refused at once.
	type plainStore struct{ idem.Store }
	_, err = idem.New(plainStore{store}, idem.WithLeaseRenewal(time.Minute))
	fmt.Println("store without LeaseRenewer refused:", err != nil && !errors.Is(err, idem.ErrLeaseLost))
	// Output:
	// lease: 2m5s
	// executed {"rows":1200} <nil>
	// store without LeaseRenewer refused: true
}
