package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/fakeclock"
)

// stepCounts and stepSizes are the steps per execution and step results
// measured.
var (
	stepCounts = []int{1, 10, 50}
	stepSizes  = []string{"small", "4KB"}
)

// stepResult is step s's result: about 20 bytes, or 4 KB that does not
// compress.
func stepResult(s int, size string) []byte {
	if size == "4KB" {
		return randomResult(4096)
	}
	return fmt.Appendf(nil, `{"step":%d,"ok":true}`, s)
}

// stepRows measures executions of 1, 10 and 50 steps with small and 4 KB
// results: the write units of each step (of the first execution, by
// position), of all steps, of the completion, and of the reservation and
// completion.
func stepRows(e *capEnv) ([]capRow, error) {
	r, err := e.runner()
	if err != nil {
		return nil, err
	}
	var rows []capRow
	for _, size := range stepSizes {
		var oneStep float64
		for _, k := range stepCounts {
			name := fmt.Sprintf("steps_%d_%s", k, size)
			var first []float64
			var all, completion float64
			row, err := e.measure(name, "execution", e.events, func() error {
				for i := range e.events {
					steps, c, err := e.stepExecution(r, name, i, k, size)
					if err != nil {
						return err
					}
					if i == 0 {
						first = steps
					}
					for _, u := range steps {
						all += u
					}
					completion += c
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			perExec := all / float64(e.events)
			if k == 1 {
				oneStep = perExec
			}
			row.Figures["step_write_units_per_execution"] = round(perExec, 3)
			row.Figures["write_units_by_step_position"] = fmtPositions(first)
			row.Series["write_units_of_each_step"] = first
			row.Figures["steps_vs_k_times_one_step"] = round(perExec/(float64(k)*oneStep), 2)
			row.Figures["completion_write_units"] = round(completion/float64(e.events), 3)
			row.Figures["reservation_and_completion_write_units"] = round(row.Capacity.WritePerEvent-perExec, 3)
			row.Note = fmt.Sprintf("a handler of %d steps (idem.Step), each returning a %s result; each step is a PutItem of its own item and an UpdateItem that appends its reference to the record", k, size)
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// stepExecution runs event i of name through r: a handler of k steps of
// size. It returns the write units of each step and of the completion.
func (e *capEnv) stepExecution(r *idem.Runner, name string, i, k int, size string) ([]float64, float64, error) {
	ev := makeEvent(name, "cap", i, 100+i)
	var steps []float64
	var end float64
	ctx, cancel := context.WithTimeout(e.ctx, invocationTime)
	defer cancel()
	out, err := r.Do(ctx, ev.key, ev.payload, func(ctx context.Context) ([]byte, error) {
		for s := 1; s <= k; s++ {
			units, err := e.unitsOf(func() error {
				_, err := idem.Step(ctx, fmt.Sprintf("step-%02d", s), func(context.Context) ([]byte, error) { return stepResult(s, size), nil })
				return err
			})
			if err != nil {
				return nil, err
			}
			steps = append(steps, units)
		}
		var err error
		end, err = e.writeUnits()
		return ev.result, err
	})
	if out.Verdict != idem.Executed {
		return nil, 0, fmt.Errorf("%s: event %d got %s (%v), want %s", name, i, out.Verdict, err, idem.Executed)
	}
	after, err := e.writeUnits()
	return steps, after - end, err
}

// unitsOf returns the write units fn made the proxy charge. Only one
// measured call may run at a time.
func (e *capEnv) unitsOf(fn func() error) (float64, error) {
	w0, err := e.writeUnits()
	if err != nil {
		return 0, err
	}
	if err := fn(); err != nil {
		return 0, err
	}
	w1, err := e.writeUnits()
	return w1 - w0, err
}

// fmtPositions shows the units of each step position as runs:
// "1 (steps 1–3), 2 (steps 4–7)"; of more than six runs, the first three
// and the last two.
func fmtPositions(units []float64) string {
	parts := positionRuns(units)
	if len(parts) > 6 {
		parts = append(append(parts[:3:3], "…"), parts[len(parts)-2:]...)
	}
	return strings.Join(parts, ", ")
}

// positionRuns are the runs of equal units, each with its positions.
func positionRuns(units []float64) []string {
	var parts []string
	for i := 0; i < len(units); {
		j := i
		for j+1 < len(units) && units[j+1] == units[i] {
			j++
		}
		if i == j {
			parts = append(parts, fmt.Sprintf("%s (step %d)", fmtUnits(units[i]), i+1))
		} else {
			parts = append(parts, fmt.Sprintf("%s (steps %d–%d)", fmtUnits(units[i]), i+1, j+1))
		}
		i = j + 1
	}
	return parts
}

// renewalRows measures lease renewal per minute of handler time at two
// intervals, and after ten 4 KB steps (a renewal is billed on the record's
// size). The runner reads a fake clock that only the handler moves, one
// interval at a time, each time waiting for the renewal goroutine to renew
// and wait again: exactly one renewal per interval.
func renewalRows(e *capEnv) ([]capRow, error) {
	var rows []capRow
	for _, c := range []struct {
		every time.Duration
		steps int
	}{{time.Second, 0}, {10 * time.Second, 0}, {10 * time.Second, 10}} {
		name := fmt.Sprintf("renewal_every_%s", c.every)
		if c.steps > 0 {
			name += fmt.Sprintf("_after_%d_steps_4KB", c.steps)
		}
		fc := fakeclock.New(time.Now())
		r, err := e.runner(idem.WithClock(fc.Now), idem.WithSleep(fc.Block), idem.WithLeaseRenewal(c.every))
		if err != nil {
			return nil, err
		}
		var renewal float64
		row, err := e.measure(name, "minute of handler time", e.events, func() error {
			for i := range e.events {
				ev := makeEvent(name, "cap", i, 100+i)
				// No deadline: renewals go on as long as the handler runs.
				ctx, cancel := context.WithCancel(e.ctx)
				out, err := r.Do(ctx, ev.key, ev.payload, func(ctx context.Context) ([]byte, error) {
					for s := 1; s <= c.steps; s++ {
						if _, err := idem.Step(ctx, fmt.Sprintf("step-%02d", s), func(context.Context) ([]byte, error) { return stepResult(s, "4KB"), nil }); err != nil {
							return nil, err
						}
					}
					units, err := e.unitsOf(func() error { return runMinute(ctx, fc, c.every) })
					renewal += units
					return ev.result, err
				})
				cancel()
				if out.Verdict != idem.Executed {
					return fmt.Errorf("event %d got %s (%v)", i, out.Verdict, err)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		row.Figures["renewals_per_minute"] = int(time.Minute / c.every)
		row.Figures["renewal_write_units_per_minute"] = round(renewal/float64(e.events), 3)
		row.Note = fmt.Sprintf("idem.WithLeaseRenewal(%s), a handler that runs one minute (fake clock) after %d steps of 4 KB; one UpdateItem per renewal", c.every, c.steps)
		rows = append(rows, row)
	}
	return rows, nil
}

// runMinute moves fc one minute forward, one interval at a time, waiting
// before each move for the renewal goroutine to be waiting on the clock.
func runMinute(ctx context.Context, fc *fakeclock.Clock, every time.Duration) error {
	for t := time.Duration(0); t < time.Minute; t += every {
		if err := fc.WaitBlocked(ctx, 1); err != nil {
			return err
		}
		fc.Advance(every)
	}
	return fc.WaitBlocked(ctx, 1)
}

// waitHolder is how long the execution that waiters wait for runs.
const (
	waitHolder  = 300 * time.Millisecond
	waitWaiters = 4
	waitBound   = 5 * time.Second
)

// waitRows measures bounded waits (idem.WithWait): a key whose execution
// runs 300 ms, and 4 calls that arrive while it runs and wait for its
// result, in 4 runners of their own (4 sandboxes) or in the runner of the
// holder (coalesced). The reads depend on timing: the mean over the keys.
func waitRows(e *capEnv) ([]capRow, error) {
	holder, err := e.runner(idem.WithWait(waitBound))
	if err != nil {
		return nil, err
	}
	var own []*idem.Runner
	for range waitWaiters {
		w, err := e.runner(idem.WithWait(waitBound))
		if err != nil {
			return nil, err
		}
		own = append(own, w)
	}
	var rows []capRow
	for _, v := range []struct {
		name    string
		waiters func(int) *idem.Runner
	}{
		{"wait_4_waiters_own_runners", func(i int) *idem.Runner { return own[i] }},
		{"wait_4_waiters_one_runner", func(int) *idem.Runner { return holder }},
	} {
		keys := e.events
		row, err := e.measure(v.name, "waiter", keys*waitWaiters, func() error {
			for k := range keys {
				if err := e.waitKey(holder, v.waiters, makeEvent(v.name, "cap", k, 100+k)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		row.Figures["holder_runs_ms"] = waitHolder.Milliseconds()
		row.Figures["reads_per_waiter"] = row.Calls["GetItem"]
		row.Note = fmt.Sprintf("a key whose execution runs %s; %d calls arrive while it runs and wait for its result (WithWait(%s)); per waiter, the holder's two writes included (÷%d)",
			waitHolder, waitWaiters, waitBound, waitWaiters)
		rows = append(rows, row)
	}
	return rows, nil
}

// waitKey runs the holder's execution of ev and the waiters' calls.
func (e *capEnv) waitKey(holder *idem.Runner, waiter func(int) *idem.Runner, ev event) error {
	ctx, cancel := context.WithTimeout(e.ctx, invocationTime)
	defer cancel()
	started := make(chan struct{})
	done := make(chan idem.Outcome, 1)
	go func() {
		out, _ := holder.Do(ctx, ev.key, ev.payload, func(ctx context.Context) ([]byte, error) {
			close(started)
			t := time.NewTimer(waitHolder)
			defer t.Stop()
			select {
			case <-t.C:
				return ev.result, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
		done <- out
	}()
	<-started
	outs := make([]idem.Outcome, waitWaiters)
	var wg sync.WaitGroup
	for i := range waitWaiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], _ = waiter(i).Do(ctx, ev.key, ev.payload, func(context.Context) ([]byte, error) { return ev.result, nil })
		}()
	}
	wg.Wait()
	if out := <-done; out.Verdict != idem.Executed {
		return fmt.Errorf("wait: the holder of %s got %s", ev.key, out.Verdict)
	}
	for i, o := range outs {
		if o.Verdict != idem.Replayed || !o.Waited {
			return fmt.Errorf("wait: waiter %d of %s got %s (waited %v), want a replay after a wait", i, ev.key, o.Verdict, o.Waited)
		}
	}
	return nil
}
