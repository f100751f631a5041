package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// releaseView is what release reports when it has deleted a record.
type releaseView struct {
	Released bool       `json:"released"`
	Table    string     `json:"table"`
	KeyHash  string     `json:"key_hash"`
	Record   recordView `json:"record"`
	Fence    string     `json:"fence"`
	// CacheReplayUntil is, for a released success, when the caches of
	// warm runners (idem.WithCache) have certainly dropped it: until then
	// a process that cached it may still replay it.
	CacheReplayUntil string `json:"cache_replay_until,omitempty"`
}

func (c *cli) release(ctx context.Context, args []string) error {
	o := c.flags("release", "--table T ("+keySynopsis+" [--fence F] [--force] | (--status STATE | --verdict V) [--since T] [--until T] [--dry-run] [--rate N] [--max N] [--max-rcu N] [--next TOKEN]) [--yes] [--json]")
	var k keyFlags
	k.register(o.fs)
	var b bulkFlags
	b.register(o.fs)
	fence := o.fs.String("fence", "", "delete only the record inspect showed with this `fence` (STATUS/ATTEMPTS/TOKEN)")
	yes := o.fs.Bool("yes", false, "release without asking for confirmation")
	force := o.fs.Bool("force", false, "release an in-progress record even while its lease lives (a second execution may then run beside the first)")
	maxAttempts := o.fs.Int("max-attempts", 0, maxAttemptsUsage+"; with --verdict retries_exhausted, idem.DefaultMaxAttempts unless given")
	cacheTTL := o.fs.Duration("cache-ttl", idem.DefaultCacheTTL, "the runners' WithCacheTTL, for how long a warm process may still replay a released success")
	if err := o.parse(args); err != nil {
		return err
	}
	if *cacheTTL <= 0 {
		return usageErrorf("--cache-ttl %v: want a positive duration (the runners' WithCacheTTL)", *cacheTTL)
	}
	if b.set() {
		if k.key != "" || k.sqsEvent != "" || k.httpEvent != "" || *fence != "" || *force {
			return usageErrorf("--status and --verdict release every record they select: they take no key (--key, --sqs-event, --http-event), --fence or --force")
		}
		limit, err := k.attemptLimit(*maxAttempts) // no event: a key's default
		if err != nil {
			return err
		}
		return c.releaseAll(ctx, o, b, *yes, limit)
	}
	key, source, err := k.resolve(&o.layout)
	if err != nil {
		return err
	}
	if *maxAttempts, err = k.attemptLimit(*maxAttempts); err != nil {
		return err
	}
	if *fence != "" {
		if _, _, _, err := parseFence(*fence); err != nil {
			return err
		}
	}
	store, err := c.open(ctx, o)
	if err != nil {
		return err
	}
	now := c.now()
	rec, v, err := c.read(ctx, store, key, source, now, *maxAttempts)
	if nr := (*noRecordError)(nil); errors.As(err, &nr) {
		nr.hint = k.notFoundHint(o.layout)
	}
	if err != nil {
		return err
	}
	if !o.json {
		if err := writeRecord(c.stdout, v, now); err != nil {
			return err
		}
	}
	if err := c.mayRelease(rec, v, *fence, *force, *yes, now); err != nil {
		return err
	}
	if err := store.Release(ctx, rec); err != nil {
		if errors.Is(err, idem.ErrRecordChanged) || errors.Is(err, idem.ErrNotFound) {
			return fmt.Errorf("nothing released: the record changed after it was read; inspect it again: %w", err)
		}
		return err
	}
	return c.released(o.json, rec, v, now, *cacheTTL)
}

// released reports a deleted record. A success may still be replayed by
// the warm processes that cached it (idem.WithCache), for at most their
// cache TTL from now: the report says until when.
func (c *cli) released(asJSON bool, rec core.Record, v inspectView, now time.Time, cacheTTL time.Duration) error {
	var until string
	if rec.Status == core.StatusSucceeded {
		until = now.Add(cacheTTL).UTC().Format(time.RFC3339)
	}
	if asJSON {
		return writeJSON(c.stdout, releaseView{Released: true, Table: v.Table, KeyHash: v.KeyHash, Record: *v.Record, Fence: v.Fence, CacheReplayUntil: until})
	}
	if _, err := fmt.Fprintf(c.stdout, "\nreleased: the record of key hash %s is deleted; the key's next call runs the handler as a new key (attempt 1)\n", v.KeyHash); err != nil {
		return err
	}
	if until == "" {
		return nil
	}
	_, err := fmt.Fprintf(c.stdout, "warm processes whose runner caches outcomes (idem.WithCache) may still replay this success from memory "+
		"until %s (for up to %s, their WithCacheTTL; --cache-ttl if they set another)\n", until, cacheTTL)
	return err
}

// mayRelease checks, before the deletion, that rec is the record the
// operator means (fence), that no handler may still run under it (force),
// and asks for confirmation (yes).
func (c *cli) mayRelease(rec core.Record, v inspectView, fence string, force, yes bool, now time.Time) error {
	if fence != "" && fence != v.Fence {
		return fmt.Errorf("nothing released: the record changed since it was inspected (fence %s, now %s); inspect it again: %w",
			fence, v.Fence, idem.ErrRecordChanged)
	}
	if rec.Status == core.StatusInProgress && !rec.LeaseExpired(now) && !force {
		return &notReleasedError{fmt.Sprintf("not released: the lease is live until %s: the handler may still be running, "+
			"and releasing would let a second execution start beside it. Wait for the lease to end (the next delivery then takes "+
			"the key over), or pass --force", rec.LeaseUntil.UTC().Format(time.RFC3339))}
	}
	if yes {
		return nil
	}
	return c.confirm("Release (delete) this record? The key's next call runs the handler again.")
}
