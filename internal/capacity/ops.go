package capacity

import (
	"encoding/json"
	"fmt"
)

// planned is a write worked out against the shadow: the units it costs and
// the item it leaves (nil: none).
type planned struct {
	t      *table
	key    string
	after  Item
	delete bool
	units  float64
	approx bool
}

// plan works out a put, update, delete or condition check (op) of ir
// against the shadow, without applying it.
func (l *Ledger) plan(op string, ir *itemRequest) (planned, error) {
	t, err := l.table(ir.TableName)
	if err != nil {
		return planned{}, err
	}
	p := planned{t: t, key: t.keyOf(ir.key())}
	before := t.items[p.key]
	switch op {
	case "PutItem":
		p.after = ir.Item
	case "UpdateItem":
		p.after, p.approx = updated(before, ir)
	case "DeleteItem":
		p.delete = true
	case "ConditionCheck":
		p.after = before
	}
	p.units = WriteUnits(max(Size(before), Size(p.after)))
	return p, nil
}

// updated applies ir's update to before; where it cannot, the item is taken
// as unchanged and the result marked approximate.
func updated(before Item, ir *itemRequest) (Item, bool) {
	if ir.UpdateExpression == "" {
		// No update, or the legacy AttributeUpdates, which are not applied.
		return orKey(before, ir.Key), len(ir.AttributeUpdates) > 0
	}
	after, err := ApplyUpdate(before, ir.Key, Update{Expression: ir.UpdateExpression,
		Names: ir.ExpressionAttributeNames, Values: ir.ExpressionAttributeValues})
	if err != nil {
		return orKey(before, ir.Key), true
	}
	return after, false
}

func orKey(it, key Item) Item {
	if it != nil {
		return it
	}
	return key
}

// apply makes a planned write in the shadow.
func (p planned) apply() {
	if p.delete {
		delete(p.t.items, p.key)
		return
	}
	if p.after != nil {
		p.t.items[p.key] = p.after
	}
}

// write charges a PutItem, UpdateItem or DeleteItem.
func (l *Ledger) write(c *Charge, op string, ir *itemRequest, o outcome) error {
	p, err := l.plan(op, ir)
	if err != nil {
		return err
	}
	c.Approximate = p.approx
	switch o {
	case applied:
		c.Write = p.units
		p.apply()
	case conditionFailed:
		c.Write, c.ConditionFailed = p.units, true
	}
	return nil
}

// get charges a GetItem: the shadow's item, or the one answered where the
// shadow has none (marked approximate).
func (l *Ledger) get(c *Charge, ir *itemRequest, a *answer) error {
	t, err := l.table(ir.TableName)
	if err != nil {
		return err
	}
	if a.outcome() != applied {
		return nil
	}
	it := t.items[t.keyOf(ir.Key)]
	if it == nil && len(a.Item) > 0 && string(a.Item) != "null" {
		if err := json.Unmarshal(a.Item, &it); err != nil {
			return fmt.Errorf("capacity: GetItem answer: %w", err)
		}
		c.Approximate = true
	}
	c.Read = ReadUnits(Size(it), ir.ConsistentRead)
	return nil
}

// batchWrite charges each put and delete of a BatchWriteItem but those the
// server left unprocessed.
func (l *Ledger) batchWrite(c *Charge, r *request, a *answer) error {
	if a.outcome() != applied {
		return nil
	}
	skip := map[string]bool{}
	for name, reqs := range a.UnprocessedItems {
		for _, w := range reqs {
			skip[name+"\x00"+l.writeKey(name, w)] = true
		}
	}
	for _, ir := range r.items("BatchWriteItem") {
		op := "PutItem"
		if ir.Item == nil {
			op = "DeleteItem"
		}
		p, err := l.plan(op, ir)
		if err != nil {
			return err
		}
		if skip[ir.TableName+"\x00"+p.key] {
			continue
		}
		c.Write += p.units
		p.apply()
	}
	return nil
}

func (l *Ledger) writeKey(name string, w writeRequest) string {
	t := l.tables[name]
	switch {
	case t == nil:
		return ""
	case w.PutRequest != nil:
		return t.keyOf(w.PutRequest.Item)
	case w.DeleteRequest != nil:
		return t.keyOf(w.DeleteRequest.Key)
	}
	return ""
}

// batchGet charges each key of a BatchGetItem as a GetItem, but those the
// server left unprocessed.
func (l *Ledger) batchGet(c *Charge, r *request, a *answer) error {
	if a.outcome() != applied {
		return nil
	}
	for name, ka := range r.batchGets() {
		t, err := l.table(name)
		if err != nil {
			return err
		}
		skip := map[string]bool{}
		for _, k := range a.UnprocessedKeys[name].Keys {
			skip[t.keyOf(k)] = true
		}
		for _, k := range ka.Keys {
			if key := t.keyOf(k); !skip[key] {
				c.Read += ReadUnits(Size(t.items[key]), ka.ConsistentRead)
			}
		}
	}
	return nil
}

// transactWrite charges twice each action's units; a transaction cancelled
// by a failed condition is charged as if applied (see the package
// documentation), and applied only when the server applied it.
func (l *Ledger) transactWrite(c *Charge, r *request, a *answer) error {
	o := a.outcome()
	if o == notCharged {
		return nil
	}
	var plans []planned
	for _, ti := range r.TransactItems {
		op, ir := transactOp(ti)
		if ir == nil {
			continue
		}
		p, err := l.plan(op, ir)
		if err != nil {
			return err
		}
		plans = append(plans, p)
		c.Write += TransactionFactor * p.units
		c.Approximate = c.Approximate || p.approx
	}
	c.ConditionFailed = o == conditionFailed
	if o == applied {
		for _, p := range plans {
			p.apply()
		}
	}
	return nil
}

// transactOp names a transaction action's operation.
func transactOp(ti transactItem) (string, *itemRequest) {
	switch {
	case ti.Put != nil:
		return "PutItem", ti.Put
	case ti.Update != nil:
		return "UpdateItem", ti.Update
	case ti.Delete != nil:
		return "DeleteItem", ti.Delete
	case ti.ConditionCheck != nil:
		return "ConditionCheck", ti.ConditionCheck
	}
	return "", nil
}

// transactGet charges twice the strongly consistent read of each item.
func (l *Ledger) transactGet(c *Charge, r *request, a *answer) error {
	if a.outcome() == notCharged {
		return nil
	}
	for _, ti := range r.TransactItems {
		if ti.Get == nil {
			continue
		}
		t, err := l.table(ti.Get.TableName)
		if err != nil {
			return err
		}
		c.Read += TransactionFactor * ReadUnits(Size(t.items[t.keyOf(ti.Get.Key)]), true)
	}
	return nil
}
