package capacity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// recorded is one request and its answer, as sent on the wire.
type recorded struct {
	op        string
	req, resp []byte
	status    int
}

// wire is an http.RoundTripper that keeps every DynamoDB request and answer.
type wire struct {
	inner http.RoundTripper
	mu    sync.Mutex
	log   []recorded // guarded by mu
}

func (w *wire) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := w.inner.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	rb, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	target := r.Header.Get("X-Amz-Target")
	w.mu.Lock()
	w.log = append(w.log, recorded{op: target[strings.LastIndexByte(target, '.')+1:], req: body, resp: rb, status: resp.StatusCode})
	w.mu.Unlock()
	return resp, nil
}

// take returns the requests recorded since the last call.
func (w *wire) take() []recorded {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.log
	w.log = nil
	return out
}

// serverClient returns a client of the test server whose requests w records,
// or fails the test when there is no server (skipped only when
// IDEM_SKIP_INTEGRATION=1 asks).
func serverClient(t *testing.T, w *wire) *dynamodb.Client {
	t.Helper()
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1: DynamoDB integration test skipped")
	}
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Fatal("no DynamoDB endpoint: run under `go run ./internal/cmd/testenv -server dynalite`, or set IDEM_SKIP_INTEGRATION=1")
	}
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("us-east-1"))
	if err != nil {
		t.Fatal(err)
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.RetryMaxAttempts = 1
		o.HTTPClient = &http.Client{Transport: w, Timeout: 30 * time.Second}
	})
}

func sv(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func nv(s string) types.AttributeValue { return &types.AttributeValueMemberN{Value: s} }
func bv(n int) types.AttributeValue {
	return &types.AttributeValueMemberB{Value: bytes.Repeat([]byte{7}, n)}
}

// calls makes one call of every operation the Ledger charges, each asking
// for ReturnConsumedCapacity, on a fresh table.
func calls(ctx context.Context, c *dynamodb.Client, table string) error {
	total := types.ReturnConsumedCapacityTotal
	key := func(pk string) map[string]types.AttributeValue { return map[string]types.AttributeValue{"pk": sv(pk)} }
	numbers := map[string]types.AttributeValue{"pk": sv("numbers"), "a": nv("0"), "b": nv("12"), "c": nv("-1.5"),
		"d": nv("1764676830000"), "e": nv("0.000123"), "f": nv("1e30"), "g": nv("123456789012345678901234567890"),
		"l":  &types.AttributeValueMemberL{Value: []types.AttributeValue{nv("7"), sv("x"), &types.AttributeValueMemberNULL{Value: true}}},
		"m":  &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberBOOL{Value: true}, "bin": bv(2500)}},
		"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bb"}}, "ns": &types.AttributeValueMemberNS{Value: []string{"1", "22.5"}}}
	ops := []func() error{
		func() error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, ReturnConsumedCapacity: total, Item: numbers})
			return err
		},
		func() error { // smaller than the item it replaces: billed on the larger
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, ReturnConsumedCapacity: total, Item: key("numbers")})
			return err
		},
		func() error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, ReturnConsumedCapacity: total,
				Item: map[string]types.AttributeValue{"pk": sv("k"), "status": sv("in_progress"), "n": nv("1")}})
			return err
		},
	}
	for i := range 6 { // steps: a list that grows past 4 KB
		ops = append(ops, func() error {
			_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key("k"), ReturnConsumedCapacity: total,
				UpdateExpression:         aws.String("SET #s = list_append(if_not_exists(#s, :none), :step), #n = #n + :one ADD #names :name"),
				ExpressionAttributeNames: map[string]string{"#s": "steps", "#n": "n", "#names": "names"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":none": &types.AttributeValueMemberL{}, ":one": nv("1"),
					":name": &types.AttributeValueMemberSS{Value: []string{fmt.Sprint("step", i%3)}},
					":step": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
						"n": sv(fmt.Sprint("step", i)), "r": bv(900)}}}}}})
			return err
		})
	}
	ops = append(ops,
		func() error {
			_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key("k"), ReturnConsumedCapacity: total,
				UpdateExpression: aws.String("REMOVE #s SET #st = :done"), ExpressionAttributeNames: map[string]string{"#s": "steps", "#st": "status"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":done": sv("succeeded")}})
			return err
		},
		func() error {
			_, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key("numbers"), ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: total})
			return err
		},
		func() error {
			_, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key("absent"), ReturnConsumedCapacity: total})
			return err
		},
		func() error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, ReturnConsumedCapacity: total, Item: numbers})
			return err
		},
		func() error { // refused: a failed condition
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, ReturnConsumedCapacity: total, Item: key("numbers"),
				ConditionExpression: aws.String("attribute_not_exists(pk)")})
			return wantCCF(err)
		},
		func() error {
			_, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{ReturnConsumedCapacity: total, RequestItems: map[string][]types.WriteRequest{table: {
				{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{"pk": sv("b1"), "v": bv(497)}}},
				{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{"pk": sv("b2"), "v": bv(3581)}}},
				{DeleteRequest: &types.DeleteRequest{Key: key("absent")}},
			}}})
			return err
		},
		func() error {
			_, err := c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{ReturnConsumedCapacity: total, RequestItems: map[string]types.KeysAndAttributes{table: {
				Keys: []map[string]types.AttributeValue{key("b1"), key("b2"), key("numbers")}, ConsistentRead: aws.Bool(true)}}})
			return err
		},
		func() error {
			_, err := c.Query(ctx, &dynamodb.QueryInput{TableName: &table, ReturnConsumedCapacity: total, KeyConditionExpression: aws.String("pk = :pk"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":pk": sv("numbers")}})
			return err
		},
		func() error {
			_, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: key("numbers"), ReturnConsumedCapacity: total})
			return err
		},
		func() error {
			_, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: key("absent"), ReturnConsumedCapacity: total})
			return err
		},
		func() error { // a transaction; dynalite does not know the operation
			_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{ReturnConsumedCapacity: total, TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: &table, Item: map[string]types.AttributeValue{"pk": sv("t1"), "v": bv(1500)}}},
				{Put: &types.Put{TableName: &table, Item: key("t2")}},
			}})
			if err != nil && os.Getenv("IDEM_DDB_SERVER") == "dynalite" {
				return nil
			}
			return err
		},
	)
	for i, op := range ops {
		if err := op(); err != nil {
			return fmt.Errorf("call %d: %w", i, err)
		}
	}
	return nil
}

func wantCCF(err error) error {
	var ccf *types.ConditionalCheckFailedException
	if err == nil || !errors.As(err, &ccf) {
		return fmt.Errorf("want a ConditionalCheckFailedException, got %v", err)
	}
	return nil
}

// TestAgainstServer charges every call of calls with a Ledger and compares
// the units with what the server reported. dynalite computes them by the
// same rules: they must agree wherever it reports. moto reports constants:
// the test pins them, so that a moto that starts computing them is noticed.
func TestAgainstServer(t *testing.T) {
	w := &wire{inner: http.DefaultTransport}
	c := serverClient(t, w)
	ctx := context.Background()
	table := newTable(t, c)
	l := NewLedger()
	for _, r := range w.take() {
		if _, err := l.Charge(r.op, r.req, r.resp, r.status); err != nil {
			t.Fatal(err)
		}
	}
	if err := calls(ctx, c, table); err != nil {
		t.Fatal(err)
	}
	server := os.Getenv("IDEM_DDB_SERVER")
	for i, r := range w.take() {
		ch, err := l.Charge(r.op, r.req, r.resp, r.status)
		if err != nil {
			t.Fatalf("request %d (%s): %v", i, r.op, err)
		}
		if ch.Approximate {
			t.Errorf("request %d (%s): approximate", i, r.op)
		}
		t.Logf("%-18s status %d computed %4g reported %v %g", r.op, r.status, ch.Units(), ch.HasReport, ch.Reported)
		if msg := checkReport(server, r, ch); msg != "" {
			t.Errorf("request %d (%s, status %d): %s", i, r.op, r.status, msg)
		}
	}
}

// motoReports are the constants moto 5.2.5 reports as ConsumedCapacity
// (BatchGetItem: 1 per key, and calls asks for 3).
var motoReports = map[string]float64{"PutItem": 1, "UpdateItem": 0.5, "GetItem": 0.5, "DeleteItem": 1, "Query": 1,
	"BatchWriteItem": 1, "BatchGetItem": 3}

// checkReport compares a charge with the server's report, by server.
func checkReport(server string, r recorded, ch Charge) string {
	switch {
	case r.status != 200 && ch.HasReport:
		return "a report with an error"
	case r.status != 200 && r.op == "PutItem" && (!ch.ConditionFailed || ch.Write != 3):
		return fmt.Sprintf("a failed condition must be charged the item's 3 units: %+v", ch)
	case r.status != 200 && r.op == "TransactWriteItems" && (server != "dynalite" || ch.Units() != 0):
		return fmt.Sprintf("only dynalite refuses transactions, charged nothing: %+v", ch)
	case r.status != 200:
		return ""
	case server == "dynalite" && r.op == "TransactWriteItems":
		return "dynalite accepted a transaction"
	case server == "dynalite" && !ch.HasReport:
		return "dynalite did not report"
	case server == "dynalite" && ch.Reported != ch.Units():
		return fmt.Sprintf("dynalite reported %g, computed %g", ch.Reported, ch.Units())
	case server == "moto" && r.op == "TransactWriteItems" && ch.HasReport:
		return "moto reported units for a transaction"
	case server == "moto" && r.op != "TransactWriteItems" && ch.Reported != motoReports[r.op]:
		return fmt.Sprintf("moto reported %g, not its constant %g (computed %g): moto computes units now?", ch.Reported, motoReports[r.op], ch.Units())
	}
	return ""
}

// TestSizeBoundariesAgainstDynalite puts items whose computed size is
// exactly 1024 bytes, then 1025, for values of every shape: dynalite must
// report 1 write unit, then 2. A size off by one byte either way fails. It
// runs on dynalite only (IDEM_DDB_SERVER), the server that computes units.
func TestSizeBoundariesAgainstDynalite(t *testing.T) {
	w := &wire{inner: http.DefaultTransport}
	c := serverClient(t, w)
	if s := os.Getenv("IDEM_DDB_SERVER"); s != "dynalite" {
		t.Skipf("IDEM_DDB_SERVER=%q: only dynalite reports units computed from the item", s)
	}
	ctx := context.Background()
	table := newTable(t, c)
	values := map[string]types.AttributeValue{
		"zero": nv("0"), "small": nv("7"), "two digits": nv("12"), "odd": nv("12345"), "even, odd exponent": nv("1234"),
		"even, even exponent": nv("1.2"), "fraction": nv("0.000123"), "negative": nv("-98.76"), "epoch ms": nv("1764676830000"),
		"exponent": nv("1.5E+20"), "38 digits": nv("12345678901234567890123456789012345678"),
		"list": &types.AttributeValueMemberL{Value: []types.AttributeValue{nv("7"), sv("xy"), &types.AttributeValueMemberNULL{Value: true},
			&types.AttributeValueMemberL{}}},
		"map": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberBOOL{Value: true},
			"nested": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"n": nv("100")}}}},
		"string set": &types.AttributeValueMemberSS{Value: []string{"a", "bb", "ccc"}},
		"number set": &types.AttributeValueMemberNS{Value: []string{"1", "22.5", "-3"}},
		"binary set": &types.AttributeValueMemberBS{Value: [][]byte{{1, 2}, {3}}},
	}
	for name, v := range values {
		for extra, want := range map[int]float64{0: 1, 1: 2} {
			item := map[string]types.AttributeValue{"pk": sv("b"), "v": v}
			pad := 1024 + extra - Size(FromItem(item)) - len("pad")
			item["pad"] = bv(pad)
			if got := Size(FromItem(item)); got != 1024+extra {
				t.Fatalf("%s: built an item of %d bytes", name, got)
			}
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
			if err != nil {
				t.Fatal(err)
			}
			rec := w.take()
			var a answer
			if err := json.Unmarshal(rec[len(rec)-1].resp, &a); err != nil {
				t.Fatal(err)
			}
			if got, _ := a.reported(); got != want {
				t.Errorf("%s: an item of %d bytes by our count: dynalite reports %g write units, want %g", name, 1024+extra, got, want)
			}
			// Replace it with a 1-byte item, so that the next put is billed on its own size.
			if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{"pk": sv("b")}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// dynalite counts strings in UTF-16 code units, DynamoDB in UTF-8 bytes:
	// 400 euro signs are 1200 bytes by DynamoDB's count, 400 by dynalite's.
	item := map[string]types.AttributeValue{"pk": sv("u"), "s": sv(strings.Repeat("€", 400))}
	if got := Size(FromItem(item)); got != 2+1+1+1200 {
		t.Fatalf("euro item: %d bytes", got)
	}
	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal}); err != nil {
		t.Fatal(err)
	}
	rec := w.take()
	var a answer
	if err := json.Unmarshal(rec[len(rec)-1].resp, &a); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.reported(); got != 1 {
		t.Errorf("dynalite reports %g write units for 400 euro signs: it counts UTF-8 now (update the package documentation)", got)
	}
}

// newTable creates a table with a string partition key pk, deleted when the
// test ends, and waits until it is active.
func newTable(t *testing.T, c *dynamodb.Client) string {
	t.Helper()
	ctx := context.Background()
	table := fmt.Sprintf("capacity_%d", time.Now().UnixNano())
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: &table, BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &table}) })
	waiter := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, 200*time.Millisecond
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &table}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return table
}
