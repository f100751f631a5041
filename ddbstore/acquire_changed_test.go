package ddbstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
)

// beforePut is an http.RoundTripper that calls fn once, before the first
// PutItem it sends.
type beforePut struct {
	inner http.RoundTripper
	once  sync.Once
	fn    func()
}

func (b *beforePut) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("X-Amz-Target") == "DynamoDB_20120810.PutItem" {
		b.once.Do(b.fn)
	}
	return b.inner.RoundTrip(req)
}

// TestAcquireOverARecordChangedBeforeItsPut: Acquire's UpdateItem is
// refused by an in-progress record past its retention (which the
// condition leaves to a second write), and before the PutItem that
// replaces it, another caller takes the key and fails retryably. Acquire
// must acquire that failure (core.Acquirable allows it: attempt 2, the
// failure as prev), not answer it as the record that blocked it.
func TestAcquireOverARecordChangedBeforeItsPut(t *testing.T) {
	integration(t)
	f := newFixture(t)
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	hook := &beforePut{inner: http.DefaultTransport}
	s, err := ddbstore.New(dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: hook}
		o.RetryMaxAttempts = 1
	}), f.table)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Truncate(time.Second)
	key := fmt.Sprintf("acq:changed:%d", time.Now().UnixNano())
	x := core.Reserve(key, emptyFP, "tok-x", nil, t0, t0.Add(time.Second), 2*time.Second)
	if err := f.store.Reserve(ctx, x, nil, t0); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(10 * time.Second)
	b := core.Reserve(key, emptyFP, "tok-b", nil, now, now.Add(time.Second), time.Minute)
	failed := core.Fail(b, errors.New("flaky"), true, now, time.Minute)
	hook.fn = func() {
		if err := f.store.Reserve(ctx, b, nil, now); err != nil {
			t.Errorf("reserve b: %v", err)
		}
		if _, err := f.store.Complete(ctx, failed); err != nil {
			t.Errorf("fail b: %v", err)
		}
	}
	rec := core.Reserve(key, emptyFP, "tok-c", nil, now, now.Add(time.Minute), time.Minute)
	got, prev, err := s.Acquire(ctx, rec, now, core.Policy{MaxAttempts: 3})
	var ce *idem.ConflictError
	if errors.As(err, &ce) {
		t.Fatalf("Acquire = conflict with %v, which core.Acquirable allows to replace (%v)", ce.Existing, core.Acquirable(&ce.Existing, emptyFP, now, core.Policy{MaxAttempts: 3}))
	}
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	if got.LeaseToken != "tok-c" || got.Attempts != 2 || prev == nil || prev.LeaseToken != "tok-b" {
		t.Fatalf("Acquire = %v over %v, want tok-c at attempt 2 over tok-b's failure", got, prev)
	}
	if stored, err := s.Get(ctx, key, now); err != nil || stored.LeaseToken != "tok-c" {
		t.Fatalf("Get = %v, %v, want tok-c's reservation", stored, err)
	}
}
