package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
)

// noRecordError is a key without a live record. errors.Is(err,
// idem.ErrNotFound) holds for it. hint says which flags made the key, to
// check when a record was expected.
type noRecordError struct{ keyHash, table, hint string }

func (e *noRecordError) Error() string {
	msg := fmt.Sprintf("no live record for key hash %s in table %q (never written, released, or past its retention): the key's next call runs the handler",
		e.keyHash, e.table)
	if e.hint != "" {
		msg += ".\nIf a record was expected, " + e.hint
	}
	return msg
}

func (e *noRecordError) Is(target error) bool { return target == idem.ErrNotFound }

// inspectView is what inspect shows.
type inspectView struct {
	Table    string      `json:"table"`
	Source   string      `json:"source"`
	KeyHash  string      `json:"key_hash"`
	Key      string      `json:"key,omitempty"` // the key, where it is derived (recordView.Key)
	Found    bool        `json:"found"`
	Record   *recordView `json:"record,omitempty"`
	NextCall *nextCall   `json:"next_call,omitempty"`
	// Fence identifies the record as read, for release --fence.
	Fence string `json:"fence,omitempty"`
}

// nextCall is what a call with the record's own payload would get now
// (core.Decide).
type nextCall struct {
	Action      string     `json:"action"`
	Attempt     int        `json:"attempt,omitempty"`
	RetryAt     *time.Time `json:"retry_at,omitempty"`
	Detail      string     `json:"detail"`
	MaxAttempts int        `json:"max_attempts"` // the bound applied; 0: none
}

// maxAttemptsUsage is --max-attempts's usage, for inspect and release.
const maxAttemptsUsage = "the runner's WithMaxAttempts, for the next call's decision; 0 or unset, the runner's default for the source: no bound for an SQS message (the SQS wrapper's: the queue limits its deliveries), idem.DefaultMaxAttempts for a key or a request"

// attemptLimit is the bound of a key's executions the next call's decision
// applies: --max-attempts's n if positive, else the runner's default for
// the source k names.
func (k *keyFlags) attemptLimit(n int) (int, error) {
	switch {
	case n < 0:
		return 0, usageErrorf("--max-attempts %d: want the runner's WithMaxAttempts (at least 1), or 0 for its default", n)
	case n > 0:
		return n, nil
	case k.sqsEvent != "":
		return core.NoAttemptLimit, nil
	}
	return idem.DefaultMaxAttempts, nil
}

const keySynopsis = "(--key KEY | --sqs-event FILE [--message N] | --http-event FILE --kind rest|httpapi|url|alb) " +
	"[--key-config FILE | --key-source SRC... [--action NAME] [--envelope sns|eventbridge]... [--group-tenant] [--endpoint NAME] [--webhook SENDER] [--identity-header NAME]] [--tenant ID]"

func (c *cli) inspect(ctx context.Context, args []string) error {
	o := c.flags("inspect", "--table T "+keySynopsis+" [--max-attempts N] [--json]")
	var k keyFlags
	k.register(o.fs)
	maxAttempts := o.fs.Int("max-attempts", 0, maxAttemptsUsage)
	if err := o.parse(args); err != nil {
		return err
	}
	key, source, err := k.resolve(&o.layout)
	if err != nil {
		return err
	}
	if *maxAttempts, err = k.attemptLimit(*maxAttempts); err != nil {
		return err
	}
	store, err := c.open(ctx, o)
	if err != nil {
		return err
	}
	now := c.now()
	_, v, err := c.read(ctx, store, key, source, now, *maxAttempts)
	var nr *noRecordError
	if errors.As(err, &nr) {
		nr.hint = k.notFoundHint(o.layout)
		if o.json {
			_ = writeJSON(c.stdout, v) // found: false, for scripts; the exit code says it too
		}
	}
	if err != nil {
		return err
	}
	return c.show(o.json, v, now)
}

// read gets key's record and makes its view; without a live record, the
// error is a *noRecordError and the view says so.
func (c *cli) read(ctx context.Context, store *ddbstore.Store, key, source string, now time.Time, maxAttempts int) (core.Record, inspectView, error) {
	v := inspectView{Table: store.Table(), Source: source, KeyHash: idem.HashKey(logKey(key))}
	if core.IsDerivedKey(logKey(key)) {
		v.Key = logKey(key)
	}
	rec, err := store.Get(ctx, key, now)
	if errors.Is(err, idem.ErrNotFound) {
		return rec, v, &noRecordError{keyHash: v.KeyHash, table: v.Table}
	}
	if err != nil {
		return rec, v, err
	}
	rv := viewOf(rec, now)
	v.Found, v.Record, v.Fence = true, &rv, fenceOf(rec)
	v.NextCall = decide(rec, now, maxAttempts)
	return rec, v, nil
}

// decision is core.Decide for a call with rec's own payload at now. The
// key is a stand-in: rec was stored under a valid key, and a record listed
// without --key-prefix holds the store's prefix in its key, which no call
// would pass (the decision does not otherwise depend on the key).
func decision(rec core.Record, now time.Time, maxAttempts int) core.Decision {
	const standIn = "idem-cli:stored-key"
	return core.Decide(standIn, &rec, rec.Fingerprint, now, core.Policy{MaxAttempts: maxAttempts})
}

// decide says what a call with rec's own payload would get at now.
func decide(rec core.Record, now time.Time, maxAttempts int) *nextCall {
	d := decision(rec, now, maxAttempts)
	n := &nextCall{Action: d.Action.String(), MaxAttempts: maxAttempts}
	if maxAttempts == core.NoAttemptLimit {
		n.MaxAttempts = 0
	}
	switch d.Action {
	case core.Execute:
		n.Attempt = d.Attempt
		n.Detail = fmt.Sprintf("runs the handler (attempt %d)", d.Attempt)
		if d.Takeover {
			n.Detail += ", taking over the ended lease"
		}
	case core.Replay:
		n.Detail = "replays the stored result; the handler does not run"
		if rec.Status == core.StatusFailed {
			n.Detail = "replays the permanent failure; the handler does not run (release the key to run it again)"
		}
	case core.InProgress:
		n.RetryAt = timePtr(d.RetryAt)
		n.Detail = "refused as in progress until the lease ends"
	case core.Reject:
		n.Detail = "rejected: " + d.Err.Error()
		if errors.Is(d.Err, core.ErrRetriesExhausted) {
			n.Detail = "rejected: retries exhausted (release the key to run it again)"
		}
	}
	return n
}

// show writes v as a table of fields, or as JSON.
func (c *cli) show(asJSON bool, v inspectView, now time.Time) error {
	if asJSON {
		return writeJSON(c.stdout, v)
	}
	return writeRecord(c.stdout, v, now)
}

func writeRecord(w io.Writer, v inspectView, now time.Time) error {
	r := v.Record
	bound := "no bound on attempts"
	if v.NextCall.MaxAttempts > 0 {
		bound = fmt.Sprintf("max attempts %d", v.NextCall.MaxAttempts)
	}
	next := fmt.Sprintf("%s: %s (with the same payload, %s)", v.NextCall.Action, v.NextCall.Detail, bound)
	errText := "-"
	if r.Error != "" {
		errText = strings.Join(strings.Fields(r.Error), " ")
	}
	rows := [][]string{
		{"table:", v.Table},
		{"source:", v.Source},
		{"key hash:", v.KeyHash},
	}
	if v.Key != "" {
		rows = append(rows, []string{"key:", v.Key})
	}
	return table(w, append(rows, [][]string{
		{"state:", r.State},
		{"attempts:", strconv.Itoa(r.Attempts)},
		{"updated:", when(r.UpdatedAt, now)},
		{"lease end:", when(r.LeaseUntil, now)},
		{"retention:", when(r.ExpiresAt, now)},
		{"error:", errText},
		{"result:", resultText(*r)},
		{"fingerprint:", r.FingerprintPrefix + "…"},
		{"next call:", next},
		{"fence:", v.Fence},
	}...))
}

// fenceOf identifies rec as read: its status, attempt and lease token, what
// Release's condition compares (core.SameWrite).
func fenceOf(rec core.Record) string {
	return fmt.Sprintf("%s/%d/%s", rec.Status, rec.Attempts, rec.LeaseToken)
}

// parseFence is the inverse of fenceOf.
func parseFence(s string) (status core.Status, attempts int, token string, err error) {
	parts := strings.SplitN(s, "/", 3)
	if len(parts) == 3 {
		status = core.Status(parts[0])
		attempts, err = strconv.Atoi(parts[1])
		token = parts[2]
	}
	if len(parts) != 3 || err != nil || !status.Valid() || token == "" {
		return "", 0, "", usageErrorf("--fence %q: want the fence inspect printed (STATUS/ATTEMPTS/TOKEN)", s)
	}
	return status, attempts, token, nil
}
