package linz

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/storetest"
)

// Target is a store under test and what the checks need beside its
// methods. Safe for concurrent use (mu serializes calls when Serial is set).
type Target struct {
	// Name names the store in reports ("ddbstore on dynalite").
	Name string
	// Store is the store. Its optional capabilities are found with type
	// assertions (Can).
	Store idem.Store
	// Res is the resolution at which Store keeps times.
	Res Resolution
	// Stage returns the staged write (of the store's own type) that adds 1
	// to key's effect counter. Nil when the store cannot commit staged
	// writes; CompleteStaged and Effects are then not used.
	Stage func(key string) any
	// Effects reads key's effect counter (0 when it has none).
	Effects func(ctx context.Context, key string) (int, error)
	// Faults, when set, are injected around each call of Store: for a
	// store with no transport of its own to inject them in (memstore).
	Faults *Faults
	// Serial makes the calls one at a time: for a server that does not
	// apply conditional writes atomically under concurrency (moto).
	// Faults are still injected, but concurrency is not tested.
	Serial bool
	// StepsApart says that the store keeps steps apart from its records
	// (Model.StepsApart).
	StepsApart bool

	mu sync.Mutex
}

// Model returns the model of t's store.
func (t *Target) Model() Model { return Model{Res: t.Res, StepsApart: t.StepsApart} }

// Can reports whether t's store takes ops of kind k.
func (t *Target) Can(k Kind) bool {
	var ok bool
	switch k {
	case Reserve, Complete, Get:
		ok = true
	case Acquire:
		_, ok = t.Store.(idem.Acquirer)
	case RecordStep:
		_, ok = t.Store.(idem.StepRecorder)
	case RenewLease:
		_, ok = t.Store.(idem.LeaseRenewer)
	case Release:
		_, ok = t.Store.(idem.Releaser)
	case CompleteStaged, Effects:
		_, ok = t.Store.(idem.StagedCompleter)
		ok = ok && t.Stage != nil && t.Effects != nil
	}
	return ok
}

// Do makes op on t's store and returns its answer, and the error the
// store returned. CompleteStaged commits staged (one write of t.Stage
// when nil).
func (t *Target) Do(ctx context.Context, op Op, staged []any) (Result, error) {
	if t.Serial {
		t.mu.Lock()
		defer t.mu.Unlock()
	}
	var res Result
	err := t.inject(op, func() error {
		var err error
		res, err = t.call(ctx, op, staged)
		return err
	})
	res.Verdict = t.verdict(err)
	if err != nil {
		res.Rec, res.Prev, res.Count = nil, nil, 0
		res.Err = err.Error()
		var c *idem.ConflictError
		if errors.As(err, &c) {
			res.Rec = &c.Existing
		}
	}
	return res, err
}

// call makes op on the store. The result's verdict is set by Do.
func (t *Target) call(ctx context.Context, op Op, staged []any) (Result, error) {
	var res Result
	var rec core.Record
	var err error
	switch op.Kind {
	case Reserve:
		err = t.Store.Reserve(ctx, op.Rec, op.Prev, op.Now)
		return res, err
	case Acquire:
		rec, res.Prev, err = t.Store.(idem.Acquirer).Acquire(ctx, op.Rec, op.Now, op.Policy)
	case Complete:
		rec, err = t.Store.Complete(ctx, op.Rec)
	case CompleteStaged:
		if staged == nil {
			staged = []any{t.Stage(op.Key)}
		}
		rec, err = t.Store.(idem.StagedCompleter).CompleteStaged(ctx, op.Rec, staged)
	case RecordStep:
		err = t.Store.(idem.StepRecorder).RecordStep(ctx, op.Key, op.Token, op.Step, op.Now)
		return res, err
	case RenewLease:
		rec, err = t.Store.(idem.LeaseRenewer).RenewLease(ctx, op.Rec, op.Until, op.Now)
	case Release:
		err = t.Store.(idem.Releaser).Release(ctx, op.Rec)
		return res, err
	case Get:
		rec, err = t.Store.Get(ctx, op.Key, op.Now)
	case Effects:
		res.Count, err = t.Effects(ctx, op.Key)
		return res, err
	default:
		return res, fmt.Errorf("linz: unknown operation %q", op.Kind)
	}
	res.Rec = &rec
	return res, err
}

// verdict classifies a store's error.
func (t *Target) verdict(err error) Verdict {
	var c *idem.ConflictError
	switch {
	case err == nil:
		return OK
	case errors.As(err, &c):
		return Conflict
	case errors.Is(err, idem.ErrStepConflict):
		return StepConflict
	case errors.Is(err, idem.ErrLeaseLost):
		return LeaseLost
	case errors.Is(err, idem.ErrNotFound):
		return NotFound
	case errors.Is(err, idem.ErrRecordChanged):
		return RecordChanged
	case t.transient(err):
		return Unknown
	}
	return Failed
}

// transient reports whether err is a transient failure, by the store's own
// classifier (idem.ErrorClassifier) and then core's default chain.
func (t *Target) transient(err error) bool {
	chain := core.DefaultClassifiers
	if c, ok := t.Store.(idem.ErrorClassifier); ok {
		chain = append([]core.Classifier{c.ClassifyError}, chain...)
	}
	return core.Classify(err, chain...) == core.Transient
}

// inject calls apply under the fault t.Faults draws for op: not at all
// (the call fails before it is sent), or with its answer lost.
func (t *Target) inject(op Op, apply func() error) error {
	kind := storetest.Write
	if op.Kind == Get || op.Kind == Effects {
		kind = storetest.Read
	}
	fault := t.Faults.Next(kind)
	if fault == storetest.NoFault {
		return apply()
	}
	if fault == storetest.AnswerLost {
		_ = apply()
	}
	return core.MarkTransient(fmt.Errorf("linz: %s: injected %s: %w", op.Kind, fault, faultError(fault, false)))
}
