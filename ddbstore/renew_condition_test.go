package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// TestRenewConditionMatchesCore checks the renewal's condition, evaluated by
// a real DynamoDB-API server, against the rules it translates: for every
// stored record, token, time and lease end, RenewLease writes exactly when
// core.Renewable holds and core.Renewed does not, answers nil with the
// stored record when core.Renewed holds, and ErrLeaseLost otherwise; what
// it writes is core.Renew's lease and retention.
func TestRenewConditionMatchesCore(t *testing.T) {
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
	opts := []Option{WithKeyAttribute("PK"), WithSortKey("SK", "idempotency#"), WithTTLAttribute("ttl"),
		WithAttributeNames(AttributeNames{Status: "state", LeaseToken: "token", LeaseUntil: "lease", UpdatedAt: "timestamp"})}
	table := fmt.Sprintf("idem-renew-conditions-%d", time.Now().UnixNano())
	if _, err := CreateTable(ctx, setup, table, opts...); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = setup.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}) }()
	s, err := New(client, table, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	n := 0
	for _, stored := range storedRecords(at) {
		for _, sec := range []int{0, 29, 30, 59, 60, 61} {
			for _, token := range []string{"tok-old", "tok-other"} {
				for _, untilSec := range []int{30, 45, 90, 4000} {
					if untilSec <= sec {
						continue
					}
					n++
					st := stored
					st.Key = fmt.Sprintf("renew:%d", n)
					checkRenew(t, s, st, token, at(untilSec), at(sec))
				}
			}
		}
	}
}

func checkRenew(t *testing.T, s *Store, stored core.Record, token string, until, now time.Time) {
	t.Helper()
	s.putRaw(t, stored)
	stored = normalize(stored)
	rec := stored
	rec.LeaseToken = token
	got, err := s.RenewLease(context.Background(), rec, until, now)
	_, after, found, rerr := s.readFor(context.Background(), "test", stored.Key, nil)
	if rerr != nil || !found {
		t.Fatalf("read after renewal: %v, found %v", rerr, found)
	}
	what := fmt.Sprintf("renewal by %s until %s at %s of %v", token, until.Format(time.TimeOnly), now.Format(time.TimeOnly), stored)
	switch {
	case core.Renewed(stored, token, until):
		if err != nil || !after.LeaseUntil.Equal(stored.LeaseUntil) || !got.LeaseUntil.Equal(stored.LeaseUntil) {
			t.Errorf("%s: %v, stored lease %s; core says it is already renewed: nil and no write", what, err, after.LeaseUntil)
		}
	case core.Renewable(stored, token, now):
		want := normalize(core.Renew(rec, until, now))
		if err != nil || !after.LeaseUntil.Equal(want.LeaseUntil) || !after.ExpiresAt.Equal(want.ExpiresAt) ||
			!got.LeaseUntil.Equal(want.LeaseUntil) || after.Fingerprint != stored.Fingerprint || after.Attempts != stored.Attempts {
			t.Errorf("%s: %v, stored %v; core says it renews to %v", what, err, after, want)
		}
	default:
		if !errors.Is(err, idem.ErrLeaseLost) || !after.LeaseUntil.Equal(stored.LeaseUntil) {
			t.Errorf("%s: %v, stored lease %s; core says ErrLeaseLost and no write", what, err, after.LeaseUntil)
		}
	}
}
