package idem_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/memstore"
)

// ExampleWithWait shows two processes over one store: the second receives
// the duplicate while the first still runs the handler, waits for it, and
// answers with its outcome instead of "in progress".
func ExampleWithWait() {
	store := memstore.New() // a DynamoDB table shared by both processes, in production
	polling := make(chan struct{}, 1)
	second, err := idem.New(store, idem.WithWait(5*time.Second),
		// The second process's sleep between polls, which also tells this
		// example that it is waiting.
		idem.WithSleep(func(ctx context.Context, d time.Duration) error {
			select {
			case polling <- struct{}{}:
			default:
			}
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}))
	if err != nil {
		panic(err)
	}
	first, err := idem.New(store)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key, payload := "evt:order-42:charge", []byte(`{"amount":42}`)

	answer := make(chan string)
	out, err := first.Do(ctx, key, payload, func(context.Context) ([]byte, error) {
		go func() { // the duplicate arrives while the handler runs
			out, err := second.Do(ctx, key, payload, func(context.Context) ([]byte, error) {
				return nil, fmt.Errorf("not run: the first process runs it")
			})
			answer <- fmt.Sprintf("second: %s %s waited=%v err=%v", out.Verdict, out.Result, out.Waited, err)
		}()
		<-polling // the duplicate found the key in progress and waits
		return []byte(`{"charged":true}`), nil
	})
	fmt.Println("first:", out.Verdict, string(out.Result), err)
	fmt.Println(<-answer)
	// Output:
	// first: executed {"charged":true} <nil>
	// second: replayed {"charged":true} waited=true err=<nil>
}
