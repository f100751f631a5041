// Command worker is a helper of ddbstore's multi-process test
// (TestProcesses): it runs an idem.Runner over a ddbstore.Store through the
// keys proc:key:000... (in order, as every worker does, so that they collide;
// -start makes them begin at the same instant), and each handler execution
// adds 1 to the key's counter in the effects table. It retries a key while
// it is in progress elsewhere or the store fails transiently, and prints a
// JSON summary on stdout. The DynamoDB endpoint comes from the SDK's own
// configuration (AWS_ENDPOINT_URL_DYNAMODB); the SDK does not retry.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
)

func main() {
	table := flag.String("table", "", "idempotency table")
	effects := flag.String("effects", "", "table of side-effect counters")
	keys := flag.Int("keys", 100, "number of keys")
	seed := flag.Uint64("seed", 1, "seed of the random delays")
	limit := flag.Duration("limit", 2*time.Minute, "give up after this long")
	startMs := flag.Int64("start", 0, "begin at this instant, epoch milliseconds")
	flag.Parse()
	log.SetFlags(0)
	if *table == "" || *effects == "" {
		log.Fatal("-table and -effects are required")
	}
	time.Sleep(time.Until(time.UnixMilli(*startMs)))
	if err := run(*table, *effects, *keys, *seed, *limit); err != nil {
		log.Fatal(err)
	}
}

type summary struct {
	Executed, Replayed, InProgress, Transient int
}

func run(table, effects string, keys int, seed uint64, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	tr.IdleConnTimeout = 2 * time.Second // before the server's keep-alive timeout (Node: 5 s)
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.RetryMaxAttempts = 1
		o.HTTPClient = &http.Client{Transport: tr}
	})
	store, err := ddbstore.New(client, table)
	if err != nil {
		return err
	}
	runner, err := idem.New(store, idem.WithRetry(1, 0, 0))
	if err != nil {
		return err
	}
	rnd := rand.New(rand.NewPCG(seed, seed*7919))
	var sum summary
	for i := range keys {
		key := fmt.Sprintf("proc:key:%03d", i)
		payload := fmt.Appendf(nil, `{"k":%d}`, i)
		handler := func(ctx context.Context) ([]byte, error) {
			_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 aws.String(effects),
				Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}},
				UpdateExpression:          aws.String("ADD n :one"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
			})
			if err != nil {
				return nil, err
			}
			time.Sleep(time.Duration(rnd.IntN(2000)) * time.Microsecond) // widen the window
			return payload, nil
		}
		for {
			// Each delivery has a deadline, as a Lambda invocation does: the
			// lease ends 5 s (the default margin) after it.
			dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
			out, err := runner.Do(dctx, key, payload, handler)
			dcancel()
			if err == nil {
				if out.Replayed {
					sum.Replayed++
				} else {
					sum.Executed++
				}
				break
			}
			switch {
			case errors.Is(err, core.ErrInProgress):
				sum.InProgress++
			case core.Classify(err, core.DefaultClassifiers...) == core.Transient:
				sum.Transient++
				log.Printf("key %s: transient: %v", key, err)
			default:
				return fmt.Errorf("key %s: %w", key, err)
			}
			if ctx.Err() != nil {
				return fmt.Errorf("key %s: gave up: %w", key, err)
			}
			time.Sleep(time.Duration(1+rnd.IntN(3)) * time.Millisecond)
		}
	}
	return json.NewEncoder(os.Stdout).Encode(sum)
}
