package linz

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/memstore"
	"github.com/idemgo/idem/redisstore"
)

// Resolutions of the stores: ddbstore keeps retention in epoch seconds,
// leases and updates in milliseconds; redisstore all three in
// milliseconds; memstore exactly.
var (
	DynamoResolution = Resolution{Expiry: time.Second, Lease: time.Millisecond, Update: time.Millisecond}
	RedisResolution  = Resolution{Expiry: time.Millisecond, Lease: time.Millisecond, Update: time.Millisecond}
)

// MemTarget returns a target on a new memstore.Store, with faults f
// injected around its calls and staged writes that count in memory.
func MemTarget(f *Faults) *Target {
	var mu sync.Mutex
	effects := map[string]int{}
	return &Target{
		Name:   "memstore",
		Store:  memstore.New(),
		Faults: f,
		Stage: func(key string) any {
			return memstore.Write{Apply: func() {
				mu.Lock()
				defer mu.Unlock()
				effects[key]++
			}}
		},
		Effects: func(_ context.Context, key string) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return effects[key], nil
		},
	}
}

// DynamoClient returns a DynamoDB client configured from the environment
// (AWS_ENDPOINT_URL_DYNAMODB) whose data-plane requests get faults from f
// (none when nil), and which does not retry on its own.
func DynamoClient(ctx context.Context, f *Faults) (*dynamodb.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	tr.IdleConnTimeout = 2 * time.Second // before the server's keep-alive timeout (Node's: 5 s)
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: &Transport{Inner: tr, Faults: f}}
		o.RetryMaxAttempts = 1
	}), nil
}

// DynamoTarget returns a target on a ddbstore.Store of table through
// client. If effects is not empty (a table whose key attribute is "pk"),
// staged writes add to counters there; on a server without transactions,
// leave it empty. serial says that the server is not atomic under
// concurrency (moto): the target then makes one call at a time.
func DynamoTarget(client *dynamodb.Client, name, table, effects string, serial bool) (*Target, error) {
	s, err := ddbstore.New(client, table)
	if err != nil {
		return nil, err
	}
	t := &Target{Name: name, Store: s, Res: DynamoResolution, Serial: serial, StepsApart: true}
	if effects == "" {
		return t, nil
	}
	key := func(k string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: k}}
	}
	t.Stage = func(k string) any {
		return types.TransactWriteItem{Update: &types.Update{TableName: aws.String(effects), Key: key(k),
			UpdateExpression:          aws.String("ADD n :one"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}}}}
	}
	t.Effects = func(ctx context.Context, k string) (int, error) {
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(effects), Key: key(k), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return 0, fmt.Errorf("linz: read effects: %w", err) // classified by the store's classifier
		}
		n, ok := out.Item["n"].(*types.AttributeValueMemberN)
		if !ok {
			return 0, nil
		}
		return strconv.Atoi(n.Value)
	}
	return t, nil
}

// RedisTarget returns a target on a redisstore.Store with its own key
// prefix over a new client of the server at addr, whose scripts get faults
// from f (none when nil) and which does not retry on its own. The client
// is closed by the returned function.
func RedisTarget(addr, prefix string, f *Faults) (*Target, func() error, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true, MaxRetries: -1})
	c.AddHook(RedisHook{Faults: f})
	s, err := redisstore.New(c, redisstore.WithPrefix(prefix))
	if err != nil {
		_ = c.Close()
		return nil, nil, err
	}
	return &Target{Name: "redisstore", Store: s, Res: RedisResolution}, c.Close, nil
}
