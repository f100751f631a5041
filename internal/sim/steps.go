package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// simSteps are the steps of a handler try of a service with Steps: the
// first at the try's start, the second at its end.
var simSteps = [2]string{"charge", "email"}

// RecordStep implements idem.StepRecorder over the inner store, which must
// implement it, with the yields and faults of a write; a step the inner
// store accepts is added to the shadow model.
func (f *faultStore) RecordStep(ctx context.Context, key, token string, step core.Step, now time.Time) error {
	sr, ok := f.inner.(idem.StepRecorder)
	if !ok {
		return idem.ErrStepsUnsupported
	}
	_, err := faultWrite(ctx, f, "step", func(ictx context.Context) (struct{}, error) {
		return struct{}{}, sr.RecordStep(ictx, key, token, step, now)
	}, func(t *task, _ struct{}, err error) { f.s.afterStep(t, token, step, err) })
	return err
}

// afterStep updates the shadow model with a step the store accepted: the
// record holds it, and the key's record lifetime has completed it.
func (s *simulation) afterStep(t *task, token string, step core.Step, err error) {
	ks := t.d.ks
	if err != nil {
		return
	}
	s.stats.StepsRecorded++
	s.hist(ks, t, hStep, ks.cur, nil)
	if ks.has && ks.cur.LeaseToken == token {
		if _, ok := core.FindStep(ks.cur, step.Name); !ok {
			ks.cur.Steps = append(append([]core.Step(nil), ks.cur.Steps...), step)
		}
	}
	if ks.stepsDone == nil {
		ks.stepsDone = make(map[string]bool)
	}
	ks.stepsDone[step.Name] = true
}

// step runs the handler's step name through idem.Step; its function checks
// invariant 8 (StepOnce): it never runs in a record lifetime that has
// completed the step.
func (t *task) step(ctx context.Context, name string) error {
	s, ks := t.s, t.d.ks
	_, err := idem.Step(ctx, name, func(context.Context) ([]byte, error) {
		s.stats.StepRuns++
		if ks.stepsDone[name] {
			s.violate(StepOnce, ks, "delivery %d ran step %q, which this record lifetime (begun at %s) completed already; store holds %s",
				t.d.id, name, s.fmtRel(ks.lifeStart), s.curString(ks))
		}
		return []byte(fmt.Sprintf("%s of delivery %d", name, t.d.id)), nil
	})
	return err
}

// stepAt runs the try's step i if the service has steps. A step's error
// ends the try: the handler returns it.
func (t *task) stepAt(ctx context.Context, sv *service, i int) error {
	if !sv.Steps {
		return nil
	}
	if err := t.step(ctx, simSteps[i]); err != nil {
		t.s.endTry(t)
		t.lastTry = tryTransient
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
