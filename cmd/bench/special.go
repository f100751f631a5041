package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	idemlambda "github.com/idemgo/idem/lambda"
)

const (
	raceCallers = 32
	raceSleep   = 50 * time.Millisecond
	sqsSleep    = 20 * time.Millisecond
	sqsBatch    = 10
)

// raceRun is one run of c_race.
type raceRun struct {
	ExecutionsPerKey []int64
	Outcomes         map[string]int
	WinnerMs         []float64 // latency of the executing call, per trial
	OthersP50Ms      []float64 // median latency of the other calls, per trial
	Calls            map[string]int64
	Capacity         capDelta
}

// race fires raceCallers concurrent calls with one key, trials times.
func (b *bench) race(r *idem.Runner, run, trials int) (raceRun, error) {
	res := raceRun{Outcomes: map[string]int{}}
	s0, err := b.snap()
	if err != nil {
		return res, err
	}
	for t := range trials {
		ev := makeEvent("c_race", "c32", t, 100+t)
		var execs atomic.Int64
		h := handler(ev, false, &execs, raceSleep)
		startGate := make(chan struct{})
		outs := make([]string, raceCallers)
		lat := make([]time.Duration, raceCallers)
		var ready, wg sync.WaitGroup
		ready.Add(raceCallers)
		for i := range raceCallers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ready.Done()
				<-startGate
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(b.ctx, invocationTime)
				out, err := r.Do(ctx, ev.key, ev.payload, h)
				cancel()
				lat[i] = time.Since(t0)
				outs[i] = outcome(out, err)
			}()
		}
		ready.Wait()
		runtime.Gosched()
		close(startGate)
		wg.Wait()
		if err := b.ctx.Err(); err != nil {
			return res, err
		}
		res.ExecutionsPerKey = append(res.ExecutionsPerKey, execs.Load())
		var others []time.Duration
		for i, o := range outs {
			res.Outcomes[o]++
			if o == "executed" {
				res.WinnerMs = append(res.WinnerMs, ms(lat[i]))
			} else {
				others = append(others, lat[i])
			}
		}
		slices.Sort(others)
		res.OthersP50Ms = append(res.OthersP50Ms, ms(percentile(others, 0.5)))
	}
	s1, err := b.snap()
	if err != nil {
		return res, err
	}
	res.Calls = diffCounts(s0.counts, s1.counts)
	res.Capacity = diffCapacity(s0.cap, s1.cap)
	logf("run %d c_race executions per key %v, outcomes %v, calls %v", run, res.ExecutionsPerKey, res.Outcomes, res.Calls)
	return res, nil
}

// sqsRun is one run of sqs_batch10.
type sqsRun struct {
	BatchMs, SingleMs []float64
	Failures          int   // batch item failures reported
	Executions        int64 // handler executions
	Messages          int
	Calls             map[string]int64
	Capacity          capDelta
	DynaliteMsPerMsg  float64 // dynalite's CPU per message (batches and singles)
}

func sqsEvent(evs []event) events.SQSEvent {
	var e events.SQSEvent
	for _, ev := range evs {
		e.Records = append(e.Records, events.SQSMessage{
			MessageId:      "msg-" + ev.key,
			ReceiptHandle:  "rh-" + ev.key,
			Body:           string(ev.payload),
			Attributes:     map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1764676800000"},
			EventSource:    "aws:sqs",
			EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:bench-orders",
			AWSRegion:      "us-east-1",
		})
	}
	return e
}

// sqsBatch measures SQS batches of 10 distinct messages against batches of
// one, through the lambda SQS wrapper, reps times each, alternating.
func (b *bench) sqsBatch(r *idem.Runner, run, reps int) (sqsRun, error) {
	var res sqsRun
	results := map[string][]byte{}
	var execs atomic.Int64
	h, err := idemlambda.SQS(r, "bench", idemlambda.KeyFromBodyField("id"), func(ctx context.Context, msg events.SQSMessage) ([]byte, error) {
		execs.Add(1)
		t := time.NewTimer(sqsSleep)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return results[msg.MessageId], nil
	})
	if err != nil {
		return res, err
	}
	invoke := func(evs []event) (time.Duration, int, error) {
		e := sqsEvent(evs)
		ctx, cancel := context.WithTimeout(b.ctx, invocationTime)
		defer cancel()
		t0 := time.Now()
		resp, err := h(ctx, e)
		return time.Since(t0), len(resp.BatchItemFailures), err
	}
	batches := make([][]event, reps+1)
	singles := make([][]event, reps+1)
	for k := range reps + 1 {
		for j := range sqsBatch {
			batches[k] = append(batches[k], makeEvent("sqs_batch10", fmt.Sprintf("b10r%d", run), k*sqsBatch+j, 100+k*sqsBatch+j))
		}
		singles[k] = []event{makeEvent("sqs_batch10", fmt.Sprintf("b1r%d", run), k, 100+k)}
		for _, ev := range append(slices.Clone(batches[k]), singles[k]...) {
			results["msg-"+ev.key] = ev.result
		}
	}
	// Batch 0 and single 0 warm up, unmeasured.
	for _, evs := range [][]event{singles[0], batches[0]} {
		if _, _, err := invoke(evs); err != nil {
			return res, err
		}
	}
	execs.Store(0)
	s0, err := b.snap()
	if err != nil {
		return res, err
	}
	for k := 1; k <= reps; k++ {
		d, fails, err := invoke(singles[k])
		if err != nil {
			return res, err
		}
		res.SingleMs = append(res.SingleMs, ms(d))
		res.Failures += fails
		d, fails, err = invoke(batches[k])
		if err != nil {
			return res, err
		}
		res.BatchMs = append(res.BatchMs, ms(d))
		res.Failures += fails
	}
	s1, err := b.snap()
	if err != nil {
		return res, err
	}
	res.Calls = diffCounts(s0.counts, s1.counts)
	res.Capacity = diffCapacity(s0.cap, s1.cap)
	res.Executions = execs.Load()
	res.Messages = reps * (sqsBatch + 1)
	res.DynaliteMsPerMsg = ms(s1.dyna-s0.dyna) / float64(res.Messages)
	logf("run %d sqs_batch10 batch median %.1f ms, single median %.1f ms, failures %d, executions %d/%d",
		run, median(res.BatchMs), median(res.SingleMs), res.Failures, res.Executions, res.Messages)
	return res, nil
}
