package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// TestConditionsMatchCore checks the reservation, acquisition and completion
// conditions, evaluated by a real DynamoDB-API server, against the rules
// they translate: a reservation succeeds exactly when core.Reservable
// allows it, and is refused by the live record or, decided on a record
// that has gone, as the record changed; an acquisition
// exactly when core.Acquirable allows it (see checkAcquisitions), and a
// completion exactly when the caller's in-progress record is not Expired at
// the completion's time.
func TestConditionsMatchCore(t *testing.T) {
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1: DynamoDB integration test skipped")
	}
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Fatal("no DynamoDB endpoint: run under `go run ./internal/cmd/testenv -server dynalite`, or set IDEM_SKIP_INTEGRATION=1")
	}
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx, func(o *config.LoadOptions) error { o.Region = "us-east-1"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.RetryMaxAttempts, o.HTTPClient = 1, freshConnections() })
	setup := setupClient(cfg)
	layouts := map[string][]Option{
		"default": nil,
		// A single-table layout: the conditions name every attribute by
		// its configured name, and address the item by both keys.
		"single table": {WithKeyAttribute("PK"), WithSortKey("SK", "idempotency#"), WithKeyPrefix("orders#"),
			WithTTLAttribute("ttl"), WithAttributeNames(AttributeNames{Status: "state", Fingerprint: "fp", LeaseToken: "token",
				LeaseUntil: "lease", Attempts: "count", Retryable: "retry", Error: "cause", Result: "data",
				ResultEncoding: "enc", ResultOmitted: "omitted", UpdatedAt: "timestamp"})},
	}
	for name, opts := range layouts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			table := fmt.Sprintf("idem-conditions-%s-%d", strings.ReplaceAll(name, " ", "-"), time.Now().UnixNano())
			if _, err := CreateTable(ctx, setup, table, opts...); err != nil {
				t.Fatal(err)
			}
			defer func() { _, _ = setup.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}) }()
			s, err := New(client, table, opts...)
			if err != nil {
				t.Fatal(err)
			}
			checkConditions(t, s)
			checkAcquisitions(t, s)
		})
	}
}

// checkConditions checks every stored record against every caller's view
// at instants around its lease and retention ends.
func checkConditions(t *testing.T, s *Store) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	n := 0
	for _, stored := range storedRecords(at) {
		for _, sec := range []int{0, 29, 30, 59, 60, 61, 4000} {
			for _, pv := range []string{"nil", "same", "stale"} {
				n++
				key := fmt.Sprintf("cond:%d", n)
				st := stored
				st.Key = key
				checkReserve(t, s, st, pv, at(sec))
				checkComplete(t, s, st, at(sec))
			}
		}
	}
}

// storedRecords are records of every kind, with lease ends and retention
// ends around t0+30 and t0+60.
func storedRecords(at func(int) time.Time) []core.Record {
	base := core.Record{Fingerprint: "fp", LeaseToken: "tok-old", Attempts: 1, UpdatedAt: at(0)}
	inProgress := func(lease, exp int) core.Record {
		r := base
		r.Status, r.LeaseUntil, r.ExpiresAt = core.StatusInProgress, at(lease), at(exp)
		return r
	}
	done := func(st core.Status, retryable bool) core.Record {
		r := base
		r.Status, r.Retryable, r.ExpiresAt = st, retryable, at(60)
		return r
	}
	return []core.Record{
		inProgress(30, 3600), inProgress(30, 60), inProgress(60, 30), // the last: retention before the lease
		done(core.StatusSucceeded, false), done(core.StatusFailed, false), done(core.StatusFailed, true),
	}
}

// putRaw writes rec unconditionally as v0.1.0 wrote it (encodeV010: its
// steps, if any, kept in the record), which for a record without steps is
// how this release writes it too.
func (s *Store) putRaw(t *testing.T, rec core.Record) {
	t.Helper()
	s.putItems(t, s.encodeV010(normalize(rec), nil, ""))
}

// putItems writes items unconditionally. An unconditional put is safe to
// send again: this one call may retry what the SDK retries (a response cut
// by a closed connection, aws-sdk-go-v2 #2737, which moto's server
// provokes now and then even on fresh connections).
func (s *Store) putItems(t *testing.T, items ...map[string]types.AttributeValue) {
	t.Helper()
	retry := func(o *dynamodb.Options) { o.RetryMaxAttempts = 5 }
	for _, item := range items {
		if _, err := s.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}, retry); err != nil {
			t.Fatal(err)
		}
	}
}

func checkReserve(t *testing.T, s *Store, stored core.Record, pv string, now time.Time) {
	t.Helper()
	s.putRaw(t, stored)
	var prev *core.Record
	switch pv {
	case "same":
		p := stored
		prev = &p
	case "stale":
		p := stored
		p.LeaseToken = "tok-stale"
		prev = &p
	}
	var live *core.Record
	if !stored.Expired(now) {
		live = &stored
	}
	want, refusal := core.Reservable(live, prev, now), "a conflict"
	if live == nil {
		refusal = "the record changed"
	}
	rec := core.Reserve(stored.Key, "fp", "tok-new", prev, now, now.Add(time.Minute), time.Hour)
	err := s.Reserve(context.Background(), rec, prev, now)
	var ce *idem.ConflictError
	refused := errors.As(err, &ce) && live != nil || errors.Is(err, idem.ErrRecordChanged) && live == nil
	if got := err == nil; got != want || (err != nil && !refused) {
		t.Errorf("reserve over %v with prev %s at %s: applied %v (%v), core says %v (refused: %s)", stored, pv, now.Format(time.TimeOnly), got, err, want, refusal)
	}
}

func checkComplete(t *testing.T, s *Store, stored core.Record, now time.Time) {
	t.Helper()
	if stored.Status != core.StatusInProgress {
		return
	}
	s.putRaw(t, stored)
	want := !stored.Expired(now)
	_, err := s.Complete(context.Background(), core.Succeed(stored, []byte(`1`), now, time.Hour))
	if got := err == nil; got != want {
		t.Errorf("complete of %v at %s: applied %v (%v), core says %v", stored, now.Format(time.TimeOnly), got, err, want)
	}
}

// checkAcquisitions checks the acquisition's condition against
// core.Acquirable, and its count against core.Acquire, for every stored
// record at instants around its lease and retention ends, with the
// caller's fingerprint and another, in this release's encoding and in
// v0.1.0's (steps kept in the record). The one UpdateItem applies exactly
// where core allows it, but for the records it leaves to a second request
// (see Store.Acquire); Store.Acquire, second request included, applies
// exactly where core allows it, and leaves the steps core.Acquire carries.
func checkAcquisitions(t *testing.T, s *Store) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	p := core.Policy{MaxAttempts: 2}
	n := 0
	for _, stored := range acquireRecords(at) {
		for _, sec := range []int{0, 29, 30, 59, 60, 61, 4000} {
			for _, fp := range []string{"fp", "fp-other"} {
				for _, old := range []bool{false, true} {
					n++
					st := stored
					st.Key = fmt.Sprintf("acq:%d", n)
					checkAcquire(t, s, st, old, fp, at(sec), p)
				}
			}
		}
	}
}

// acquireRecords are storedRecords with one and two attempts (those that
// may have steps, with one attempt, also with a step), and a retryable
// failure that never expires (no TTL attribute).
func acquireRecords(at func(int) time.Time) []core.Record {
	var out []core.Record
	for _, r := range storedRecords(at) {
		for _, attempts := range []int{1, 2} {
			r.Attempts = attempts
			out = append(out, r)
			if attempts == 1 && (r.Status == core.StatusInProgress || r.Retryable) {
				r.Steps = []core.Step{{Name: "charge", Result: []byte(`"ch_1"`)}}
				out = append(out, r)
				r.Steps = nil
			}
		}
	}
	forever := core.Record{Fingerprint: "fp", LeaseToken: "tok-old", Attempts: 1, UpdatedAt: at(0), Status: core.StatusFailed, Retryable: true}
	return append(out, forever)
}

// leftToSecondWrite reports whether the acquisition's UpdateItem leaves
// stored to a second request (see Store.Acquire): a record past retention
// that carries a count (in progress, or a retryable failure).
func leftToSecondWrite(stored core.Record, now time.Time) bool {
	return stored.Expired(now) && carriesAttempts(stored)
}

func checkAcquire(t *testing.T, s *Store, stored core.Record, old bool, fp string, now time.Time, p core.Policy) {
	t.Helper()
	put := func() {
		if old {
			s.putRaw(t, stored)
			return
		}
		item, steps := s.encodeWithSteps(normalize(stored), 0)
		s.putItems(t, append(steps, item)...)
	}
	what := fmt.Sprintf("acquire over %v (v0.1.0's encoding %v) with fp %s at %s", stored, old, fp, now.Format(time.TimeOnly))
	allowed := core.Acquirable(&stored, fp, now, p)
	rec := core.Reserve(stored.Key, fp, "tok-new", nil, now, now.Add(time.Minute), time.Hour)
	want := core.Acquire(rec, &stored, now)
	wantAttempts := want.Attempts

	put()
	_, err := s.client.UpdateItem(context.Background(), s.acquireInput(s.encode(normalize(rec), nil, ""), normalize(rec), now, p))
	var ccf *types.ConditionalCheckFailedException
	if want := allowed && !leftToSecondWrite(stored, now); (err == nil) != want || (err != nil && !errors.As(err, &ccf)) {
		t.Errorf("%s: UpdateItem applied %v (%v), want %v", what, err == nil, err, want)
	}
	if err == nil {
		if got, _ := s.Get(context.Background(), stored.Key, now); got.Attempts != wantAttempts || got.LeaseToken != "tok-new" || !sameSteps(got.Steps, want.Steps) {
			t.Errorf("%s: stored %v with steps %q, want attempt %d with steps %q", what, got, got.Steps, wantAttempts, want.Steps)
		}
	}

	put()
	got, _, err := s.Acquire(context.Background(), rec, now, p)
	if (err == nil) != allowed {
		t.Errorf("%s: Acquire = %v, core allows it: %v", what, err, allowed)
	}
	if err == nil && got.Attempts != wantAttempts {
		t.Errorf("%s: Acquire wrote attempt %d, want %d", what, got.Attempts, wantAttempts)
	}
	if after, _ := s.Get(context.Background(), stored.Key, now); err == nil && !sameSteps(after.Steps, want.Steps) {
		t.Errorf("%s: Acquire left steps %q, want %q", what, after.Steps, want.Steps)
	}
}

// freshConnections is the HTTP client of the tests whose SDK client may not
// retry (RetryMaxAttempts 1): a new connection per request, so that no
// request is sent on a kept-alive connection the server is closing (Go's
// transport does not resend a POST it may have sent, and moto's server
// closes idle connections at will).
func freshConnections() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	return &http.Client{Transport: tr}
}

// setupClient is the SDK client that creates and deletes the tables of the
// tests whose client under test does not retry: setup is not under test, and
// moto may cut a response (use of closed network connection) even on a fresh
// connection, so it retries like a default client.
func setupClient(cfg aws.Config) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.RetryMaxAttempts = 5 })
}
