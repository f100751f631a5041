package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/ddbstore"
)

// resends names, for each scenario that sends earlier events again, the
// scenario that sends them first.
var resends = map[string]string{
	"b_duplicate_completed": "a_unique",
	"d_mismatch":            "d_first",
	"d_same":                "d_first",
	"e_retry":               "e_throw",
	"g_cache_duplicate":     "g_cache_first",
}

// oneRun measures every selected scenario once, on a fresh table.
func (b *bench) oneRun(rep *report, client *dynamodb.Client, f flags, r int) error {
	table := fmt.Sprintf("idem_bench_r%d", r)
	if _, err := ddbstore.CreateTable(b.ctx, client, table); err != nil {
		return err
	}
	defer deleteTable(b.ctx, client, table)
	st, err := ddbstore.New(client, table)
	if err != nil {
		return err
	}
	base, err := idem.New(st, runnerOptions()...)
	if err != nil {
		return err
	}
	var scenarios []scenario
	for _, sc := range workload() {
		if f.selected(sc.Name) {
			scenarios = append(scenarios, sc)
		}
	}
	for _, m := range modes {
		if len(scenarios) == 0 {
			break
		}
		if err := b.warm(base, m); err != nil {
			return fmt.Errorf("warm-up %s: %w", m.Name, err)
		}
		cached, err := idem.New(st, runnerOptions(idem.WithCache(2*b.n+2*b.warmup))...)
		if err != nil {
			return err
		}
		ran := map[string]bool{}
		for _, sc := range scenarios {
			runner := base
			if sc.Cached {
				runner = cached
			}
			if first, ok := resends[sc.Name]; ok && !ran[first] {
				// The events this scenario resends were not sent yet
				// (-only): send them first, unmeasured.
				var prior scenario
				for _, s := range workload() {
					if s.Name == first {
						prior = s
					}
				}
				var execs atomic.Int64
				if err := b.run(prior.Events(m.Name, b.n), 16, func(ctx context.Context, ev event) error {
					_, _ = runner.Do(ctx, ev.key, ev.payload, handler(ev, prior.Throw, &execs, 0))
					return nil
				}); err != nil {
					return err
				}
				ran[first] = true
			}
			evs := sc.Events(m.Name, b.n)
			if sc.Setup != nil {
				if err := sc.Setup(b, st, evs); err != nil {
					return fmt.Errorf("%s set-up: %w", sc.Name, err)
				}
			}
			var execs atomic.Int64
			throw := sc.Throw
			fn := func(ctx context.Context, ev event) (idem.Outcome, error) {
				return runner.Do(ctx, ev.key, ev.payload, handler(ev, throw, &execs, 0))
			}
			if sc.Bare {
				fn = func(ctx context.Context, ev event) (idem.Outcome, error) {
					execs.Add(1)
					_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
						ddbstore.DefaultKeyAttribute: &types.AttributeValueMemberS{Value: ev.key},
						"payload":                    &types.AttributeValueMemberS{Value: string(ev.payload)},
						"result":                     &types.AttributeValueMemberB{Value: ev.result},
					}})
					return idem.Outcome{Verdict: idem.Executed}, err
				}
			}
			meas, err := b.drive(evs, m.Conc, fn, &execs)
			if err != nil {
				return fmt.Errorf("%s %s: %w", sc.Name, m.Name, err)
			}
			ran[sc.Name] = true
			rep.addScenario(sc, m.Name, r, meas, b.n)
			logf("run %d %-22s %-4s p50 %6.2f ms  p99 %6.2f ms  %6.0f ev/s  cpu %5.0f µs/ev  dynalite %5.0f µs/ev  calls %v  %v",
				r, sc.Name, m.Name, ms(meas.P50), ms(meas.P99), meas.EventsPerS, us(meas.ClientCPU), us(meas.DynaliteCPU), meas.Calls, meas.Outcomes)
		}
	}
	if f.selected("c_race") {
		rr, err := b.race(base, r, f.raceTrials)
		if err != nil {
			return fmt.Errorf("c_race: %w", err)
		}
		rep.addRace(rr)
	}
	if f.selected("sqs_batch10") {
		sr, err := b.sqsBatch(base, r, f.sqsReps)
		if err != nil {
			return fmt.Errorf("sqs_batch10: %w", err)
		}
		rep.addSQS(sr)
	}
	return nil
}

// warm sends warm-up events (unique, then the same again), unmeasured.
func (b *bench) warm(r *idem.Runner, m mode) error {
	if b.warmup == 0 {
		return nil
	}
	evs := makeEvents("warmup", m.Name, b.warmup, 0)
	var execs atomic.Int64
	for range 2 {
		if err := b.run(evs, m.Conc, func(ctx context.Context, ev event) error {
			_, err := r.Do(ctx, ev.key, ev.payload, handler(ev, false, &execs, 0))
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// deleteTable drops a run's table so that dynalite's memory stays flat;
// not when parent is done (the bench is stopping, and dynalite with it).
func deleteTable(parent context.Context, client *dynamodb.Client, table string) {
	if parent.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(parent, 10*time.Second)
	defer cancel()
	if _, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
		logf("delete table %s: %v", table, err)
	}
}
