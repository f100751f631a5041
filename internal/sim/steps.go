package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// simSteps are the steps of a handler try of a service with Steps: the
// first at the try's start, the second at its end.
var simSteps = [2]string{"charge", "email"}

// RecordStep implements idem.StepRecorder over the inner store, which must
// implement it, with the legs and faults of a write; a step the inner store
// accepts is added to the shadow model.
func (f *faultStore) RecordStep(ctx context.Context, key, token string, step core.Step, now time.Time) error {
	sr, ok := f.inner.(idem.StepRecorder)
	if !ok {
		return idem.ErrStepsUnsupported
	}
	r, c, err := f.begin(ctx)
	if err != nil {
		return err
	}
	c.stepWrites++
	_, err = faultWrite(f, r, "step", func(ictx context.Context) (struct{}, error) {
		return struct{}{}, sr.RecordStep(ictx, key, token, step, now)
	}, func(_ struct{}, err error, _ bool) { f.s.afterStep(c, token, step, now, err) })
	return err
}

// afterStep checks a step write's answer from the inner store against
// core.AddStep over the shadow model, and adds a step it accepted to the
// model: the record holds it, and the key's record lifetime has completed
// it.
func (s *simulation) afterStep(c *call, token string, step core.Step, now time.Time, err error) {
	ks := c.ks
	var stored *core.Record
	if ks.has {
		stored = &ks.cur
	}
	rec, want := core.AddStep(stored, token, step, now)
	switch {
	case err == nil && (want == core.StepLeaseLost || want == core.StepConflict):
		s.violate(ks.fencing(token), ks, "the store accepted step %q of lease %s at %s, but holds %s (core.AddStep: %s)",
			step.Name, token, s.fmtAbs(now), s.curString(ks), want)
	case errors.Is(err, idem.ErrStepConflict) && want != core.StepConflict:
		s.violate(StoreContract, ks, "the store refused step %q=%s of lease %s as a conflict, but holds %s (core.AddStep: %s)",
			step.Name, step.Result, token, s.curString(ks), want)
	case errors.Is(err, idem.ErrLeaseLost) && want != core.StepLeaseLost:
		s.violate(StoreContract, ks, "the store refused step %q of lease %s at %s as a lost lease, but holds %s (core.AddStep: %s)",
			step.Name, token, s.fmtAbs(now), s.curString(ks), want)
	}
	if err != nil {
		return
	}
	s.stats.StepsRecorded++
	if want == core.StepAppend {
		ks.cur = rec
		ks.stepDone(step)
	}
	s.hist(c, hStep, ks.cur, nil)
	s.maybeDowngrade(c)
}

// stepDone records that the current record lifetime completed step.
func (ks *keyState) stepDone(step core.Step) {
	if ks.steps == nil {
		ks.steps = make(map[string]string)
	}
	if _, ok := ks.steps[step.Name]; !ok {
		ks.steps[step.Name] = string(step.Result)
	}
}

// step runs the handler's step name through idem.Step. Its function checks
// invariant StepOnce (it never runs in a record lifetime that has completed
// the step); a step skipped must return the result its lifetime recorded
// (StepResult); a step refused for lack of time must have had none left in
// the lease the runner holds (StepLiveness).
func (c *call) step(ctx context.Context, name string) error {
	s, ks := c.t.s, c.ks
	ran := false
	writes := c.stepWrites
	// A holder whose lifetime has ended (its record released, or taken
	// fresh after its lease) is checked against its own lifetime's steps.
	steps := c.lifeSteps
	if steps == nil {
		steps = ks.steps
	}
	result, err := idem.Step(ctx, name, func(context.Context) ([]byte, error) {
		ran = true
		s.stats.StepRuns++
		if _, done := steps[name]; done {
			s.violate(StepOnce, ks, "delivery %d ran step %q, which this record lifetime (begun at %s) completed already; store holds %s",
				c.d.id, name, s.fmtRel(ks.lifeStart), s.curString(ks))
		}
		return fmt.Appendf(nil, "%s of delivery %d", name, c.d.id), nil
	})
	switch {
	case err == nil && !ran:
		if want, ok := steps[name]; !ok || want != string(result) {
			s.violate(StepResult, ks, "delivery %d skipped step %q with result %q, but this record lifetime (begun at %s) recorded %s; store holds %s",
				c.d.id, name, result, s.fmtRel(ks.lifeStart), stepRecorded(want, ok), s.curString(ks))
		}
	case err != nil && !ran && c.stepWrites == writes && errors.Is(err, idem.ErrLeaseLost):
		c.checkStepRefused(name, err)
	}
	return err
}

func stepRecorded(result string, ok bool) string {
	if !ok {
		return "no such step"
	}
	return fmt.Sprintf("%q", result)
}

// checkStepRefused checks a step refused before it ran, for lack of time
// or because the lease was lost: unless the renewal goroutine lost the
// lease, the lease the runner holds (the reservation's, or the last
// renewal's it received) must leave no time: its end less the margin (the
// deadline, without renewal) has passed by the runner's clock.
func (c *call) checkStepRefused(name string, err error) {
	s := c.t.s
	if c.rn != nil && c.rn.lost {
		return
	}
	lease := c.held
	limit := lease.Add(-c.d.sv.leaseMargin())
	if now := c.t.sb.clock(); now.Before(limit) {
		s.violate(StepLiveness, c.ks, "delivery %d: step %q refused at %s (runner's clock) for lack of time, but the lease the runner holds ends at %s (time left until %s): %v",
			c.d.id, name, s.fmtAbs(now), s.fmtAbs(lease), s.fmtAbs(limit), err)
	}
}

// stepAt runs the try's step i if the service has steps. A step's error
// ends the try: the handler returns it.
func (c *call) stepAt(ctx context.Context, i int) error {
	if !c.d.sv.Steps {
		return nil
	}
	if err := c.step(ctx, simSteps[i]); err != nil {
		c.t.s.endTry(c)
		c.lastTry = tryTransient
		return err
	}
	return nil
}

// Steps is a Lambda service whose handler tries run two steps each.
func Steps() Service {
	sv := Lambda()
	sv.Name, sv.Steps = "steps", true
	return sv
}
