package ddbstore_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
)

// releaseAfterRefusal deletes an item, once, right after the store read
// the record that refused its write: after the refused UpdateItem where
// the server returns the record with the refusal, else after the GetItem
// that reads it. An operator's release between an acquisition's refused
// write and its second write.
type releaseAfterRefusal struct {
	inner  http.RoundTripper
	delete func()
	once   sync.Once
}

func (r *releaseAfterRefusal) RoundTrip(req *http.Request) (*http.Response, error) {
	op := operation(req)
	resp, err := r.inner.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, rb, err := buffered(resp.Body)
	if err != nil {
		return nil, err
	}
	resp.Body = rb
	refused := op == "UpdateItem" && bytes.Contains(body, []byte("ConditionalCheckFailed"))
	if refused && returnsAllOld() || op == "GetItem" && !returnsAllOld() {
		r.once.Do(r.delete)
	}
	return resp, nil
}

// TestAcquireOverARecordReleasedMeanwhile: an acquisition whose one write
// was refused by a record it may replace (a retryable failure past its
// retention, which carries its count: the condition leaves it to a second
// request) and whose record is released before that second request starts
// afresh: attempt 1, and no record replaced, as core.Acquire says over
// nothing. (It used to put over the absent record at the attempt after the
// released one's and report that record as replaced.)
func TestAcquireOverARecordReleasedMeanwhile(t *testing.T) {
	integration(t)
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	old := core.Fail(withAttempts(core.Reserve("gone:1", fp, "tok-old", nil, now, now.Add(time.Minute), time.Hour), 2),
		errors.New("throttled"), true, now, time.Hour)
	putPrevious(t, f, old)
	hook := &releaseAfterRefusal{inner: newRecorder().inner, delete: func() {
		if _, err := f.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table), Key: f.store.ItemKey(old.Key)}); err != nil {
			t.Errorf("release: %v", err)
		}
	}}
	hooked := newClientWith(t, hook)
	s, err := ddbstore.New(hooked, f.table)
	if err != nil {
		t.Fatal(err)
	}
	at := now.Add(2 * time.Hour)
	got, prev, err := s.Acquire(ctx, core.Reserve(old.Key, fp, "tok-new", nil, at, at.Add(time.Minute), time.Hour), at, acquirePolicy)
	if err != nil || got.Attempts != 1 || prev != nil {
		t.Fatalf("Acquire over a record released meanwhile = attempt %d, prev %v, %v; want attempt 1 over nothing", got.Attempts, prev, err)
	}
	if stored, err := f.store.Get(ctx, old.Key, at); err != nil || stored.Attempts != 1 || stored.LeaseToken != "tok-new" {
		t.Errorf("Get = %v, %v; want the new reservation at attempt 1", stored, err)
	}
}

// newClientWith returns a DynamoDB client configured from the environment
// whose requests go through rt, without the SDK's retries.
func newClientWith(t *testing.T, rt http.RoundTripper) *dynamodb.Client {
	t.Helper()
	rec := newRecorder()
	rec.inner = rt
	return newClient(t, rec, 1)
}
