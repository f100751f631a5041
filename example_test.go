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

func ExampleStep() {
	runner, err := idem.New(memstore.New())
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	charges, emails := 0, 0
	order := func(ctx context.Context) ([]byte, error) {
		// The payment provider takes an idempotency key: the same one in
		// every execution of this event.
		payKey, err := idem.DownstreamKey(ctx, "charge")
		if err != nil {
			return nil, err
		}
		receipt, err := idem.Step(ctx, "charge", func(ctx context.Context) ([]byte, error) {
			charges++
			return []byte("ch_" + payKey[:8]), nil
		})
		if err != nil {
			return nil, err
		}
		if _, err := idem.Step(ctx, "email", func(ctx context.Context) ([]byte, error) {
			emails++
			if emails == 1 {
				return nil, core.MarkTransient(errors.New("mail server busy"))
			}
			return nil, nil
		}); err != nil {
			return nil, err
		}
		return receipt, nil
	}
	out, err := runner.Do(ctx, "evt:order-42:fulfil", []byte(`{"order":"42"}`), order)
	fmt.Printf("result %s, attempts %d, err %v\n", out.Result, out.Attempts, err)
	fmt.Println("charges:", charges, "email tries:", emails)
	// Output:
	// result ch_33a57197, attempts 1, err <nil>
	// charges: 1 email tries: 2
}

func ExampleDownstreamKey() {
	runner, err := idem.New(memstore.New())
	if err != nil {
		panic(err)
	}
	send := func(ctx context.Context) ([]byte, error) {
		// Passed as the mail API's idempotency key: a re-run of this
		// event is a no-op there.
		key, err := idem.DownstreamKey(ctx, "mail:receipt")
		if err != nil {
			return nil, err
		}
		uuid, err := idem.DownstreamUUID(ctx, "tickets")
		if err != nil {
			return nil, err
		}
		return []byte(key + " " + uuid), nil
	}
	out, err := runner.Do(context.Background(), "evt:order-42:receipt", []byte(`{}`), send)
	fmt.Println(string(out.Result), err)
	fmt.Println(core.DownstreamKey("evt:order-42:receipt", "mail:receipt"))
	_, err = idem.DownstreamKey(context.Background(), "mail:receipt")
	fmt.Println(errors.Is(err, idem.ErrNoExecution))
	// Output:
	// 7da9d8f674db14a9b4dd55010f4cc6fb 68f7d401-b928-83c8-a527-89b48b24345b <nil>
	// 7da9d8f674db14a9b4dd55010f4cc6fb
	// true
}
