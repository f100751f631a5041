package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/capacity"
)

// units are whole capacity units.
func units(u float64) int { return int(u) }

// capture is a ddbstore.API that records the size of every item written:
// the reservation's (read back after the acquisition's UpdateItem, which
// does not send the whole item), the record's put, and a result item's
// (the one put without a condition).
type capture struct {
	ddbstore.API
	mu      sync.Mutex
	written itemsWritten // guarded by mu
}

// itemsWritten are the sizes of the items of a first execution.
type itemsWritten struct{ reserve, complete, result int }

func (c *capture) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	size := capacity.Size(capacity.FromItem(in.Item))
	c.mu.Lock()
	if in.ConditionExpression == nil {
		c.written.result = size
	} else {
		c.written.complete = size
	}
	c.mu.Unlock()
	return c.API.PutItem(ctx, in, opts...)
}

func (c *capture) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := c.API.UpdateItem(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	got, err := c.API.GetItem(ctx, &dynamodb.GetItemInput{TableName: in.TableName, Key: in.Key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("reading back the updated item: %w", err)
	}
	c.mu.Lock()
	c.written.reserve = capacity.Size(capacity.FromItem(got.Item))
	c.mu.Unlock()
	return out, nil
}

func (c *capture) take() itemsWritten {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.written
	c.written = itemsWritten{}
	return w
}

// itemSizeRow is the record written for one result.
type itemSizeRow struct {
	ResultBytes   int    `json:"result_bytes"`
	Content       string `json:"content"`
	Compression   string `json:"compression"`
	ReserveBytes  int    `json:"reserve_item_bytes"`
	CompleteBytes int    `json:"complete_item_bytes"`
	// ResultItemBytes is the size of the result item a result that would
	// make the record pass 1 KB is kept in (0: none).
	ResultItemBytes int `json:"result_item_bytes"`
	// ResultItemWCU is its write, on the first execution only.
	ResultItemWCU int `json:"result_item_wcu"`
	// WCUs of the two writes of a first execution: the reservation, and
	// the completion that replaces it (billed on the larger item).
	ReserveWCU  int `json:"reserve_wcu"`
	CompleteWCU int `json:"complete_wcu"`
	// A duplicate's conditional put fails on the completed item; DynamoDB
	// bills a failed conditional write by the existing item's size.
	DuplicateWCU int `json:"duplicate_wcu"`
	// A consistent GetItem of the completed item (dynalite's path for a
	// duplicate): 1 RCU per 4 KB.
	GetRCU int `json:"get_rcu"`
}

// jsonResult is a compressible JSON result of about size bytes: an order
// with line items.
func jsonResult(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"ok": true, "id": "item_size", "lines": [`)
	for i := 0; b.Len() < size-40; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"sku": "SKU-%06d", "qty": %d, "price": %d.%02d}`, i, i%5+1, 10+i%90, i%100)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// randomResult is a barely compressible JSON result of about size bytes: a
// string of random base64.
func randomResult(size int) []byte {
	raw := make([]byte, (size-20)*3/4)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range raw {
		raw[i] = byte(r.UintN(256))
	}
	return fmt.Appendf(nil, `{"blob": "%s"}`, base64.StdEncoding.EncodeToString(raw))
}

// itemSizes writes one record per result size, content and compression
// setting through the DynamoDB store, and reports the item sizes and units
// as internal/capacity counts them (DynamoDB's rules, exactly).
func itemSizes(ctx context.Context, client *dynamodb.Client) ([]itemSizeRow, error) {
	const table = "idem_bench_item_size"
	if _, err := ddbstore.CreateTable(ctx, client, table); err != nil {
		return nil, err
	}
	defer deleteTable(ctx, client, table)
	capt := &capture{API: client}
	var rows []itemSizeRow
	var n atomic.Int64
	for _, size := range []int{1 << 10, 10 << 10, 100 << 10} {
		for _, content := range []string{"json", "random"} {
			result := jsonResult(size)
			if content == "random" {
				result = randomResult(size)
			}
			for _, comp := range []string{"default", "off"} {
				opts := []ddbstore.Option{}
				if comp == "off" {
					opts = append(opts, ddbstore.WithCompressionThreshold(ddbstore.NoCompression))
				}
				st, err := ddbstore.New(capt, table, opts...)
				if err != nil {
					return nil, err
				}
				r, err := idem.New(st, runnerOptions()...)
				if err != nil {
					return nil, err
				}
				ev := makeEvent("item_size", fmt.Sprintf("%s-%d-%s", content, size, comp), int(n.Add(1)), 100)
				ev.result = result
				capt.take()
				var execs atomic.Int64
				if _, err := r.Do(ctx, ev.key, ev.payload, handler(ev, false, &execs, 0)); err != nil {
					return nil, err
				}
				w := capt.take()
				if w.reserve == 0 || w.complete == 0 {
					return nil, fmt.Errorf("a first execution wrote items of %+v bytes, want a reservation and a completion", w)
				}
				compName := "gzip above 4096 B (default)"
				if comp == "off" {
					compName = "off"
				}
				rows = append(rows, itemSizeRow{
					ResultBytes: len(result), Content: content, Compression: compName,
					ReserveBytes: w.reserve, CompleteBytes: w.complete, ResultItemBytes: w.result,
					ReserveWCU: units(capacity.WriteUnits(w.reserve)), CompleteWCU: units(capacity.WriteUnits(max(w.reserve, w.complete))),
					ResultItemWCU: units(capacity.WriteUnits(w.result)),
					DuplicateWCU:  units(capacity.WriteUnits(w.complete)), GetRCU: units(capacity.ReadUnits(w.complete, true)),
				})
			}
		}
	}
	return rows, nil
}
