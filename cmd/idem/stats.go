package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// statsStates are the states stats counts, in the order it shows them.
var statsStates = []string{stateInProgress, stateStuck, stateSucceeded, stateFailedRetryable, stateFailedPermanent, stateExpired}

// sizeBucket counts succeeded records whose result is at most Max bytes
// (and more than the previous bucket's).
type sizeBucket struct {
	Range string `json:"range"`
	Max   int    `json:"-"`
	Count int    `json:"count"`
}

func newSizeBuckets() []sizeBucket {
	return []sizeBucket{
		{Range: "none", Max: 0},
		{Range: "1B-1KiB", Max: 1 << 10},
		{Range: "1-4KiB", Max: 4 << 10},
		{Range: "4-16KiB", Max: 16 << 10},
		{Range: "16-64KiB", Max: 64 << 10},
		{Range: "64-256KiB", Max: 256 << 10},
		{Range: ">256KiB", Max: -1},
		{Range: "omitted", Max: -1},
	}
}

// statsView is what stats shows.
type statsView struct {
	Table       string  `json:"table"`
	Scanned     int     `json:"scanned"`
	ConsumedRCU float64 `json:"consumed_rcu"`
	Corrupt     int     `json:"corrupt"`
	// Complete reports that the scan read the table (from --next, if
	// given) to its end; otherwise Next continues it and the counts are of
	// the part read.
	Complete         bool           `json:"complete"`
	Next             string         `json:"next,omitempty"`
	Stopped          string         `json:"stopped,omitempty"`
	States           map[string]int `json:"states"`
	OldestInProgress *oldestView    `json:"oldest_in_progress,omitempty"`
	ResultSizes      []sizeBucket   `json:"result_sizes"`
}

// oldestView is the in-progress record (live or stuck) that started
// longest ago.
type oldestView struct {
	KeyHash    string     `json:"key_hash"`
	State      string     `json:"state"`
	Attempts   int        `json:"attempts"`
	UpdatedAt  *time.Time `json:"updated_at,omitempty"`
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
}

func (c *cli) stats(ctx context.Context, args []string) error {
	o := c.flags("stats", "--table T [--next TOKEN] [--max-rcu N] [--json]")
	var sf scanFlags
	sf.register(o.fs)
	if err := o.parse(args); err != nil {
		return err
	}
	if err := sf.check(); err != nil {
		return err
	}
	store, err := c.open(ctx, o)
	if err != nil {
		return err
	}
	now := c.now()
	sc := newScanner(store, sf, "", newProgress(c.stderr, c.now, !o.json))
	v := statsView{Table: store.Table(), States: map[string]int{}, ResultSizes: newSizeBuckets()}
	for _, s := range statsStates {
		v.States[s] = 0
	}
	var oldest *core.Record
	err = c.tally(ctx, sc, &v, &oldest, now)
	v.Scanned, v.ConsumedRCU, v.Corrupt, v.Next = sc.scanned, sc.consumed, sc.corrupt, sc.next
	v.Complete = err == nil && v.Next == ""
	if oldest != nil {
		v.OldestInProgress = &oldestView{KeyHash: idem.HashKey(logKey(oldest.Key)), State: stateOf(*oldest, now), Attempts: oldest.Attempts,
			UpdatedAt: timePtr(oldest.UpdatedAt), LeaseUntil: timePtr(oldest.LeaseUntil)}
	}
	if werr := c.writeStats(o.json, v, now); werr != nil && err == nil {
		err = werr
	}
	return err
}

// tally scans until the table ends, the budget is used up or ctx ends,
// counting into v.
func (c *cli) tally(ctx context.Context, sc *scanner, v *statsView, oldest **core.Record, now time.Time) error {
	defer sc.progress.clear()
	for {
		recs, err := sc.page(ctx, 0)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				v.Stopped = stoppedInterrupted
			}
			return err
		}
		for _, rec := range recs {
			st := stateOf(rec, now)
			v.States[st]++
			switch {
			case st == stateSucceeded:
				addSize(v.ResultSizes, rec.ResultOmitted, sc.resultSize(rec))
			case st == stateInProgress || st == stateStuck:
				if *oldest == nil || rec.UpdatedAt.Before((*oldest).UpdatedAt) {
					r := rec
					*oldest = &r
				}
			}
		}
		sc.progress.update(sc.scanned, sc.consumed, sc.scanned-sc.corrupt)
		switch {
		case sc.next == "":
			return nil
		case sc.overBudget():
			v.Stopped = stoppedMaxRCU
			return nil
		}
	}
}

// addSize counts a succeeded record's result, omitted or of size bytes.
func addSize(buckets []sizeBucket, omitted bool, size int) {
	last := len(buckets) - 1
	if omitted {
		buckets[last].Count++
		return
	}
	for i := range buckets[:last] {
		if buckets[i].Max < 0 || size <= buckets[i].Max {
			buckets[i].Count++
			return
		}
	}
}

func (c *cli) writeStats(asJSON bool, v statsView, now time.Time) error {
	if asJSON {
		return writeJSON(c.stdout, v)
	}
	extent := "whole table"
	if !v.Complete {
		extent = "part of the table: " + continuation(v.Stopped, v.Next)
	}
	fmt.Fprintf(c.stdout, "%s: %s (%s)\n\n", v.Table, scanSummary(v.Scanned, v.ConsumedRCU, v.Corrupt, 0), extent)
	rows := [][]string{{"STATE", "RECORDS"}}
	for _, s := range statsStates {
		rows = append(rows, []string{s, strconv.Itoa(v.States[s])})
	}
	if v.Corrupt > 0 {
		rows = append(rows, []string{"undecodable", strconv.Itoa(v.Corrupt)})
	}
	if err := table(c.stdout, rows); err != nil {
		return err
	}
	if o := v.OldestInProgress; o != nil {
		fmt.Fprintf(c.stdout, "\noldest in progress: key hash %s, %s, attempt %d, started %s, lease end %s\n",
			o.KeyHash, o.State, o.Attempts, when(o.UpdatedAt, now), when(o.LeaseUntil, now))
	}
	fmt.Fprintln(c.stdout)
	rows = [][]string{{"RESULT SIZE", "SUCCEEDED"}}
	for _, b := range v.ResultSizes {
		rows = append(rows, []string{b.Range, strconv.Itoa(b.Count)})
	}
	return table(c.stdout, rows)
}
