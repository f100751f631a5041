package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/redisstore"
)

// A runner over Redis. The client is the application's own: a
// *redis.Client, a *redis.ClusterClient or any redis.UniversalClient. Here
// the address comes from IDEM_REDIS_ADDR, which the tests set.
func Example() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("IDEM_REDIS_ADDR")})
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithPrefix("example:"))
	if err != nil {
		log.Fatal(err)
	}
	key := "evt:0f8e2d:charge"
	client.Del(ctx, store.Name(key)) // forget an earlier run of this example
	runner, err := idem.New(store)
	if err != nil {
		log.Fatal(err)
	}
	charge := func(ctx context.Context) ([]byte, error) {
		fmt.Println("charging the card")
		return []byte(`{"charge":"ch_1"}`), nil
	}
	for range 2 { // the second call is a duplicate delivery
		out, err := runner.Do(ctx, key, []byte(`{"amount":1200}`), charge)
		fmt.Println(string(out.Result), out.Replayed, err)
	}
	// Output:
	// charging the card
	// {"charge":"ch_1"} false <nil>
	// {"charge":"ch_1"} true <nil>
}
