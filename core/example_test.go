package core_test

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/idemgo/idem/core"
)

func ExampleDecide() {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	key := "evt:order-42:charge"
	fp, _ := core.Fingerprint([]byte(`{"order":"42","amount":100}`))
	policy := core.Policy{MaxAttempts: 3}

	d := core.Decide(key, nil, fp, t0, policy)
	fmt.Println("no record:", d.Action)

	rec := core.Reserve(key, fp, "token-1", nil, t0, t0.Add(30*time.Second), time.Hour)
	d = core.Decide(key, &rec, fp, t0.Add(time.Second), policy)
	fmt.Println("lease live:", d.Action, "until", d.RetryAt.Format(time.TimeOnly))

	done := core.Succeed(rec, []byte(`{"charged":true}`), t0.Add(2*time.Second), time.Hour)
	d = core.Decide(key, &done, fp, t0.Add(3*time.Second), policy)
	fmt.Println("succeeded:", d.Action)

	other, _ := core.Fingerprint([]byte(`{"order":"42","amount":999}`))
	d = core.Decide(key, &done, other, t0.Add(3*time.Second), policy)
	fmt.Println("other payload:", d.Action, errors.Is(d.Err, core.ErrKeyReused))
	// Output:
	// no record: execute
	// lease live: in_progress until 12:00:30
	// succeeded: replay
	// other payload: reject true
}

func ExampleBackoff() {
	justUnder1 := math.Nextafter(1, 0)
	for attempt := 1; attempt <= 5; attempt++ {
		fmt.Println(attempt, core.Backoff(attempt, 100*time.Millisecond, time.Second, justUnder1))
	}
	fmt.Println("r=0.5:", core.Backoff(2, 100*time.Millisecond, time.Second, 0.5))
	// Output:
	// 1 100ms
	// 2 200ms
	// 3 400ms
	// 4 800ms
	// 5 1s
	// r=0.5: 100ms
}

func ExampleFingerprint() {
	a, _ := core.Fingerprint([]byte(`{"id": "evt-1", "amount": 100}`))
	b, _ := core.Fingerprint([]byte(`{"amount":100,"id":"evt-1"}`))
	fmt.Println(a == b)
	// Output: true
}

func ExampleClassify() {
	err := core.MarkTransient(errors.New("upstream busy"))
	fmt.Println(core.Classify(fmt.Errorf("charge: %w", err), core.DefaultClassifiers...))
	fmt.Println(core.Classify(core.MarkPermanent(errors.New("card declined")), core.DefaultClassifiers...))
	fmt.Println(core.Classify(errors.New("who knows"), core.DefaultClassifiers...))
	// Output:
	// transient
	// permanent
	// unclassified
}
