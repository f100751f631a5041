package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/fit"
)

// Client is the part of a go-redis client that the store calls: every call
// is a script. Every go-redis client satisfies it: *redis.Client (also from
// NewFailoverClient), *redis.ClusterClient, *redis.Ring and
// redis.UniversalClient (it is a subset of redis.Scripter); tests may pass a
// fake. The store sets no client options of its own: addresses,
// credentials, timeouts and retries come from the client's configuration.
type Client interface {
	// EvalSha runs a script the server has loaded.
	EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd
	// Eval runs a script, loading it (after a NOSCRIPT answer to EvalSha).
	Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd
}

// Store is an idem.Store on Redis (or Valkey). It is safe for concurrent use
// by multiple goroutines, and by any number of processes sharing the server:
// every write is one Lua script, which Redis runs atomically. Create one with
// New; the zero value is not usable.
type Store struct {
	client Client
	waiter func(ctx context.Context, name string) (*redis.Client, error) // nil without WithWait
	options
}

var _ idem.Store = (*Store)(nil)

// New returns a Store on client, configured by opts. New makes no calls. A
// bad option is an error, and so is WithWait with a client it cannot pin to
// one connection.
func New(client Client, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	s := &Store{client: client, options: o}
	if o.waitReplicas > 0 {
		if s.waiter, err = newWaiter(client, o.waitTimeout); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// newWaiter returns how to reach the primary of a key with a client whose
// pipelines use one connection, for WAIT.
func newWaiter(client Client, timeout time.Duration) (func(context.Context, string) (*redis.Client, error), error) {
	var readTimeout time.Duration
	var w func(context.Context, string) (*redis.Client, error)
	switch c := client.(type) {
	case *redis.Client:
		readTimeout = c.Options().ReadTimeout
		w = func(context.Context, string) (*redis.Client, error) { return c, nil }
	case *redis.ClusterClient:
		readTimeout = c.Options().ReadTimeout
		w = c.MasterForKey
	default:
		return nil, fmt.Errorf("redisstore: WithWait needs a *redis.Client or *redis.ClusterClient, not %T", client)
	}
	// go-redis: 0 is its default of 3 s, negative values disable the deadline.
	if readTimeout == 0 {
		readTimeout = 3 * time.Second
	}
	if readTimeout > 0 && timeout >= readTimeout {
		return nil, fmt.Errorf("redisstore: WithWait timeout %v must be shorter than the client's ReadTimeout %v", timeout, readTimeout)
	}
	return w, nil
}

// Name returns the Redis key name of the record of key: the prefix, then the
// key as a hash tag, "<prefix>{<key>}".
func (s *Store) Name(key string) string { return s.prefix + "{" + key + "}" }

func checkKey(key string) bool { return key != "" && len(key) <= MaxKeySize }

func (s *Store) fail(op string, sentinel error, format string, args ...any) error {
	return core.MarkPermanent(&Error{Op: op, Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)})
}

// pexpireat is the server-side expiry of rec (normalized), in epoch
// milliseconds: the later of its retention's end and its lease's end, plus
// the expiry margin; "" when the record never expires (zero ExpiresAt).
func (s *Store) pexpireat(rec core.Record) string {
	if rec.ExpiresAt.IsZero() {
		return ""
	}
	end := rec.ExpiresAt
	if rec.LeaseUntil.After(end) {
		end = rec.LeaseUntil
	}
	return strconv.FormatInt(end.Add(s.expiryMargin).UnixMilli(), 10)
}

func (s *Store) waitFlag() string {
	if s.waiter != nil {
		return "1"
	}
	return ""
}

// Reserve implements idem.Store.Reserve with one script (EVALSHA; one EVAL
// more the first time a server sees it) that applies the contract's rules
// (core.Record.Expired, core.Reservable, core.SameWrite) at now and, when
// the reservation is refused, answers with the blocking record: a conflict
// costs one round trip. A reservation over prev where no live record exists
// is refused (idem.ErrRecordChanged). After a failure that may have been applied (a
// timeout, a connection lost after the command was sent), one read checks
// for the reservation, which is then reported as made (with WithWait:
// reported as not replicated, since no WAIT confirmed it).
//
// A key that is empty or longer than MaxKeySize, or a record above the
// record size limit, is a permanent error wrapping ErrKeyTooLarge or
// ErrRecordTooLarge, and nothing is sent.
func (s *Store) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	const op = "reserve"
	if err := s.checkReservation(ctx, op, &rec); err != nil {
		return err
	}
	name, fields := s.Name(rec.Key), encode(rec, nil, "")
	verdict, flat, err := s.eval(ctx, op, reserveScript, name, s.reserveArgs(rec, prev, now, fields))
	if err != nil {
		t := translate(op, err)
		if t.maybeApplied {
			if _, own := s.ownWrite(ctx, op, rec); own {
				return s.unconfirmed(op, err)
			}
		}
		return t.err
	}
	switch verdict {
	case verdictGone:
		return fmt.Errorf("redisstore: reserve key hash %s: %w: the record the reservation replaces is gone",
			idem.HashKey(rec.Key), idem.ErrRecordChanged)
	case verdictRefused:
	default:
		return nil
	}
	existing, found, err := decodeFlat(rec.Key, flat)
	if err != nil {
		return core.MarkPermanent(&Error{Op: op, Err: err})
	}
	if !found {
		return s.fail(op, ErrRejected, "the script refused the reservation without a blocking record")
	}
	return &idem.ConflictError{Existing: existing}
}

// reserveArgs returns reserveLua's ARGV for rec (normalized) and its fields.
func (s *Store) reserveArgs(rec core.Record, prev *core.Record, now time.Time, fields []any) []any {
	var prevToken, prevStatus string
	prevSteps := 0
	if prev != nil {
		prevToken, prevStatus, prevSteps = prev.LeaseToken, string(prev.Status), len(prev.Steps)
	}
	return append([]any{now.UnixMilli(), prevToken, prevStatus, rec.LeaseToken, strconv.Itoa(rec.Attempts),
		s.pexpireat(rec), s.waitFlag(), prevSteps}, fields...)
}

// completeArgs returns completeLua's ARGV for rec (normalized) and its fields.
func (s *Store) completeArgs(rec core.Record, fields []any) []any {
	return append([]any{rec.UpdatedAt.UnixMilli(), rec.LeaseToken, string(rec.Status), strconv.Itoa(rec.Attempts),
		s.pexpireat(rec), s.waitFlag()}, fields...)
}

// ownWrite reads the record after a write whose outcome is unknown and
// reports whether it is rec (core.SameWrite), with the stored record. Any
// failure of the read counts as no.
func (s *Store) ownWrite(ctx context.Context, op string, rec core.Record) (core.Record, bool) {
	if ctx.Err() != nil {
		return core.Record{}, false
	}
	stored, found, err := s.read(ctx, op, rec.Key)
	return stored, err == nil && found && core.SameWrite(stored, rec)
}

// unconfirmed is the answer to a write found applied after its own answer
// was lost (cause): success, or with WithWait an ErrNotReplicated, since no
// WAIT confirmed it.
func (s *Store) unconfirmed(op string, cause error) error {
	if s.waiter == nil {
		return nil
	}
	return core.MarkTransient(&Error{Op: op, Err: fmt.Errorf("%w: the write was applied, its WAIT was lost: %w", ErrNotReplicated, cause)})
}

// eval runs sc on the record name and returns the script's verdict and the
// record it answered with (field, value, ...). With WithWait it pipelines a
// WAIT after the script on the same connection and fails with
// ErrNotReplicated when the script wrote but too few replicas acknowledged.
func (s *Store) eval(ctx context.Context, op string, sc script, name string, args []any) (int64, []any, error) {
	if s.waiter == nil {
		v, err := sc.run(ctx, s.client, name, args)
		if err != nil {
			return 0, nil, err
		}
		return parseAnswer(op, v)
	}
	node, err := s.waiter(ctx, name)
	if err != nil {
		return 0, nil, err
	}
	v, acked, werr := s.runAndWait(ctx, node, sc, name, args)
	if v == nil {
		return 0, nil, werr
	}
	verdict, flat, err := parseAnswer(op, v)
	if err != nil || (verdict != verdictWritten && verdict != verdictSame) {
		return verdict, flat, err
	}
	if werr != nil || acked < int64(s.waitReplicas) {
		cause := werr
		if cause == nil {
			cause = fmt.Errorf("%d of %d replicas within %v", acked, s.waitReplicas, s.waitTimeout)
		}
		return 0, nil, core.MarkTransient(&Error{Op: op, Err: fmt.Errorf("%w: %w", ErrNotReplicated, cause)})
	}
	return verdict, flat, nil
}

// runAndWait pipelines the script (EVALSHA, or EVAL after NOSCRIPT) and a
// WAIT on node's connection. v is nil when the script failed (err is its
// error); otherwise acked is WAIT's answer and err WAIT's failure, if any.
func (s *Store) runAndWait(ctx context.Context, node *redis.Client, sc script, name string, args []any) (v any, acked int64, err error) {
	for try := 0; ; try++ {
		var run *redis.Cmd
		var wait *redis.Cmd
		_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
			if try == 0 {
				run = p.EvalSha(ctx, sc.sha, []string{name}, args...)
			} else {
				run = p.Eval(ctx, sc.src, []string{name}, args...)
			}
			wait = p.Do(ctx, "wait", s.waitReplicas, s.waitTimeout.Milliseconds())
			return nil
		})
		v, err := run.Result()
		if err != nil {
			if try == 0 && isNoScript(err) {
				continue
			}
			return nil, 0, err
		}
		acked, err := wait.Int64()
		return v, acked, err
	}
}

// parseAnswer splits a script's answer into its verdict and the record after it.
func parseAnswer(op string, v any) (int64, []any, error) {
	a, ok := v.([]any)
	if ok && len(a) > 0 {
		if verdict, ok := a[0].(int64); ok && verdict >= verdictRefused && verdict <= verdictTooLarge {
			return verdict, a[1:], nil
		}
	}
	return 0, nil, core.MarkPermanent(&Error{Op: op, Err: fmt.Errorf("%w: unexpected script answer %T", ErrRejected, v)})
}

// read is one run of getLua on the record of key. found is false if there
// is none.
func (s *Store) read(ctx context.Context, op, key string) (core.Record, bool, error) {
	v, err := getScript.run(ctx, s.client, s.Name(key), nil)
	if err != nil {
		return core.Record{}, false, translate(op, err).err
	}
	flat, ok := v.([]any)
	if !ok {
		return core.Record{}, false, core.MarkPermanent(&Error{Op: op, Err: fmt.Errorf("%w: unexpected script answer %T", ErrRejected, v)})
	}
	rec, found, err := decodeFlat(key, flat)
	if err != nil {
		return core.Record{}, false, core.MarkPermanent(&Error{Op: op, Err: err})
	}
	return rec, found, nil
}

// Complete implements idem.Store.Complete with one script (EVALSHA) that
// writes rec if and only if the stored record is in progress, holds
// rec.LeaseToken and is not Expired at rec.UpdatedAt, and otherwise answers
// with the stored record.
//
// A result of more than the compression threshold is stored gzip-compressed
// when that makes it smaller. If the record would still exceed the record
// size limit, a succeeded record is stored without its result and the
// returned record has ResultOmitted set; a failed record's error message is
// shortened. Completion never fails for size.
//
// If the stored record is this very completion, applied by an earlier try
// whose answer was lost, Complete returns it as success; after a failure
// that may have been applied, one read looks for it in the same way (with
// WithWait, finding it so is ErrNotReplicated: no WAIT confirmed it).
// Otherwise a refusal is an error wrapping idem.ErrLeaseLost.
func (s *Store) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	const op = "complete"
	if err := ctx.Err(); err != nil {
		return core.Record{}, err
	}
	if rec.Status != core.StatusSucceeded && rec.Status != core.StatusFailed {
		return core.Record{}, fmt.Errorf("redisstore: complete needs a succeeded or failed record, got %q", rec.Status)
	}
	if !checkKey(rec.Key) {
		return core.Record{}, s.fail(op, ErrKeyTooLarge, "key is %d bytes, want 1 to %d", len(rec.Key), MaxKeySize)
	}
	rec = normalize(rec)
	rec.Error = strings.ToValidUTF8(rec.Error, "\uFFFD")
	name := s.Name(rec.Key)
	fields, stored, err := s.fit(op, name, rec)
	if err != nil {
		return core.Record{}, err
	}
	verdict, flat, err := s.eval(ctx, op, completeScript, name, s.completeArgs(rec, fields))
	if err != nil {
		t := translate(op, err)
		if t.maybeApplied {
			if got, own := s.ownWrite(ctx, op, rec); own {
				if err := s.unconfirmed(op, err); err != nil {
					return core.Record{}, err
				}
				return got, nil
			}
		}
		return core.Record{}, t.err
	}
	if verdict == verdictWritten {
		return stored, nil
	}
	existing, found, err := decodeFlat(rec.Key, flat)
	if err != nil {
		return core.Record{}, core.MarkPermanent(&Error{Op: op, Err: err})
	}
	if verdict == verdictSame {
		return existing, nil
	}
	return core.Record{}, leaseLost(rec, existing, found)
}

func leaseLost(rec, existing core.Record, found bool) error {
	what := "no record"
	if found {
		what = fmt.Sprintf("a %s record (attempt %d) with another lease", existing.Status, existing.Attempts)
		if existing.LeaseToken == rec.LeaseToken {
			what = fmt.Sprintf("a %s record (attempt %d) with this lease", existing.Status, existing.Attempts)
		}
	}
	return fmt.Errorf("redisstore: complete, key hash %s: %w: redis holds %s", idem.HashKey(rec.Key), idem.ErrLeaseLost, what)
}

// fit encodes a completed record within the record size limit, compressing
// the result or, failing that, dropping it (succeeded) or shortening the
// error message (failed). It returns the fields and the record as stored.
func (s *Store) fit(op, name string, rec core.Record) ([]any, core.Record, error) {
	fields, stored, size, ok := fit.Record(rec, s.compressAbove, s.maxRecord, func(rec core.Record, body []byte, encoding string) ([]any, int) {
		fields := encode(rec, body, encoding)
		return fields, recordSize(name, fields)
	})
	if !ok {
		return nil, core.Record{}, s.fail(op, ErrRecordTooLarge, "record without result is %d bytes, at most %d", size, s.maxRecord)
	}
	return fields, stored, nil
}

// Get implements idem.Store.Get with one script that reads the record's hash
// on its primary. A record that is Expired at now is reported as
// idem.ErrNotFound even if the server has not deleted it yet.
func (s *Store) Get(ctx context.Context, key string, now time.Time) (core.Record, error) {
	const op = "get"
	if err := ctx.Err(); err != nil {
		return core.Record{}, err
	}
	if !checkKey(key) {
		return core.Record{}, s.fail(op, ErrKeyTooLarge, "key is %d bytes, want 1 to %d", len(key), MaxKeySize)
	}
	rec, found, err := s.read(ctx, op, key)
	if err != nil {
		return core.Record{}, err
	}
	if !found || rec.Expired(now) {
		return core.Record{}, fmt.Errorf("redisstore: get, key hash %s: %w", idem.HashKey(key), idem.ErrNotFound)
	}
	return rec, nil
}
