package core_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem/core"
)

// A store that reserves in one write (idem.Acquirer) replaces what
// Acquirable allows and counts the attempt as Acquire does.
func ExampleAcquirable() {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	key := "evt:order-42:charge"
	fp, _ := core.Fingerprint([]byte(`{"order":"42","amount":100}`))
	policy := core.Policy{MaxAttempts: 3}

	first := core.Reserve(key, fp, "token-1", nil, t0, t0.Add(30*time.Second), time.Hour)
	failed := core.Fail(first, errors.New("gateway timeout"), true, t0.Add(time.Second), time.Hour)

	now := t0.Add(time.Minute)
	next := core.Reserve(key, fp, "token-2", nil, now, now.Add(30*time.Second), time.Hour)
	fmt.Println("retryable failure:", core.Acquirable(&failed, fp, now, policy), "attempt", core.Acquire(next, &failed, now).Attempts)

	other, _ := core.Fingerprint([]byte(`{"order":"42","amount":999}`))
	fmt.Println("other payload:", core.Acquirable(&failed, other, now, policy))

	later := t0.Add(2 * time.Hour)
	fmt.Println("past retention:", core.Acquirable(&failed, other, later, policy), "attempt", core.Acquire(next, &failed, later).Attempts)
	// Output:
	// retryable failure: true attempt 2
	// other payload: false
	// past retention: true attempt 1
}
