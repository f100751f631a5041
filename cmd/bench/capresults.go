package main

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
)

// resultSizes are the result sizes whose record writes are measured: JSON
// of base64 (randomResult), which gzip compresses to about three quarters.
var resultSizes = []struct {
	name string
	size int
}{{"100B", 100}, {"4KB", 4 << 10}, {"64KB", 64 << 10}, {"300KB", 300 << 10}}

// resultItemAttr is the record attribute that references a result kept in
// an item of its own (ddbstore.AttrResultItem; named here so that the same
// measurement runs on a store without result items).
const resultItemAttr = "result_item"

// workUnits are the write and read units one piece of work was charged.
type workUnits struct{ write, read float64 }

// unitsOfWork returns the units fn is charged.
func (e *capEnv) unitsOfWork(fn func() error) (workUnits, error) {
	k0, err := e.proxy.Capacity(e.ctx)
	if err != nil {
		return workUnits{}, err
	}
	if err := fn(); err != nil {
		return workUnits{}, err
	}
	k1, err := e.proxy.Capacity(e.ctx)
	if err != nil {
		return workUnits{}, err
	}
	d := k1.Totals.Sum().Sub(k0.Totals.Sum())
	return workUnits{write: d.Write, read: d.Read}, nil
}

// resultRows measures, for each result size, the writes of a record that
// holds a succeeded result of that size: the first run and a duplicate
// through a runner, a reservation once its retention has ended, and one by
// one the reservation, a lease renewal, the
// completion (the record's write apart from the result's own), the
// result's own write, and an operator's release.
func resultRows(e *capEnv) ([]capRow, error) {
	r, err := e.runner()
	if err != nil {
		return nil, err
	}
	var rows []capRow
	for _, rs := range resultSizes {
		name := "result_" + rs.name
		result := randomResult(rs.size)
		sum := resultSums{}
		row, err := e.measure(name, "execution", e.events, func() error {
			for i := range e.events {
				if err := e.resultExecution(r, name, i, result, sum); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		per := func(k string) float64 { return round(sum[k].write/float64(e.events), 3) }
		for _, k := range []string{"first_run", "duplicate", "reservation_past_retention", "reservation", "renewal", "completion_record", "result_own_write", "release"} {
			row.Figures[k+"_write_units"] = per(k)
		}
		row.Figures["duplicate_read_units"] = round(sum["duplicate"].read/float64(e.events), 3)
		row.Figures["result_bytes"] = len(result)
		row.Note = fmt.Sprintf("a %s JSON result (base64): first run and duplicate through a runner; then the reservation, "+
			"a reservation past retention, a renewal, the completion's write of the record (without the result's own write) and a release, each alone", rs.name)
		rows = append(rows, row)
	}
	return rows, nil
}

// resultSums are the units of each piece of work, summed over events.
type resultSums map[string]workUnits

func (s resultSums) add(what string, u workUnits) {
	s[what] = workUnits{s[what].write + u.write, s[what].read + u.read}
}

// resultExecution measures one event of name with result: the first run
// and a duplicate through r, then the same writes one by one on a key of
// its own (resultWrites), adding each one's units to sum.
func (e *capEnv) resultExecution(r *idem.Runner, name string, i int, result []byte, sum resultSums) error {
	ev := makeEvent(name, "cap", i, 100+i)
	for _, c := range []struct {
		what string
		want idem.Verdict
	}{{"first_run", idem.Executed}, {"duplicate", idem.Replayed}} {
		u, err := e.unitsOfWork(func() error {
			out, err := r.Do(e.ctx, ev.key, ev.payload, func(context.Context) ([]byte, error) { return result, nil })
			if out.Verdict != c.want || len(out.Result) != len(result) {
				return fmt.Errorf("%s: got %s with %d bytes (%v), want %s with %d", c.what, out.Verdict, len(out.Result), err, c.want, len(result))
			}
			return nil
		})
		if err != nil {
			return err
		}
		sum.add(c.what, u)
	}
	// A new execution once the record's retention has ended: its
	// reservation replaces the succeeded record, and is billed on it.
	later := time.Now().Add(retention + time.Minute)
	u, err := e.unitsOfWork(func() error {
		_, _, err := e.store.Acquire(e.ctx, core.Reserve(ev.key, "fp", "fedcba9876543210fedcba9876543210", nil, later, later.Add(time.Minute), retention),
			later, core.Policy{MaxAttempts: 1})
		return err
	})
	if err != nil {
		return fmt.Errorf("reservation past retention: %w", err)
	}
	sum.add("reservation_past_retention", u)
	return e.resultWrites(ev.key+"-alone", result, sum)
}

// resultWrites makes, on key, the writes of an execution that returns
// result one by one, adding each one's units to sum: the reservation, a
// renewal, the completion and a release. The completion's units are its
// record's write alone: a result item it wrote is written again as it was
// (billed the same), and those units are the result's own write, taken out
// of the completion's.
func (e *capEnv) resultWrites(key string, result []byte, sum resultSums) error {
	now := time.Now()
	var rec, done core.Record
	steps := []struct {
		what string
		fn   func() error
	}{
		{"reservation", func() (err error) {
			rec, _, err = e.store.Acquire(e.ctx, core.Reserve(key, "fp", "0123456789abcdef0123456789abcdef", nil, now, now.Add(time.Minute), retention),
				now, core.Policy{MaxAttempts: 1})
			return err
		}},
		{"renewal", func() (err error) {
			rec, err = e.store.RenewLease(e.ctx, rec, now.Add(2*time.Minute), now.Add(time.Second))
			return err
		}},
		{"completion_record", func() (err error) {
			done, err = e.store.Complete(e.ctx, core.Succeed(rec, result, now.Add(2*time.Second), retention))
			return err
		}},
		{"result_own_write", func() error { return e.rewriteResultItem(key) }},
		{"release", func() error { return e.store.Release(e.ctx, done) }},
	}
	for _, st := range steps {
		u, err := e.unitsOfWork(st.fn)
		if err != nil {
			return fmt.Errorf("%s: %w", st.what, err)
		}
		sum.add(st.what, u)
		if st.what == "result_own_write" {
			sum.add("completion_record", workUnits{write: -u.write}) // its reads are the item's, read to write it again
		}
	}
	return nil
}

// rewriteResultItem writes the result item key's record references again,
// as it is (a PutItem billed as its first write was); none where the
// record references none.
func (e *capEnv) rewriteResultItem(key string) error {
	pk := func(v string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{ddbstore.DefaultKeyAttribute: &types.AttributeValueMemberS{Value: v}}
	}
	out, err := e.client.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table), Key: pk(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return err
	}
	ref, ok := out.Item[resultItemAttr].(*types.AttributeValueMemberB)
	if !ok {
		return nil
	}
	got, err := e.client.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table),
		Key: pk(fmt.Sprintf("%s#result#%x", key, ref.Value)), ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item == nil {
		return fmt.Errorf("reading the result item of %s: %v", key, err)
	}
	_, err = e.client.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: got.Item})
	return err
}
