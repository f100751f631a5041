package sim_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/blob"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/sim"
)

// previousDDB is the DynamoDB store able to rewrite a record in its
// previous release's encoding (sim.PreviousEncoding): v0.1.0 kept a
// record's steps in the record itself (a map of "n" and "r" each, budgeted
// at twice the name, the result and 16 bytes) where this release keeps
// them in step items, referenced from the record, with steps_until; and it
// kept every result that fits the item in the record, where this release
// keeps one that would make the record pass 1 KB in a result item.
type previousDDB struct {
	*ddbstore.Store
	reader *ddbstore.Store  // the same table through the checks' client
	client *dynamodb.Client // the checks' client, which retries
	sweep  *sweepCursor
}

// sweepCursor is where a sweep of previousDDB's table goes on, and how
// many result items it deleted.
type sweepCursor struct {
	next    string
	results int
}

// SweepPage implements sim.ExpiredSweeper as idem sweep does, through the
// checks' client: one page of ScanExpired, then DeleteExpired for each
// item; an item live again since the scan (idem.ErrRecordChanged) is left.
func (p previousDDB) SweepPage(ctx context.Context, now time.Time) ([]string, error) {
	page, err := p.reader.ScanExpired(ctx, ddbstore.ListInput{Limit: 100, Next: p.sweep.next}, now)
	if err != nil {
		return nil, err
	}
	p.sweep.next = page.Next
	var keys []string
	for _, e := range page.Items {
		switch err := p.reader.DeleteExpired(ctx, e, now); {
		case err == nil && e.Result:
			p.sweep.results++
		case err == nil && !e.Step:
			keys = append(keys, e.Key)
		case err != nil && !errors.Is(err, idem.ErrRecordChanged):
			return keys, err
		}
	}
	return keys, nil
}

func (p previousDDB) Downgrade(ctx context.Context, key string) error {
	raw, err := p.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(p.Table()), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{ddbstore.DefaultKeyAttribute: &types.AttributeValueMemberS{Value: key}}})
	if err != nil {
		return err
	}
	if st, _ := raw.Item[ddbstore.AttrStatus].(*types.AttributeValueMemberS); st != nil && st.Value == string(core.StatusSucceeded) &&
		raw.Item[ddbstore.AttrResultItem] == nil {
		return nil // a success this release writes as v0.1.0 did (its result in the record, or in the blob store)
	}
	// The record with its steps or its result item's result, read at the
	// epoch: live whatever its retention in simulated time.
	rec, err := p.reader.Get(ctx, key, time.Unix(0, 0))
	if errors.Is(err, idem.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if rec.Status == core.StatusSucceeded {
		return p.inline(ctx, key, rec)
	}
	names := map[string]string{"#k": ddbstore.DefaultKeyAttribute, "#until": ddbstore.AttrStepsUntil}
	update, values := "REMOVE #until", map[string]types.AttributeValue{}
	if len(rec.Steps) > 0 {
		list, size := make([]types.AttributeValue, len(rec.Steps)), 0
		for i, st := range rec.Steps {
			m := map[string]types.AttributeValue{"n": &types.AttributeValueMemberS{Value: st.Name}}
			if len(st.Result) > 0 {
				m["r"] = &types.AttributeValueMemberB{Value: st.Result}
			}
			list[i], size = &types.AttributeValueMemberM{Value: m}, size+2*len(st.Name)+len(st.Result)+16
		}
		names["#steps"], names["#size"] = ddbstore.AttrSteps, ddbstore.AttrStepsSize
		values[":steps"], values[":size"] = &types.AttributeValueMemberL{Value: list}, &types.AttributeValueMemberN{Value: fmt.Sprint(size)}
		update = "SET #steps = :steps, #size = :size " + update
	} else {
		values = nil
	}
	_, err = p.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(p.Table()),
		Key:                       map[string]types.AttributeValue{ddbstore.DefaultKeyAttribute: &types.AttributeValueMemberS{Value: key}},
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("attribute_exists(#k)"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	return err
}

// inline rewrites rec, a succeeded record whose result is kept in a result
// item, with its result in the record, raw, as v0.1.0 wrote it (the
// result item is left to end with the record's retention); other
// successes are left as they are.
func (p previousDDB) inline(ctx context.Context, key string, rec core.Record) error {
	if rec.ResultOmitted || len(rec.Result) == 0 {
		return nil
	}
	_, err := p.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(p.Table()),
		Key:              map[string]types.AttributeValue{ddbstore.DefaultKeyAttribute: &types.AttributeValueMemberS{Value: key}},
		UpdateExpression: aws.String("SET #res = :res REMOVE #rit, #sha, #size, #omit, #enc"),
		// Only a record that references a result item, still this one.
		ConditionExpression: aws.String("attribute_exists(#rit) AND #tok = :tok"),
		ExpressionAttributeNames: map[string]string{"#res": ddbstore.AttrResult, "#rit": ddbstore.AttrResultItem, "#sha": ddbstore.AttrResultSHA256,
			"#size": ddbstore.AttrResultSize, "#omit": ddbstore.AttrResultOmitted, "#enc": ddbstore.AttrResultEncoding, "#tok": ddbstore.AttrLeaseToken},
		ExpressionAttributeValues: map[string]types.AttributeValue{":res": &types.AttributeValueMemberB{Value: rec.Result},
			":tok": &types.AttributeValueMemberS{Value: rec.LeaseToken}},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	return err
}

// ddbStager stages Puts of new items into its own table (ddbstore.Stage),
// each under attribute_not_exists, and for a refused write a
// ConditionCheck that an absent item exists.
type ddbStager struct {
	client *dynamodb.Client
	table  string
}

func (d ddbStager) itemKey(id string, i int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("%s#%d", id, i)}}
}

func (d ddbStager) Stage(ctx context.Context, id string, n int, refused bool) error {
	items := make([]types.TransactWriteItem, n)
	for i := range items {
		items[i] = types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(d.table), Item: d.itemKey(id, i),
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}}
	}
	if refused {
		items[n-1] = types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: aws.String(d.table), Key: d.itemKey(id, -1),
			ConditionExpression: aws.String("attribute_exists(pk)"),
		}}
	}
	return ddbstore.Stage(ctx, items...)
}

func (d ddbStager) Landed(ctx context.Context, id string) (int, error) {
	n := 0
	for i := range 2 {
		out, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: d.itemKey(id, i), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return 0, err
		}
		if out.Item != nil {
			n++
		}
	}
	return n, nil
}

// TestSimDynamoAll runs every capability together over the DynamoDB store
// on the server at AWS_ENDPOINT_URL_DYNAMODB (dynalite, which has no
// transactions and so no staged writes, or moto): the mixed services and
// services drawn from the seed, with steps, staged writes committed in
// transactions, large results kept in a faulted blob store, records in the
// previous encoding, an operator's releases, a sweep of the records past
// retention, and every fault.
func TestSimDynamoAll(t *testing.T) {
	dynamoEndpoint(t)
	store, client := newDynamoStore(t), newDynamoClient(t)
	checker := retrying(client) // the checks' own reads and rewrites
	staging := sim.Staging()
	cfg := memConfig(t, 14, 4000, sim.AllFaults(), sim.Steps(), staging, sim.Renewing(), sim.Waiting())
	if transactions(t, checker) {
		cfg.Stager = ddbStager{client: checker, table: newTable(t, client, "idem-sim-staged-")}
	} else {
		t.Logf("%s has no TransactWriteItems: no staged writes", os.Getenv("IDEM_DDB_SERVER"))
		cfg.Services[1].Stage = 0
	}
	cfg.Draw = 6
	cfg.Faults.Downgrade = 0.5
	if !raceEnabled && *nFlag == 0 {
		cfg.Deliveries = 4000
	}
	cfg.NewStore = nil
	sweep := &sweepCursor{}
	cfg.NewStoreBlob = func(b blob.Store) idem.Store {
		s, err := ddbstore.New(client, store.Table(), ddbstore.WithLargeResults(b))
		if err != nil {
			t.Fatal(err)
		}
		reader, err := ddbstore.New(checker, store.Table())
		if err != nil {
			t.Fatal(err)
		}
		return previousDDB{Store: s, reader: reader, client: checker, sweep: sweep}
	}
	cfg.StoreResolution = time.Second
	res := runWith(t, cfg, "go run ./internal/cmd/testenv -server "+cmp.Or(os.Getenv("IDEM_DDB_SERVER"), "dynalite")+" -- ")
	st := res.Stats
	if cfg.Stager != nil && st.StagedLanded == 0 {
		t.Errorf("stats %+v: no staged write landed", st)
	}
	if st.StepsRecorded == 0 || st.Renewals == 0 || st.Downgrades == 0 || st.Releases == 0 || st.Swept == 0 || st.SweepErrors > 0 {
		t.Errorf("stats %+v: the run does not exercise steps, staged writes, renewals, the previous encoding, releases and a sweep without errors", st)
	}
	// Results of 1 KB and more pass the record's KB: kept in result items
	// (or, past an item's limit, in the blob store). The full run has some;
	// a shorter one (-sim.n, the race detector's) may have none.
	n := resultItems(t, store) + sweep.results
	t.Logf("%d large results recorded, %d result items written (%d swept)", st.LargeResults, n, sweep.results)
	if !raceEnabled && *nFlag == 0 && n == 0 {
		t.Errorf("stats %+v: the run wrote no result item: it does not exercise results kept apart", st)
	}
}

// resultItems counts the result items in store's table.
func resultItems(t *testing.T, store *ddbstore.Store) int {
	t.Helper()
	n := 0
	in := ddbstore.ListInput{Limit: 1000}
	for {
		page, err := store.List(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		n += page.ResultItems
		if page.Next == "" {
			return n
		}
		in.Next = page.Next
	}
}

// transactions reports whether the server answers TransactWriteItems
// (dynalite does not: UnknownOperationException).
func transactions(t *testing.T, client *dynamodb.Client) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table := newTable(t, client, "idem-sim-probe-")
	_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: &types.Put{
		TableName: aws.String(table), Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "probe"}},
	}}}})
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "UnknownOperationException" {
		return false
	}
	if err != nil {
		t.Fatalf("TransactWriteItems = %v", err)
	}
	return true
}
