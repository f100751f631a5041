package idem_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/memstore"
)

// A handler stages its business writes instead of making them: the store
// commits them together with the success, or not at all. With ddbstore
// the writes are types.TransactWriteItem (ddbstore.Stage) and the commit
// is one TransactWriteItems; memstore runs memstore.Write functions under
// its lock.
func ExampleStage() {
	runner, err := idem.New(memstore.New())
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	balance := 150 // the business data, changed only by staged writes
	errInsufficient := errors.New("insufficient funds")
	charge := func(amount int) idem.Handler {
		return func(ctx context.Context) ([]byte, error) {
			err := memstore.Stage(ctx, memstore.Write{
				Cond: func() error {
					if balance < amount {
						return errInsufficient
					}
					return nil
				},
				Apply: func() { balance -= amount },
			})
			return []byte(fmt.Sprintf(`{"charged":%d}`, amount)), err
		}
	}
	for _, c := range []struct {
		key    string
		amount int
	}{{"pay:order-1", 100}, {"pay:order-1", 100}, {"pay:order-2", 100}} {
		out, err := runner.Do(ctx, c.key, []byte(`{}`), charge(c.amount))
		fmt.Printf("%s: %s %s balance=%d insufficient=%v\n", c.key, out.Verdict, out.Result, balance, errors.Is(err, errInsufficient))
	}
	// Output:
	// pay:order-1: executed {"charged":100} balance=50 insufficient=false
	// pay:order-1: replayed {"charged":100} balance=50 insufficient=false
	// pay:order-2: failed_permanently  balance=50 insufficient=true
}
