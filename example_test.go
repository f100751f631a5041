package idem_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/memstore"
)

func ExampleRunner_Do() {
	runner, err := idem.New(memstore.New())
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	sent := 0
	notify := func(ctx context.Context) ([]byte, error) {
		sent++ // the side effect: send the notification
		return []byte(`{"notified":true}`), nil
	}
	payload := []byte(`{"order":"42","email":"a@example.com"}`)
	for delivery := 1; delivery <= 3; delivery++ {
		out, err := runner.Do(ctx, "evt:order-42:notify", payload, notify)
		fmt.Printf("delivery %d: %s replayed=%v err=%v\n", delivery, out.Result, out.Replayed, err)
	}
	_, err = runner.Do(ctx, "evt:order-42:notify", []byte(`{"order":"43"}`), notify)
	fmt.Println("other payload rejected:", errors.Is(err, core.ErrKeyReused))
	fmt.Println("notifications sent:", sent)
	// Output:
	// delivery 1: {"notified":true} replayed=false err=<nil>
	// delivery 2: {"notified":true} replayed=true err=<nil>
	// delivery 3: {"notified":true} replayed=true err=<nil>
	// other payload rejected: true
	// notifications sent: 1
}
