package capacity

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Charge is what one request costs: the units computed by the package's
// rules, and the units the server reported, if it did.
type Charge struct {
	// Op is the operation (X-Amz-Target without its prefix: "PutItem").
	Op string
	// Read and Write are the computed units.
	Read, Write float64
	// Reported is the server's ConsumedCapacity (summed over tables), valid
	// when HasReport.
	Reported  float64
	HasReport bool
	// ConditionFailed reports that the request's condition failed: a
	// ConditionalCheckFailedException, or a transaction cancelled by one.
	ConditionFailed bool
	// Approximate reports that the computed units lack the item before a
	// write, or an update the package could not apply.
	Approximate bool
}

// Units returns the computed units of c: read units for a read, write units
// for a write.
func (c Charge) Units() float64 { return c.Read + c.Write }

// isWrite reports whether op is charged in write units.
func isWrite(op string) bool {
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems":
		return true
	}
	return false
}

// UnknownTableError is returned for a request on a table whose key schema
// the Ledger has not learnt (from a CreateTable request or a DescribeTable
// answer). Found with errors.As.
type UnknownTableError struct{ Table string }

// Error names the table.
func (e *UnknownTableError) Error() string {
	return fmt.Sprintf("capacity: key schema of table %q unknown", e.Table)
}

// Ledger charges requests and keeps a shadow of the items they write. The
// zero value is not usable: NewLedger makes one. Safe for concurrent use;
// see the package documentation for the order of requests on one item.
type Ledger struct {
	mu     sync.Mutex
	tables map[string]*table // guarded by mu
}

// table is one table's key schema and shadow items.
type table struct {
	hash, sort string
	items      map[string]Item
}

// NewLedger returns an empty Ledger.
func NewLedger() *Ledger { return &Ledger{tables: map[string]*table{}} }

// Learn records a table's key schema (sortKey "" for none), keeping the
// items already shadowed if the schema is unchanged.
func (l *Ledger) Learn(name, hashKey, sortKey string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.tables[name]; ok && t.hash == hashKey && t.sort == sortKey {
		return
	}
	l.tables[name] = &table{hash: hashKey, sort: sortKey, items: map[string]Item{}}
}

// Known reports whether the Ledger knows the table's key schema.
func (l *Ledger) Known(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tables[name] != nil
}

// Items returns the number of items shadowed in a table.
func (l *Ledger) Items(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.tables[name]; t != nil {
		return len(t.items)
	}
	return 0
}

// keyOf returns the shadow key of the item (or key) it in t.
func (t *table) keyOf(it Item) string {
	h, s := it[t.hash], it[t.sort]
	return fmt.Sprintf("%d:%s\x00%d:%s", h.Kind, h.Scalar, s.Kind, s.Scalar)
}

// Request is a request parsed once for Keys and Charge.
type Request struct {
	op string
	r  request
}

// ParseRequest parses the body of a request of operation op (X-Amz-Target
// without its prefix: "PutItem").
func ParseRequest(op string, body []byte) (*Request, error) {
	pr := &Request{op: op}
	if err := json.Unmarshal(body, &pr.r); err != nil {
		return nil, fmt.Errorf("capacity: %s request: %w", op, err)
	}
	return pr, nil
}

// Keys returns the items a request touches, as "table\x00key" strings, in
// order and without repeats: the caller serializes requests with a common
// item. A request on a table the Ledger does not know gives an
// *UnknownTableError; an operation on no item gives none.
func (l *Ledger) Keys(pr *Request) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, ir := range pr.r.items(pr.op) {
		t := l.tables[ir.TableName]
		if t == nil {
			return nil, &UnknownTableError{Table: ir.TableName}
		}
		out = append(out, ir.TableName+"\x00"+t.keyOf(ir.key()))
	}
	sort.Strings(out)
	return compact(out), nil
}

func compact(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// Charge computes what a request of operation op cost from its body (req),
// the server's answer (resp) and HTTP status, as ChargeRequest does.
func (l *Ledger) Charge(op string, req, resp []byte, status int) (Charge, error) {
	pr, err := ParseRequest(op, req)
	if err != nil {
		return Charge{Op: op}, err
	}
	return l.ChargeRequest(pr, resp, status)
}

// ChargeRequest computes what a parsed request cost from the server's
// answer (resp) and HTTP status, and updates the shadow with the writes the
// server applied. Operations other than item reads and writes cost nothing
// (CreateTable and DescribeTable teach the Ledger a key schema; DeleteTable
// forgets a table). A request on a table the Ledger does not know gives an
// *UnknownTableError.
func (l *Ledger) ChargeRequest(pr *Request, resp []byte, status int) (Charge, error) {
	op := pr.op
	var a answer
	if len(resp) > 0 {
		if err := json.Unmarshal(resp, &a); err != nil {
			return Charge{Op: op}, fmt.Errorf("capacity: %s answer: %w", op, err)
		}
	}
	a.status = status
	c := Charge{Op: op}
	c.Reported, c.HasReport = a.reported()
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.charge(&c, &pr.r, &a)
	if !isWrite(op) {
		c.Read, c.Write = c.Read+c.Write, 0
	}
	return c, err
}

func (l *Ledger) charge(c *Charge, r *request, a *answer) error {
	switch c.Op {
	case "CreateTable", "DescribeTable", "DeleteTable":
		l.schema(c.Op, r, a)
		return nil
	case "PutItem", "UpdateItem", "DeleteItem":
		return l.write(c, c.Op, &r.itemRequest, a.outcome())
	case "GetItem":
		return l.get(c, &r.itemRequest, a)
	case "BatchWriteItem":
		return l.batchWrite(c, r, a)
	case "BatchGetItem":
		return l.batchGet(c, r, a)
	case "Query", "Scan":
		if a.outcome() == applied {
			size := 0
			for _, it := range a.Items {
				size += Size(it)
			}
			c.Read = ReadUnits(size, r.ConsistentRead)
			c.Approximate = a.ScannedCount != a.Count
		}
		return nil
	case "TransactWriteItems":
		return l.transactWrite(c, r, a)
	case "TransactGetItems":
		return l.transactGet(c, r, a)
	}
	return nil
}

// schema learns or forgets a table's key schema.
func (l *Ledger) schema(op string, r *request, a *answer) {
	name, ks := r.TableName, r.KeySchema
	switch op {
	case "DeleteTable":
		if a.outcome() == applied {
			delete(l.tables, name)
		}
		return
	case "DescribeTable":
		if a.Table == nil {
			return
		}
		name, ks = a.Table.TableName, a.Table.KeySchema
	}
	var hash, sortKey string
	for _, k := range ks {
		switch strings.ToUpper(k.KeyType) {
		case "HASH":
			hash = k.AttributeName
		case "RANGE":
			sortKey = k.AttributeName
		}
	}
	if hash == "" || name == "" {
		return
	}
	if t, ok := l.tables[name]; ok && t.hash == hash && t.sort == sortKey {
		return
	}
	l.tables[name] = &table{hash: hash, sort: sortKey, items: map[string]Item{}}
}

func (l *Ledger) table(name string) (*table, error) {
	t := l.tables[name]
	if t == nil {
		return nil, &UnknownTableError{Table: name}
	}
	return t, nil
}
