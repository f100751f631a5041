package ddbstore

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem/core"
)

// updateAPI answers every write at once.
type updateAPI struct{ benchAPI }

func (updateAPI) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return &dynamodb.UpdateItemOutput{}, nil
}

// TestRequestPartsShared checks that the requests' constant parts, shared
// by every call, come out of every kind of write as they went in, and that
// an acquisition's update expression sets what the record has and removes
// the rest.
func TestRequestPartsShared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := New(updateAPI{}, "orders_idem")
	if err != nil {
		t.Fatal(err)
	}
	fresh := newRequestParts(s)
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	rec := core.Reserve("k", "fp", "tok", nil, now, now.Add(time.Minute), time.Hour)
	failed := core.Fail(core.Acquire(rec, nil, now), errors.New("boom"), true, now, time.Hour)
	failed.LeaseToken = "tok-old"
	inProgress := rec
	inProgress.LeaseToken, inProgress.LeaseUntil = "tok-older", now.Add(-time.Second)
	inProgress.Steps = []core.Step{{Name: "charge", Result: []byte("ok")}}
	for _, prev := range []*core.Record{nil, &failed, &inProgress} {
		if err := s.Reserve(ctx, rec, prev, now); err != nil {
			t.Fatalf("Reserve over %v: %v", prev, err)
		}
	}
	if _, _, err := s.Acquire(ctx, rec, now, core.Policy{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(ctx, core.Succeed(core.Acquire(rec, nil, now), []byte(`{}`), now, time.Hour)); err != nil {
		t.Fatal(err)
	}
	// A retryable failure with steps: the completion keeps them, with names of its own.
	withSteps := core.Acquire(rec, nil, now)
	withSteps.Steps = inProgress.Steps
	if _, err := s.Complete(ctx, core.Fail(withSteps, errors.New("boom"), true, now, time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.parts, fresh) {
		t.Errorf("request parts changed by the calls:\n got %+v\nwant %+v", s.parts, fresh)
	}
	in := s.acquireInput(s.encode(normalize(rec), nil, ""), normalize(rec), now, core.Policy{})
	const want = "SET #att = if_not_exists(#carried, :zero) + :one, #carried = if_not_exists(#carried, :zero) + :one, " +
		"#exp = :set_exp, #fp = :set_fp, #lease = :set_lease, #st = :set_st, #tok = :set_tok, #upd = :set_upd " +
		"REMOVE #enc, #err, #omit, #ref, #res, #retry, #rit, #sha, #size"
	if got := aws.ToString(in.UpdateExpression); got != want {
		t.Errorf("update expression\n got %s\nwant %s", got, want)
	}
	if len(aws.ToString(in.UpdateExpression)) > s.parts.updateLen {
		t.Errorf("update expression of %d bytes, over the bound %d", len(aws.ToString(in.UpdateExpression)), s.parts.updateLen)
	}
}
