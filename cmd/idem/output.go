package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// States of a record as the commands show and select them (list --status):
// the stored status, with in-progress records split by their lease and
// failed ones by their retryability.
const (
	stateInProgress      = "in_progress"      // in progress, lease live
	stateStuck           = "stuck"            // in progress, lease ended: the next delivery takes it over
	stateSucceeded       = "succeeded"        // replayed to duplicates
	stateFailedRetryable = "failed-retryable" // runs again while attempts are left
	stateFailedPermanent = "failed-permanent" // replayed to duplicates; release to run again
	stateExpired         = "expired"          // past retention: counts as absent
)

// listStates are list's --status values: the stored statuses (in_progress
// takes in live and stuck records, failed both kinds of failure) and the
// states that refine them.
var listStates = []string{stateInProgress, stateStuck, string(core.StatusFailed), stateFailedRetryable, stateFailedPermanent, stateSucceeded}

// selects reports whether list --status filter selects a record in state.
func selects(filter, state string) bool {
	switch filter {
	case "":
		return state != stateExpired
	case stateInProgress:
		return state == stateInProgress || state == stateStuck
	case string(core.StatusFailed):
		return state == stateFailedRetryable || state == stateFailedPermanent
	}
	return state == filter
}

// stateOf returns rec's state at now, by core's rules (Record.Expired,
// Record.LeaseExpired).
func stateOf(rec core.Record, now time.Time) string {
	switch {
	case rec.Expired(now):
		return stateExpired
	case rec.Status == core.StatusInProgress && rec.LeaseExpired(now):
		return stateStuck
	case rec.Status == core.StatusFailed && rec.Retryable:
		return stateFailedRetryable
	case rec.Status == core.StatusFailed:
		return stateFailedPermanent
	}
	return string(rec.Status)
}

// recordView is a record as the commands show it: the key only as its hash
// (idem.HashKey), the result only as its size.
type recordView struct {
	KeyHash string `json:"key_hash"`
	// Key is the key, where it is a derived key (a hash that holds no user
	// data, as the wrappers' keys are): the logs' key field.
	Key           string     `json:"key,omitempty"`
	Status        string     `json:"status"`
	State         string     `json:"state"`
	Attempts      int        `json:"attempts"`
	LeaseUntil    *time.Time `json:"lease_until,omitempty"`
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
	UpdatedAt     *time.Time `json:"updated_at,omitempty"`
	Error         string     `json:"error,omitempty"`
	ResultBytes   int        `json:"result_bytes"`
	ResultOmitted bool       `json:"result_omitted"`
	// ResultKept is where a result kept outside its record is ("result
	// item", "blob store"), ResultBytes then its size as stored.
	ResultKept        string `json:"result_kept,omitempty"`
	FingerprintPrefix string `json:"fingerprint_prefix,omitempty"`
}

// fingerprintPrefixLen is how many hex digits of the fingerprint are shown.
const fingerprintPrefixLen = 12

func viewOf(rec core.Record, now time.Time) recordView {
	key := logKey(rec.Key)
	v := recordView{
		KeyHash:       idem.HashKey(key),
		Status:        string(rec.Status),
		State:         stateOf(rec, now),
		Attempts:      rec.Attempts,
		LeaseUntil:    timePtr(rec.LeaseUntil),
		ExpiresAt:     timePtr(rec.ExpiresAt),
		UpdatedAt:     timePtr(rec.UpdatedAt),
		Error:         rec.Error,
		ResultBytes:   len(rec.Result),
		ResultOmitted: rec.ResultOmitted,
	}
	if core.IsDerivedKey(key) {
		v.Key = key
	}
	v.FingerprintPrefix = rec.Fingerprint[:min(len(rec.Fingerprint), fingerprintPrefixLen)]
	return v
}

// derivedKeyLen is the length of a key core.DeriveKey makes.
const derivedKeyLen = len(core.DerivedKeyPrefix) + 64

// logKey is the key of a record as the runner that wrote it had it, the key
// its logs name (key_hash is its hash, key the key itself where it is
// derived): the key itself, or, for a key that ends in a derived key after
// something else, that derived key. A store's key prefix (ddbstore.
// WithKeyPrefix) comes before the runner's key, and the wrappers' keys are
// derived keys; so without --key-prefix, a record's hash is still the one
// its logs show.
func logKey(key string) string {
	if len(key) > derivedKeyLen && core.IsDerivedKey(key[len(key)-derivedKeyLen:]) {
		return key[len(key)-derivedKeyLen:]
	}
	return key
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// when formats t for tables: RFC 3339 in UTC and its distance from now.
func when(t *time.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	return fmt.Sprintf("%s (%s)", t.Format(time.RFC3339), relative(*t, now))
}

// stamp formats t for table columns.
func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

// relative says how far t is from now: "in 4m30s", "2h13m ago", "now".
func relative(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case d > -time.Second && d < time.Second:
		return "now"
	case d > 0:
		return "in " + short(d)
	}
	return short(-d) + " ago"
}

// short formats d to the second, days as "d", at most two units.
func short(d time.Duration) string {
	d = d.Round(time.Second)
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	h, m, s := d/time.Hour, (d%time.Hour)/time.Minute, (d%time.Minute)/time.Second
	switch {
	case days > 0:
		return fmt.Sprintf("%dd%dh", days, h)
	case h > 0:
		return fmt.Sprintf("%dh%dm", h, m)
	case m > 0:
		return fmt.Sprintf("%dm%ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}

// resultText describes a record's result.
func resultText(v recordView) string {
	switch {
	case v.ResultOmitted:
		return "omitted (too large to keep; duplicates are answered \"succeeded\" without it)"
	case v.ResultBytes == 0:
		return "none"
	case v.ResultKept != "":
		return fmt.Sprintf("%d bytes as stored, in its %s", v.ResultBytes, v.ResultKept)
	}
	return fmt.Sprintf("%d bytes", v.ResultBytes)
}

// clip shortens s to n runes for a table column, on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// table writes rows aligned in columns, each cell made printable.
func table(w io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = printable(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// unprintable reports whether r must not reach a terminal as it is: a
// control character (C0, DEL, C1: ESC starts the sequences that move the
// cursor, set the window's title or clear the screen), a format character
// (the bidirectional overrides reorder what is shown), a separator other
// than the space, or a rune that is not valid.
func unprintable(r rune) bool {
	return r != ' ' && !unicode.IsPrint(r)
}

// printable returns s with each unprintable rune written as a Go escape
// (\x1b, \u202e) and each byte that is not UTF-8 as \xNN: text a record
// holds (a handler's error often quotes the message that caused it, which
// anyone who may send a message chose) is shown, never obeyed.
func printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, unprintable) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case unprintable(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

// writeJSON writes v as indented JSON, with every unprintable rune that
// encoding/json leaves as it is (DEL, the C1 controls, the format
// characters) escaped as \uXXXX: the same JSON, safe on a terminal.
func writeJSON(w io.Writer, v any) error {
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	out := buf.String()
	var b strings.Builder
	for _, r := range out {
		if r == '\n' || !unprintable(r) {
			b.WriteRune(r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&b, `\u%04x`, u)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
