package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/idemgo/idem/core"
)

// defaultListLimit is how many records list shows unless --limit says
// otherwise.
const defaultListLimit = 50

// listView is what list shows.
type listView struct {
	Table  string `json:"table"`
	State  string `json:"state,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	Action string `json:"action,omitempty"`
	// HashedSkipped counts, with Action, the records otherwise selected whose
	// key is a hash (the wrappers' keys): their action cannot be read.
	HashedSkipped  int          `json:"hashed_skipped,omitempty"`
	Records        []recordView `json:"records"`
	Scanned        int          `json:"scanned"`
	ConsumedRCU    float64      `json:"consumed_rcu"`
	Corrupt        int          `json:"corrupt"`
	ExpiredSkipped int          `json:"expired_skipped"`
	// Next continues the listing (--next); empty once the table has been
	// read to its end.
	Next string `json:"next,omitempty"`
	// Stopped says why the listing stopped before the end of the table:
	// "limit", "max-rcu" or "interrupted".
	Stopped string `json:"stopped,omitempty"`
}

func (c *cli) list(ctx context.Context, args []string) error {
	o := c.flags("list", "--table T [--status STATE] [--prefix P] [--action A] [--limit N] [--next TOKEN] [--max-rcu N] [--json]")
	var sf scanFlags
	sf.register(o.fs)
	state := o.fs.String("status", "", "list only records in this `state`: "+strings.Join(listStates, ", ")+
		" (in_progress: live and stuck; failed: retryable and permanent)")
	limit := o.fs.Int("limit", defaultListLimit, "list at most this many `records`")
	prefix := o.fs.String("prefix", "", "list only records whose key begins with this `prefix` (the key as the store holds it, after --key-prefix's; see docs/operations.md for finding one function's records)")
	action := o.fs.String("action", "", "list only records whose key names this `action`, as keys given verbatim in the scheme evt:<event-id>:<action> do; the wrappers' keys hash the action (idemlambda.EventKey): they are counted apart, use --prefix")
	if err := o.parse(args); err != nil {
		return err
	}
	if err := sf.check(); err != nil {
		return err
	}
	if *state != "" && !slices.Contains(listStates, *state) {
		return usageErrorf("--status %q: want one of %s", *state, strings.Join(listStates, ", "))
	}
	if *limit < 1 {
		return usageErrorf("--limit %d: want at least 1", *limit)
	}
	store, err := c.open(ctx, o)
	if err != nil {
		return err
	}
	sc := newScanner(store, sf, storedStatus(*state), newProgress(c.stderr, c.now, !o.json))
	v, err := c.collect(ctx, sc, filter{state: *state, prefix: *prefix, action: *action}, *limit)
	v.Table = store.Table()
	if werr := c.writeList(o.json, v); werr != nil && err == nil {
		err = werr
	}
	return err
}

// storedStatus is the stored status of the records in state, for the
// scan's server-side filter.
func storedStatus(state string) core.Status {
	switch state {
	case stateInProgress, stateStuck:
		return core.StatusInProgress
	case string(core.StatusFailed), stateFailedRetryable, stateFailedPermanent:
		return core.StatusFailed
	case stateSucceeded:
		return core.StatusSucceeded
	}
	return ""
}

// filter is what list selects: records in state (all live records if
// empty) whose key begins with prefix and, if action is set, names it.
type filter struct{ state, prefix, action string }

func (f filter) selects(rec core.Record, state string) bool {
	return selects(f.state, state) && strings.HasPrefix(rec.Key, f.prefix) && (f.action == "" || namesAction(rec.Key, f.action))
}

// namesAction reports whether key is a key of the scheme evt:<event-id>:<action> (given
// verbatim, after any store prefix) for action.
func namesAction(key, action string) bool {
	_, rest, ok := strings.Cut(key, "evt:")
	return ok && len(rest) > len(action)+1 && strings.HasSuffix(rest, ":"+action)
}

// hashed reports whether key ends in a key derived by core.DeriveKey, whose parts (the
// action among them) cannot be read back.
func hashed(key string) bool {
	i := strings.LastIndex(key, core.DerivedKeyPrefix)
	return i >= 0 && len(key)-i-len(core.DerivedKeyPrefix) == 64
}

// collect scans until it has limit records that f selects, the table ends,
// the budget is used up or ctx ends. Each Scan evaluates at most the
// records still wanted, so no record is skipped between a page and its
// continuation.
func (c *cli) collect(ctx context.Context, sc *scanner, f filter, limit int) (listView, error) {
	now := c.now()
	v := listView{State: f.state, Prefix: f.prefix, Action: f.action, Records: []recordView{}}
	defer sc.progress.clear()
	for {
		recs, err := sc.page(ctx, limit-len(v.Records))
		if err != nil {
			v.Next, v.Scanned, v.ConsumedRCU, v.Corrupt = sc.next, sc.scanned, sc.consumed, sc.corrupt
			if errors.Is(err, context.Canceled) {
				v.Stopped = stoppedInterrupted
			}
			return v, err
		}
		for _, rec := range recs {
			switch st := stateOf(rec, now); {
			case st == stateExpired:
				v.ExpiredSkipped++
			case f.selects(rec, st):
				v.Records = append(v.Records, sc.view(rec, now))
			case f.action != "" && hashed(rec.Key) && selects(f.state, st) && strings.HasPrefix(rec.Key, f.prefix):
				v.HashedSkipped++
			}
		}
		sc.progress.update(sc.scanned, sc.consumed, len(v.Records))
		switch {
		case sc.next == "":
		case len(v.Records) >= limit:
			v.Stopped = stoppedLimit
		case sc.overBudget():
			v.Stopped = stoppedMaxRCU
		default:
			continue
		}
		v.Next, v.Scanned, v.ConsumedRCU, v.Corrupt = sc.next, sc.scanned, sc.consumed, sc.corrupt
		return v, nil
	}
}

func (c *cli) writeList(asJSON bool, v listView) error {
	if asJSON {
		return writeJSON(c.stdout, v)
	}
	if len(v.Records) > 0 {
		rows := [][]string{{"KEY HASH", "STATE", "ATTEMPTS", "UPDATED", "LEASE END", "RETENTION END", "ERROR"}}
		for _, r := range v.Records {
			rows = append(rows, []string{r.KeyHash, r.State, strconv.Itoa(r.Attempts), stamp(r.UpdatedAt), stamp(r.LeaseUntil), stamp(r.ExpiresAt), orDash(clip(r.Error, 60))})
		}
		if err := table(c.stdout, rows); err != nil {
			return err
		}
		fmt.Fprintln(c.stdout)
	}
	fmt.Fprintf(c.stdout, "%s in %s (%s)\n", count(len(v.Records), "record"), v.Table, scanSummary(v.Scanned, v.ConsumedRCU, v.Corrupt, v.ExpiredSkipped))
	if v.HashedSkipped > 0 {
		fmt.Fprintf(c.stdout, "%s left out: the key is a hash (the wrappers' keys: idemlambda.EventKey), whose action cannot be read; "+
			"give each function's store a key prefix and list with --prefix\n", count(v.HashedSkipped, "record"))
	}
	_, err := fmt.Fprintln(c.stdout, continuation(v.Stopped, v.Next))
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// scanSummary says what a scan read and cost.
func scanSummary(scanned int, rcu float64, corrupt, expired int) string {
	s := fmt.Sprintf("scanned %s, %.1f RCU", count(scanned, "item"), rcu)
	if expired > 0 {
		s += fmt.Sprintf("; %d past retention left out", expired)
	}
	if corrupt > 0 {
		s += fmt.Sprintf("; %d undecodable left out", corrupt)
	}
	return s
}

// continuation says where a scan ended and how to go on.
func continuation(stopped, next string) string {
	reason := map[string]string{stoppedLimit: "--limit reached", stoppedMax: "--max reached", stoppedMaxRCU: "--max-rcu reached", stoppedInterrupted: "interrupted"}[stopped]
	switch {
	case next == "":
		return "end of table"
	case reason == "":
		return "more may follow: continue with --next " + next
	}
	return fmt.Sprintf("stopped (%s): continue with --next %s", reason, next)
}
