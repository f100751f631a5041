package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
)

// The capacity section: capacity units per unit of work of every capability
// (steps, lease renewal, bounded waits, staged completion, large results,
// the SQS, Kinesis and HTTP wrappers), each measured once at the counting
// proxy. Units do not depend on timing (but the bounded waits' reads, whose
// number depends on how long the holder runs: the mean over several keys).

// capRow is one capability's calls and capacity units per unit of work.
type capRow struct {
	Scenario string             `json:"scenario"`
	Server   string             `json:"server"`
	Per      string             `json:"per"`
	Units    int                `json:"units_measured"`
	Calls    map[string]float64 `json:"calls_per_unit"`
	Capacity *capFigures        `json:"capacity"`
	S3       map[string]float64 `json:"s3_requests_per_unit,omitempty"`
	Figures  map[string]any     `json:"figures,omitempty"`
	// Series are figures by position (a step's units), in the JSON only.
	Series map[string][]float64 `json:"series,omitempty"`
	Note   string               `json:"note"`
}

// capEnv is a server behind a counting proxy, with one table and a store.
type capEnv struct {
	server string // "dynalite 4.0.0", "moto 5.2.5"
	ctx    context.Context
	proxy  *proxy
	client *dynamodb.Client
	table  string
	store  *ddbstore.Store
	s3     *s3Env // moto only
	rep    *report
	events int
}

// newCapEnv creates table on the proxy's server and a store over it; the
// returned function deletes it.
func newCapEnv(ctx context.Context, rep *report, server string, prx *proxy, client *dynamodb.Client, table string, events int) (*capEnv, func(), error) {
	if _, err := ddbstore.CreateTable(ctx, client, table); err != nil {
		return nil, nil, err
	}
	st, err := ddbstore.New(client, table)
	if err != nil {
		deleteTable(ctx, client, table)
		return nil, nil, err
	}
	e := &capEnv{server: server, ctx: ctx, proxy: prx, client: client, table: table, store: st, rep: rep, events: events}
	return e, func() { deleteTable(ctx, client, table) }, nil
}

// runner returns a runner over the env's store with the workload's options
// and opts.
func (e *capEnv) runner(opts ...idem.Option) (*idem.Runner, error) {
	return idem.New(e.store, runnerOptions(opts...)...)
}

// measure runs fn, which does units units of work, and returns the row of
// its calls and capacity per unit; it adds a failure to the report for any
// inconsistency of the capacity charged.
func (e *capEnv) measure(name, per string, units int, fn func() error) (capRow, error) {
	c0, err := e.proxy.Counts(e.ctx)
	if err != nil {
		return capRow{}, err
	}
	k0, err := e.proxy.Capacity(e.ctx)
	if err != nil {
		return capRow{}, err
	}
	var s0 map[string]int64
	if e.s3 != nil {
		s0 = e.s3.counts()
	}
	if err := fn(); err != nil {
		return capRow{}, fmt.Errorf("%s: %w", name, err)
	}
	c1, err := e.proxy.Counts(e.ctx)
	if err != nil {
		return capRow{}, err
	}
	k1, err := e.proxy.Capacity(e.ctx)
	if err != nil {
		return capRow{}, err
	}
	calls, d := diffCounts(c0, c1), diffCapacity(k0, k1)
	e.rep.checkCapacity("capacity "+name, d, calls)
	row := capRow{Scenario: name, Server: e.server, Per: per, Units: units, Calls: perEvent(calls, units),
		Capacity: newCapFigures([]capDelta{d}, units), Figures: map[string]any{}, Series: map[string][]float64{}}
	if e.s3 != nil {
		if s3 := perEvent(diffCounts(s0, e.s3.counts()), units); len(s3) > 0 {
			row.S3 = s3
		}
	}
	logf("capacity %-28s %-15s %6s write units + %6s read units per %s; calls %s", name, e.server,
		fmtUnits(row.Capacity.WritePerEvent), fmtUnits(row.Capacity.ReadPerEvent), per, fmtCalls(row.Calls))
	return row, nil
}

// writeUnits returns the write units charged so far.
func (e *capEnv) writeUnits() (float64, error) {
	k, err := e.proxy.Capacity(e.ctx)
	if err != nil {
		return 0, err
	}
	return k.Totals.Sum().Write, nil
}

// do runs events new events of name through r with handler h(i) and checks
// that each got want.
func (e *capEnv) do(r *idem.Runner, name string, events int, want idem.Verdict, h func(i int, ev event) idem.Handler) error {
	for i := range events {
		ev := makeEvent(name, "cap", i, 100+i)
		ctx, cancel := context.WithTimeout(e.ctx, invocationTime)
		out, err := r.Do(ctx, ev.key, ev.payload, h(i, ev))
		cancel()
		if out.Verdict != want {
			return fmt.Errorf("%s: event %d got %s (%v), want %s", name, i, out.Verdict, err, want)
		}
	}
	return nil
}

// capabilities measures every capability on the dynalite env, and those
// that need moto (transactions, S3) on the moto env when there is one.
func capabilities(dyn, moto *capEnv) ([]capRow, error) {
	var rows []capRow
	for _, part := range []func(*capEnv) ([]capRow, error){stepRows, renewalRows, waitRows, wrapperRows, retryRows, resultRows} {
		r, err := part(dyn)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	if moto == nil {
		logf("capacity: moto not running: staged completion and large results not measured")
		return rows, nil
	}
	for _, part := range []func(*capEnv) ([]capRow, error){waitRows, stagedRows, largeRows} {
		r, err := part(moto)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// capMarkdown is the capacity section's table.
func capMarkdown(rows []capRow) string {
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n| capability | server | per | write units | read units | failed conditions | DynamoDB calls | S3 requests | figures |\n| --- | --- | --- | ---: | ---: | ---: | --- | --- | --- |\n")
	for _, r := range rows {
		var figs []string
		for _, k := range slices.Sorted(maps.Keys(r.Figures)) {
			figs = append(figs, fmt.Sprintf("%s %v", k, r.Figures[k]))
		}
		s3 := "–"
		if len(r.S3) > 0 {
			s3 = fmtCalls(r.S3)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Scenario, r.Server, r.Per, fmtUnits(r.Capacity.WritePerEvent),
			fmtUnits(r.Capacity.ReadPerEvent), fmtUnits(r.Capacity.FailedPerEv), fmtCalls(r.Calls), s3, strings.Join(figs, "; "))
	}
	return b.String()
}

// retryRows measures a transient failure retried inside the call
// (idem.WithRetry: two tries, the backoff not slept): the reservation, the
// failed try's record, the retry's re-reservation and the completion.
func retryRows(e *capEnv) ([]capRow, error) {
	r, err := e.runner(idem.WithRetry(2, idem.DefaultBackoffBase, idem.DefaultBackoffMax),
		idem.WithSleep(func(context.Context, time.Duration) error { return nil }))
	if err != nil {
		return nil, err
	}
	row, err := e.measure("retry_in_call", "execution", e.events, func() error {
		return e.do(r, "retry_in_call", e.events, idem.Executed, func(int, event) idem.Handler {
			tries := 0
			return func(context.Context) ([]byte, error) {
				if tries++; tries == 1 {
					return nil, core.MarkTransient(errors.New("bench: transient failure"))
				}
				return []byte(`{"ok":true}`), nil
			}
		})
	})
	if err != nil {
		return nil, err
	}
	row.Note = "a transient failure retried inside the call: reservation, the failed try recorded, re-reservation, completion"
	return []capRow{row}, nil
}
