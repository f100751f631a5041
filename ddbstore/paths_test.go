package ddbstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
)

// The path of each operation, as docs/dynamodb.md's table of it says: each
// row's calls are made against the test server through a transport that
// records every request (its X-Amz-Target and its condition), and must
// send exactly the row's requests, in order, with the conditions the
// page's table of conditions writes out; its IAM column must name exactly
// the actions of those requests.

// pathReq is a request the store sent: its operation and its condition,
// normalized (normalizeCondition).
type pathReq struct{ op, cond string }

// pathRecorder is an http.RoundTripper that records the requests sent while
// it is on, and loses the answer of the next request of one operation (the
// request applied, its answer a 500). Safe for concurrent use.
type pathRecorder struct {
	inner http.RoundTripper
	mu    sync.Mutex
	on    bool      // guarded by mu
	reqs  []pathReq // guarded by mu
	lose  string    // guarded by mu: the operation whose next answer is lost
}

func (p *pathRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	op := operation(req)
	body, err := bufferRequest(req)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.on {
		p.reqs = append(p.reqs, pathReq{op: op, cond: conditionOf(op, body)})
	}
	lose := p.lose == op
	if lose {
		p.lose = ""
	}
	p.mu.Unlock()
	resp, err := p.inner.RoundTrip(req)
	if err != nil || !lose {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return jsonError(req, 500, "InternalServerError", "the answer is lost"), nil
}

// record returns the requests call sends.
func (p *pathRecorder) record(call func() error) ([]pathReq, error) {
	p.mu.Lock()
	p.on, p.reqs = true, nil
	p.mu.Unlock()
	err := call()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = false
	return p.reqs, err
}

// conditionOf is the condition of a request's body: its
// ConditionExpression, or a transaction's first item's (the record's Put).
func conditionOf(op string, body []byte) string {
	var in struct {
		ConditionExpression string
		TransactItems       []struct {
			Put *struct{ ConditionExpression string }
		}
	}
	_ = json.Unmarshal(body, &in)
	c := in.ConditionExpression
	if op == "TransactWriteItems" && len(in.TransactItems) > 0 && in.TransactItems[0].Put != nil {
		c = in.TransactItems[0].Put.ConditionExpression
	}
	return normalizeCondition(c)
}

// normalizeCondition writes the clauses that the page names once as such:
// <until> (the record's end of retention kept within its step items') and
// <steps> (the record's number of steps).
func normalizeCondition(c string) string {
	c = strings.ReplaceAll(c, "(attribute_not_exists(#until) OR #until >= :new_exp)", "<until>")
	c = strings.ReplaceAll(c, "(attribute_exists(#names) AND size(#names) = :n_steps)", "<steps>")
	return strings.ReplaceAll(c, "attribute_not_exists(#names)", "<steps>")
}

// pathEnv makes the calls of the rows: a store on a table of its own,
// through the recorder, and the time the rows' records are written at.
type pathEnv struct {
	t     *testing.T
	rec   *pathRecorder
	store *ddbstore.Store
	t0    time.Time
	n     int
}

// expired returns k's record (or, with step, its step item) as a sweep at
// now finds it past retention.
func (e *pathEnv) expired(k string, step bool, now time.Time) ddbstore.Expired {
	e.t.Helper()
	for next := ""; ; {
		page, err := e.store.ScanExpired(context.Background(), ddbstore.ListInput{Next: next}, now)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, it := range page.Items {
			if it.Key == k && it.Step == step {
				return it
			}
		}
		if next = page.Next; next == "" {
			e.t.Fatalf("no item of %s (step %v) past retention at %v", k, step, now)
		}
	}
}

func (e *pathEnv) key() string {
	e.n++
	return fmt.Sprintf("path:%d", e.n)
}

func (e *pathEnv) at(sec int) time.Time { return e.t0.Add(time.Duration(sec) * time.Second) }

// acquire acquires k at sec with a lease of lease seconds and the given
// retention (the payload's fingerprint fp).
func (e *pathEnv) acquire(k, fp, tok string, sec, lease int, retention time.Duration) (core.Record, error) {
	rec := core.Reserve(k, fp, tok, nil, e.at(sec), e.at(sec+lease), retention)
	got, _, err := e.store.Acquire(context.Background(), rec, e.at(sec), core.Policy{MaxAttempts: 3})
	return got, err
}

func (e *pathEnv) mustAcquire(k, tok string, sec, lease int, retention time.Duration) core.Record {
	e.t.Helper()
	rec, err := e.acquire(k, emptyFP, tok, sec, lease, retention)
	if err != nil {
		e.t.Fatalf("set-up: Acquire(%s) = %v", k, err)
	}
	return rec
}

// withStep records the step charge in rec, held, at sec.
func (e *pathEnv) withStep(rec core.Record, sec int) core.Record {
	e.t.Helper()
	st := core.Step{Name: "charge", Result: []byte(`"ch_1"`)}
	if err := e.store.RecordStep(context.Background(), rec.Key, rec.LeaseToken, st, e.at(sec)); err != nil {
		e.t.Fatalf("set-up: RecordStep = %v", err)
	}
	rec.Steps = append(rec.Steps, st)
	return rec
}

// complete completes rec with out, or fails on an error.
func (e *pathEnv) complete(out core.Record) core.Record {
	e.t.Helper()
	got, err := e.store.Complete(context.Background(), out)
	if err != nil {
		e.t.Fatalf("set-up: Complete = %v", err)
	}
	return got
}

func (e *pathEnv) failed(rec core.Record, sec int, retention time.Duration) core.Record {
	return e.complete(core.Fail(rec, errors.New("throttled"), true, e.at(sec), retention))
}

func (e *pathEnv) get(k string, sec int) core.Record {
	e.t.Helper()
	got, err := e.store.Get(context.Background(), k, e.at(sec))
	if err != nil {
		e.t.Fatalf("set-up: Get = %v", err)
	}
	return got
}

// pathCall is one measured call of a row, after its set-up.
type pathCall func() error

// operationPaths are the rows of the table, by operation and case as the
// page writes them: each returns the calls to measure, one per situation
// the row names, each made on records set up for it.
var operationPaths = map[string]func(e *pathEnv) []pathCall{
	"Acquire: a new key, a record past retention that carries no count (a success, a permanent failure), an ended lease or a retryable failure without steps": func(e *pathEnv) []pathCall {
		fresh, done, failed := e.key(), e.key(), e.key()
		e.complete(core.Succeed(e.mustAcquire(done, "tok-a", 0, 10, time.Minute), []byte(`1`), e.at(1), time.Minute))
		e.failed(e.mustAcquire(failed, "tok-a", 0, 10, time.Hour), 1, time.Hour)
		acquire := func(k string, sec int) pathCall {
			return func() error { _, err := e.acquire(k, emptyFP, "tok-b", sec, 30, time.Hour); return err }
		}
		return []pathCall{acquire(fresh, 0), acquire(done, 300), acquire(failed, 2)}
	},
	"Acquire: an ended lease or a retryable failure, with steps": func(e *pathEnv) []pathCall {
		ended, failed := e.key(), e.key()
		e.withStep(e.mustAcquire(ended, "tok-a", 0, 1, time.Hour), 0)
		e.failed(e.withStep(e.mustAcquire(failed, "tok-a", 0, 10, time.Hour), 0), 1, time.Hour)
		return []pathCall{
			func() error { _, err := e.acquire(ended, emptyFP, "tok-b", 5, 30, time.Hour); return err },
			func() error { _, err := e.acquire(failed, emptyFP, "tok-b", 2, 30, time.Hour); return err },
		}
	},
	"Acquire: refused by a duplicate's success, a live lease, another payload": func(e *pathEnv) []pathCall {
		done, live := e.key(), e.key()
		e.complete(core.Succeed(e.mustAcquire(done, "tok-a", 0, 10, time.Hour), []byte(`1`), e.at(1), time.Hour))
		e.mustAcquire(live, "tok-a", 0, 30, time.Hour)
		refused := func(k, fp string) pathCall {
			return func() error {
				var ce *idem.ConflictError
				if _, err := e.acquire(k, fp, "tok-b", 2, 30, time.Hour); !errors.As(err, &ce) {
					return fmt.Errorf("Acquire = %v, want a conflict", err)
				}
				return nil
			}
		}
		return []pathCall{refused(done, emptyFP), refused(live, emptyFP), refused(done, "another-payload")}
	},
	"Acquire: refused by a duplicate's success whose result is kept in a result item": func(e *pathEnv) []pathCall {
		k := e.key()
		e.complete(core.Succeed(e.mustAcquire(k, "tok-a", 0, 10, time.Hour), apartResult, e.at(1), time.Hour))
		return []pathCall{func() error {
			var ce *idem.ConflictError
			if _, err := e.acquire(k, emptyFP, "tok-b", 2, 30, time.Hour); !errors.As(err, &ce) || string(ce.Existing.Result) != string(apartResult) {
				return fmt.Errorf("Acquire = %v, want a conflict with the result", err)
			}
			return nil
		}}
	},
	"Acquire: a record past retention that carries a count (a crash, a failure older than the retention)": func(e *pathEnv) []pathCall {
		crashed, failed := e.key(), e.key()
		e.mustAcquire(crashed, "tok-a", 0, 1, 10*time.Second)
		e.failed(e.mustAcquire(failed, "tok-a", 0, 1, 10*time.Second), 1, 10*time.Second)
		return []pathCall{
			func() error { _, err := e.acquire(crashed, emptyFP, "tok-b", 3600, 30, time.Hour); return err },
			func() error { _, err := e.acquire(failed, emptyFP, "tok-b", 3600, 30, time.Hour); return err },
		}
	},
	"Acquire: a retryable failure whose step items end before the new record would (a retry chain longer than the retention)": func(e *pathEnv) []pathCall {
		k := e.key()
		e.failed(e.withStep(e.mustAcquire(k, "tok-a", 0, 10, time.Hour), 0), 1, time.Hour)
		return []pathCall{func() error { _, err := e.acquire(k, emptyFP, "tok-b", 600, 30, 10*24*time.Hour); return err }}
	},
	"Reserve: a new key": func(e *pathEnv) []pathCall {
		k := e.key()
		return []pathCall{func() error {
			return e.store.Reserve(context.Background(), core.Reserve(k, emptyFP, "tok-a", nil, e.at(0), e.at(30), time.Hour), nil, e.at(0))
		}}
	},
	"Reserve: over prev, an ended lease": func(e *pathEnv) []pathCall {
		k := e.key()
		e.mustAcquire(k, "tok-a", 0, 1, time.Hour)
		seen := e.get(k, 5)
		return []pathCall{func() error {
			return e.store.Reserve(context.Background(), core.Reserve(k, emptyFP, "tok-b", &seen, e.at(5), e.at(35), time.Hour), &seen, e.at(5))
		}}
	},
	"Reserve: over prev, a retryable failure whose steps it carries": func(e *pathEnv) []pathCall {
		k := e.key()
		e.failed(e.withStep(e.mustAcquire(k, "tok-a", 0, 10, time.Hour), 0), 1, time.Hour)
		seen := e.get(k, 2)
		return []pathCall{func() error {
			return e.store.Reserve(context.Background(), core.Reserve(k, emptyFP, "tok-b", &seen, e.at(2), e.at(32), time.Hour), &seen, e.at(2))
		}}
	},
	"Reserve: refused by a live record": func(e *pathEnv) []pathCall {
		k := e.key()
		e.mustAcquire(k, "tok-a", 0, 30, time.Hour)
		return []pathCall{func() error {
			var ce *idem.ConflictError
			if err := e.store.Reserve(context.Background(), core.Reserve(k, emptyFP, "tok-b", nil, e.at(1), e.at(31), time.Hour), nil, e.at(1)); !errors.As(err, &ce) {
				return fmt.Errorf("Reserve = %v, want a conflict", err)
			}
			return nil
		}}
	},
	"Reserve: refused by a duplicate's success whose result is kept in a result item": func(e *pathEnv) []pathCall {
		k := e.key()
		e.complete(core.Succeed(e.mustAcquire(k, "tok-a", 0, 10, time.Hour), apartResult, e.at(1), time.Hour))
		return []pathCall{func() error {
			var ce *idem.ConflictError
			err := e.store.Reserve(context.Background(), core.Reserve(k, emptyFP, "tok-b", nil, e.at(2), e.at(32), time.Hour), nil, e.at(2))
			if !errors.As(err, &ce) || string(ce.Existing.Result) != string(apartResult) {
				return fmt.Errorf("Reserve = %v, want a conflict with the result", err)
			}
			return nil
		}}
	},
	"Reserve: over prev, which has gone (released): idem.ErrRecordChanged": func(e *pathEnv) []pathCall {
		k := e.key()
		e.failed(e.mustAcquire(k, "tok-a", 0, 10, time.Hour), 1, time.Hour)
		seen := e.get(k, 2)
		if err := e.store.Release(context.Background(), seen); err != nil {
			e.t.Fatalf("set-up: Release = %v", err)
		}
		return []pathCall{func() error {
			err := e.store.Reserve(context.Background(), core.Reserve(k, emptyFP, "tok-b", &seen, e.at(3), e.at(33), time.Hour), &seen, e.at(3))
			if !errors.Is(err, idem.ErrRecordChanged) {
				return fmt.Errorf("Reserve = %v, want ErrRecordChanged", err)
			}
			return nil
		}}
	},
	"Complete: a success, a permanent failure, a retryable failure without steps": func(e *pathEnv) []pathCall {
		var calls []pathCall
		for _, out := range []func(core.Record) core.Record{
			func(r core.Record) core.Record { return core.Succeed(r, []byte(`1`), e.at(1), time.Hour) },
			func(r core.Record) core.Record {
				return core.Fail(r, errors.New("declined"), false, e.at(1), time.Hour)
			},
			func(r core.Record) core.Record {
				return core.Fail(r, errors.New("throttled"), true, e.at(1), time.Hour)
			},
		} {
			rec := e.mustAcquire(e.key(), "tok-a", 0, 30, time.Hour)
			calls = append(calls, func() error { _, err := e.store.Complete(context.Background(), out(rec)); return err })
		}
		return calls
	},
	"Complete: a success whose result would make the record pass 1 KB": func(e *pathEnv) []pathCall {
		rec := e.mustAcquire(e.key(), "tok-a", 0, 30, time.Hour)
		return []pathCall{func() error {
			_, err := e.store.Complete(context.Background(), core.Succeed(rec, apartResult, e.at(1), time.Hour))
			return err
		}}
	},
	"Complete: a retryable failure with steps": func(e *pathEnv) []pathCall {
		rec := e.withStep(e.mustAcquire(e.key(), "tok-a", 0, 30, time.Hour), 0)
		return []pathCall{func() error {
			_, err := e.store.Complete(context.Background(), core.Fail(rec, errors.New("throttled"), true, e.at(1), time.Hour))
			return err
		}}
	},
	"Complete: a retryable failure with a step its record lacks (a step write the caller could not confirm, not applied)": func(e *pathEnv) []pathCall {
		rec := e.mustAcquire(e.key(), "tok-a", 0, 30, time.Hour)
		rec.Steps = []core.Step{{Name: "charge", Result: []byte(`"ch_1"`)}}
		return []pathCall{func() error {
			got, err := e.store.Complete(context.Background(), core.Fail(rec, errors.New("throttled"), true, e.at(1), time.Hour))
			if err == nil && len(got.Steps) != 1 {
				return fmt.Errorf("Complete = %v: the step is not kept", got)
			}
			return err
		}}
	},
	"Complete: a retryable failure without a step its record holds (a step write applied, its answer lost: the failure replaces the steps)": func(e *pathEnv) []pathCall {
		rec := e.withStep(e.mustAcquire(e.key(), "tok-a", 0, 30, time.Hour), 0)
		if err := e.store.RecordStep(context.Background(), rec.Key, rec.LeaseToken, core.Step{Name: "mail", Result: []byte(`1`)}, e.at(0)); err != nil {
			e.t.Fatalf("set-up: RecordStep = %v", err)
		}
		return []pathCall{func() error {
			got, err := e.store.Complete(context.Background(), core.Fail(rec, errors.New("throttled"), true, e.at(1), time.Hour))
			if err == nil && len(got.Steps) != 1 {
				return fmt.Errorf("Complete = %v: want the one step it carries", got)
			}
			return err
		}}
	},
	"Complete: refused, the lease lost: idem.ErrLeaseLost": func(e *pathEnv) []pathCall {
		rec := e.mustAcquire(e.key(), "tok-a", 0, 30, time.Hour)
		rec.LeaseToken = "tok-stale"
		return []pathCall{func() error {
			if _, err := e.store.Complete(context.Background(), core.Succeed(rec, []byte(`1`), e.at(1), time.Hour)); !errors.Is(err, idem.ErrLeaseLost) {
				return fmt.Errorf("Complete = %v, want ErrLeaseLost", err)
			}
			return nil
		}}
	},
	"Complete: applied, its answer lost (a timeout, a 5xx, a reply cut short)": func(e *pathEnv) []pathCall {
		rec := e.mustAcquire(e.key(), "tok-a", 0, 30, time.Hour)
		return []pathCall{func() error {
			e.rec.mu.Lock()
			e.rec.lose = "PutItem"
			e.rec.mu.Unlock()
			_, err := e.store.Complete(context.Background(), core.Succeed(rec, []byte(`1`), e.at(1), time.Hour))
			return err
		}}
	},
	"CompleteStaged: a success with staged writes": func(e *pathEnv) []pathCall {
		rec := e.mustAcquire(e.key(), "tok-a", 0, 30, time.Hour)
		staged := types.TransactWriteItem{Put: &types.Put{TableName: strPtr(e.store.Table()),
			Item: map[string]types.AttributeValue{ddbstore.DefaultKeyAttribute: &types.AttributeValueMemberS{Value: rec.Key + "#order"}}}}
		return []pathCall{func() error {
			_, err := e.store.CompleteStaged(context.Background(), core.Succeed(rec, []byte(`1`), e.at(1), time.Hour), []any{staged})
			return err
		}}
	},
	"CompleteStaged: a success with staged writes whose result would make the record pass 1 KB": func(e *pathEnv) []pathCall {
		rec := e.mustAcquire(e.key(), "tok-a", 0, 30, time.Hour)
		staged := types.TransactWriteItem{Put: &types.Put{TableName: strPtr(e.store.Table()),
			Item: map[string]types.AttributeValue{ddbstore.DefaultKeyAttribute: &types.AttributeValueMemberS{Value: rec.Key + "#order"}}}}
		return []pathCall{func() error {
			_, err := e.store.CompleteStaged(context.Background(), core.Succeed(rec, apartResult, e.at(1), time.Hour), []any{staged})
			return err
		}}
	},
	"RecordStep: a step (idem.Step)": func(e *pathEnv) []pathCall {
		rec := e.mustAcquire(e.key(), "tok-a", 0, 30, time.Hour)
		return []pathCall{func() error { e.withStep(rec, 1); return nil }}
	},
	"RenewLease: a renewal (idem.WithLeaseRenewal)": func(e *pathEnv) []pathCall {
		rec := e.mustAcquire(e.key(), "tok-a", 0, 10, time.Hour)
		return []pathCall{func() error { _, err := e.store.RenewLease(context.Background(), rec, e.at(20), e.at(1)); return err }}
	},
	"Get: a record with steps": func(e *pathEnv) []pathCall {
		k := e.key()
		e.withStep(e.mustAcquire(k, "tok-a", 0, 30, time.Hour), 0)
		return []pathCall{func() error { _, err := e.store.Get(context.Background(), k, e.at(1)); return err }}
	},
	"Get: a success whose result is kept in a result item": func(e *pathEnv) []pathCall {
		k := e.key()
		e.complete(core.Succeed(e.mustAcquire(k, "tok-a", 0, 30, time.Hour), apartResult, e.at(1), time.Hour))
		return []pathCall{func() error {
			got, err := e.store.Get(context.Background(), k, e.at(2))
			if err == nil && string(got.Result) != string(apartResult) {
				return fmt.Errorf("Get = %d bytes, want the %d of the result", len(got.Result), len(apartResult))
			}
			return err
		}}
	},
	"Release: an operator's release, or the holder's (core.MarkNoRecord)": func(e *pathEnv) []pathCall {
		k := e.key()
		e.complete(core.Fail(e.mustAcquire(k, "tok-a", 0, 30, time.Hour), errors.New("declined"), false, e.at(1), time.Hour))
		seen := e.get(k, 2)
		return []pathCall{func() error { return e.store.Release(context.Background(), seen) }}
	},
	"List: one page (idem list)": func(e *pathEnv) []pathCall {
		return []pathCall{func() error { _, err := e.store.List(context.Background(), ddbstore.ListInput{Limit: 1}); return err }}
	},
	"ScanExpired: one page of a sweep (idem sweep, idem-sweep)": func(e *pathEnv) []pathCall {
		return []pathCall{func() error {
			_, err := e.store.ScanExpired(context.Background(), ddbstore.ListInput{Limit: 1}, e.at(0))
			return err
		}}
	},
	"DeleteExpired: a record past retention": func(e *pathEnv) []pathCall {
		k := e.key()
		e.complete(core.Succeed(e.mustAcquire(k, "tok-a", 0, 10, time.Minute), []byte(`1`), e.at(1), time.Minute))
		it := e.expired(k, false, e.at(3600))
		return []pathCall{func() error { return e.store.DeleteExpired(context.Background(), it, e.at(3600)) }}
	},
	"DeleteExpired: a step or result item past retention": func(e *pathEnv) []pathCall {
		k := e.key()
		e.withStep(e.mustAcquire(k, "tok-a", 0, 10, time.Minute), 1)
		later := e.at(30 * 24 * 3600)
		it := e.expired(k, true, later)
		return []pathCall{func() error { return e.store.DeleteExpired(context.Background(), it, later) }}
	},
	"CheckTable: the table's key schema and, on a global table, its replicas and mode, at cold start": func(e *pathEnv) []pathCall {
		return []pathCall{func() error { return e.store.CheckTable(context.Background()) }}
	},
}

func strPtr(s string) *string { return &s }

// apartResult is a result that would make its record pass 1 KB: 2 KB that
// do not compress.
var apartResult = randomBytes(2048)

// pathRow is a row of the page's table.
type pathRow struct {
	name string    // "Operation: case"
	reqs []wantReq // the requests, in order
	iam  []string  // the IAM actions named
}

// wantReq is a request of a row: its operation, its condition's name (""
// for none), and whether it is made only where the server does not return
// the blocking item with a refused condition (in parentheses).
type wantReq struct {
	op, cond string
	noAllOld bool
}

var reqCell = regexp.MustCompile("^(\\()?`(\\w+)`(?: ([\\w+-]+))?\\)?$")

// pathTables reads the page's table of operation paths and its table of
// conditions (name → expression).
func pathTables(t *testing.T) ([]pathRow, map[string]string) {
	t.Helper()
	raw, err := os.ReadFile("../docs/dynamodb.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []pathRow
	for _, cells := range markdownTable(t, string(raw), "<!-- operation-paths:", 4) {
		row := pathRow{name: strings.Trim(cells[0], "`") + ": " + cells[1]}
		for _, part := range strings.Split(cells[2], " → ") {
			m := reqCell.FindStringSubmatch(part)
			if m == nil {
				t.Fatalf("row %q: request %q is not `Operation` [condition], or in parentheses", row.name, part)
			}
			row.reqs = append(row.reqs, wantReq{op: m[2], cond: m[3], noAllOld: m[1] != ""})
		}
		for _, a := range strings.Split(cells[3], ", ") {
			row.iam = append(row.iam, strings.Trim(a, "`"))
		}
		rows = append(rows, row)
	}
	conds := map[string]string{}
	for _, cells := range markdownTable(t, string(raw), "<!-- operation-conditions:", 2) {
		conds[strings.Trim(cells[0], "`")] = strings.TrimPrefix(strings.Trim(cells[1], "`"), "none") // an unconditional request
	}
	return rows, conds
}

// markdownTable returns the body rows of the table that follows marker in
// doc, each row's n cells (a cell's \| is a |).
func markdownTable(t *testing.T, doc, marker string, n int) [][]string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, marker)
	if !ok {
		t.Fatalf("docs/dynamodb.md has no %q", marker)
	}
	var rows [][]string
	for i, line := range strings.Split(rest, "\n")[1:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i < 2 {
			continue // the header and its rule
		}
		cells := strings.Split(strings.ReplaceAll(strings.Trim(line, "| "), `\|`, "\x00"), " | ")
		for j := range cells {
			cells[j] = strings.ReplaceAll(strings.TrimSpace(cells[j]), "\x00", "|")
		}
		if len(cells) != n {
			t.Fatalf("docs/dynamodb.md %s: row %q has %d cells, want %d", marker, line, len(cells), n)
		}
		rows = append(rows, cells)
	}
	return rows
}

// TestOperationPaths holds docs/dynamodb.md's table of the path of each
// operation to the requests the store makes (see the top of this file).
func TestOperationPaths(t *testing.T) {
	integration(t)
	rows, conds := pathTables(t)
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	rec := &pathRecorder{inner: newRecorder().inner}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.HTTPClient, o.RetryMaxAttempts = &http.Client{Transport: rec}, 1 })
	table, _ := newTable(t, client)
	store, err := ddbstore.New(client, table)
	if err != nil {
		t.Fatal(err)
	}
	e := &pathEnv{t: t, rec: rec, store: store, t0: time.Now().Truncate(time.Second)}
	seen := map[string]bool{}
	for _, row := range rows {
		seen[row.name] = true
		setUp, ok := operationPaths[row.name]
		if !ok {
			t.Errorf("docs/dynamodb.md's row %q has no calls in operationPaths", row.name)
			continue
		}
		if strings.HasPrefix(row.name, "CompleteStaged") && server() == "dynalite" {
			t.Logf("row %q not run: dynalite has no TransactWriteItems (the moto run makes it)", row.name)
			continue
		}
		checkPath(t, e, row, conds, setUp(e))
	}
	for name := range operationPaths {
		if !seen[name] {
			t.Errorf("operationPaths has %q, which docs/dynamodb.md's table does not", name)
		}
	}
}

// checkPath makes each of calls and checks its requests against row.
func checkPath(t *testing.T, e *pathEnv, row pathRow, conds map[string]string, calls []pathCall) {
	t.Helper()
	var want []pathReq
	actions := map[string]bool{}
	for _, w := range row.reqs {
		action := "dynamodb:" + w.op
		if w.op == "TransactWriteItems" {
			action = "dynamodb:PutItem" // the record's Put (the staged writes need their own)
		}
		actions[action] = true
		if w.noAllOld && returnsAllOld() {
			continue
		}
		expr, ok := conds[w.cond]
		if w.cond != "" && !ok {
			t.Errorf("row %q: condition %q is not in the table of conditions", row.name, w.cond)
		}
		want = append(want, pathReq{op: w.op, cond: expr})
	}
	if got := slices.Sorted(maps.Keys(actions)); !slices.Equal(got, slices.Sorted(slices.Values(row.iam))) {
		t.Errorf("row %q: IAM actions %q, want the requests' %q", row.name, row.iam, got)
	}
	for i, call := range calls {
		got, err := e.rec.record(call)
		if err != nil {
			t.Errorf("row %q, call %d: %v", row.name, i+1, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("row %q, call %d: requests\n%s\nwant\n%s", row.name, i+1, formatReqs(got), formatReqs(want))
		}
	}
}

func formatReqs(reqs []pathReq) string {
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, "  %s %q\n", r.op, r.cond)
	}
	return b.String()
}
