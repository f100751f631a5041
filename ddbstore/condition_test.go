package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem/core"
)

// TestConditionsMatchCore checks the reservation and completion conditions,
// evaluated by a real DynamoDB-API server, against the rules they translate:
// a reservation conditioned on prev succeeds exactly when the stored record
// is Expired or Replaceable (core), and a completion exactly when the
// caller's in-progress record is not Expired at the completion's time.
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
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
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
			if _, err := CreateTable(ctx, client, table, opts...); err != nil {
				t.Fatal(err)
			}
			defer client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
			s, err := New(client, table, opts...)
			if err != nil {
				t.Fatal(err)
			}
			checkConditions(t, s)
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

func (s *Store) putRaw(t *testing.T, rec core.Record) {
	t.Helper()
	_, err := s.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: s.encode(normalize(rec), nil, "")})
	if err != nil {
		t.Fatal(err)
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
	want := stored.Expired(now) || core.Replaceable(stored, prev, now)
	rec := core.Reserve(stored.Key, "fp", "tok-new", prev, now, now.Add(time.Minute), time.Hour)
	item := s.encode(normalize(rec), nil, "")
	_, err := s.client.PutItem(context.Background(), s.reserveInput(item, prev, now))
	var ccf *types.ConditionalCheckFailedException
	if got := err == nil; got != want || (err != nil && !errors.As(err, &ccf)) {
		t.Errorf("reserve over %v with prev %s at %s: applied %v (%v), core says %v", stored, pv, now.Format(time.TimeOnly), got, err, want)
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
