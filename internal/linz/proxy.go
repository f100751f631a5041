package linz

import (
	"context"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// proxy is the store an idem.Runner of the workload sees: each call is an
// Op made through the history as one client, so the runner's own calls are
// checked like the random clients' are. It has every optional capability;
// those the target's store lacks fail (the runner uses only those the
// stores under test have). Safe for concurrent use.
type proxy struct {
	t      *Target
	h      *History
	client int
	calls  func() // counts a call
}

var (
	_ idem.Store           = (*proxy)(nil)
	_ idem.Acquirer        = (*proxy)(nil)
	_ idem.StepRecorder    = (*proxy)(nil)
	_ idem.LeaseRenewer    = (*proxy)(nil)
	_ idem.StagedCompleter = (*proxy)(nil)
	_ idem.ErrorClassifier = (*proxy)(nil)
)

func (p *proxy) do(ctx context.Context, op Op, staged []any) (Result, error) {
	p.calls()
	if !p.t.Can(op.Kind) && op.Kind != CompleteStaged {
		return Result{}, fmt.Errorf("linz: %s does not take %s", p.t.Name, op.Kind)
	}
	return p.h.Do(ctx, p.t, p.client, op, staged)
}

func record(res Result, err error) (core.Record, error) {
	if err != nil {
		return core.Record{}, err
	}
	return *res.Rec, nil
}

// Reserve records the runner's reservation.
func (p *proxy) Reserve(ctx context.Context, rec core.Record, prev *core.Record, now time.Time) error {
	_, err := p.do(ctx, Op{Kind: Reserve, Key: rec.Key, Rec: rec, Prev: prev, Now: now}, nil)
	return err
}

// Acquire records the runner's one-write reservation.
func (p *proxy) Acquire(ctx context.Context, rec core.Record, now time.Time, pol core.Policy) (core.Record, *core.Record, error) {
	res, err := p.do(ctx, Op{Kind: Acquire, Key: rec.Key, Rec: rec, Now: now, Policy: pol}, nil)
	if err != nil {
		return core.Record{}, nil, err
	}
	return *res.Rec, res.Prev, nil
}

// Complete records the runner's completion.
func (p *proxy) Complete(ctx context.Context, rec core.Record) (core.Record, error) {
	return record(p.do(ctx, Op{Kind: Complete, Key: rec.Key, Rec: rec}, nil))
}

// CheckStaged asks the target's store, which must be able to stage.
func (p *proxy) CheckStaged(staged []any) error {
	sc, ok := p.t.Store.(idem.StagedCompleter)
	if !ok || !p.t.Can(CompleteStaged) {
		return fmt.Errorf("linz: %s: %w", p.t.Name, idem.ErrNoStaging)
	}
	return sc.CheckStaged(staged)
}

// CompleteStaged commits the runner's staged writes, which the workload's
// handlers make one write of Target.Stage, as the model's CompleteStaged
// assumes.
func (p *proxy) CompleteStaged(ctx context.Context, rec core.Record, staged []any) (core.Record, error) {
	return record(p.do(ctx, Op{Kind: CompleteStaged, Key: rec.Key, Rec: rec}, staged))
}

// RecordStep records the runner's step.
func (p *proxy) RecordStep(ctx context.Context, key, token string, step core.Step, now time.Time) error {
	_, err := p.do(ctx, Op{Kind: RecordStep, Key: key, Token: token, Step: step, Now: now}, nil)
	return err
}

// RenewLease records the runner's renewal.
func (p *proxy) RenewLease(ctx context.Context, rec core.Record, until, now time.Time) (core.Record, error) {
	return record(p.do(ctx, Op{Kind: RenewLease, Key: rec.Key, Rec: rec, Until: until, Now: now}, nil))
}

// Get records the runner's read.
func (p *proxy) Get(ctx context.Context, key string, now time.Time) (core.Record, error) {
	return record(p.do(ctx, Op{Kind: Get, Key: key, Now: now}, nil))
}

// ClassifyError is the target store's classifier, if it has one.
func (p *proxy) ClassifyError(err error) core.Class {
	if c, ok := p.t.Store.(idem.ErrorClassifier); ok {
		return c.ClassifyError(err)
	}
	return core.Unknown
}
