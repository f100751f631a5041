package orders

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/ddbstore"
)

// SweepEnv lists the environment variables idem-sweep reads.
var SweepEnv = []EnvVar{{EnvIdemTable, true}}

// DefaultSweepMargin is how long before its invocation's deadline a
// sweep stops taking new pages.
const DefaultSweepMargin = 10 * time.Second

// SweepReport is what one run of a Sweeper did.
type SweepReport struct {
	// Found is the number of items past retention the scan read; Deleted,
	// of those deleted; Left, of those live again at their delete (renewed,
	// written anew) or gone.
	Found, Deleted, Left int
	// Scanned is the number of items the scan evaluated, ConsumedRCU the
	// read capacity it consumed.
	Scanned     int
	ConsumedRCU float64
	// Next continues the scan where the run stopped (its deadline); empty
	// when it read the table to its end.
	Next string
}

// Sweeper deletes the idempotency table's items past retention, every
// function's (ddbstore's ScanExpired, then DeleteExpired, conditioned on
// each item's still being past retention at its delete), for a table whose
// Time to Live deletes nothing: a global table in multi-Region strong
// consistency (docs/multi-region.md). It is the scheduled function
// idem-sweep (cmd/idem-sweep; template.yaml deploys it with a SweepSchedule).
// Each run starts at the table's beginning and stops at its end or Margin
// before its deadline, logging where it stopped.
type Sweeper struct {
	// Store is a store of the table without a key prefix, so that it reads
	// every function's records.
	Store *ddbstore.Store
	// Now is the clock (time.Now).
	Now func() time.Time
	// Margin is DefaultSweepMargin unless set.
	Margin time.Duration
	// Logger receives the run's report.
	Logger *slog.Logger
}

// SweepFromEnv builds idem-sweep's handler from the environment (SweepEnv)
// and the AWS SDK's default configuration, checking the table first
// (Store.CheckTable: its key schema, and on a global table its mode).
func SweepFromEnv(ctx context.Context) (func(context.Context, events.EventBridgeEvent) (SweepReport, error), error) {
	cfg, err := ConfigFromEnv(os.Getenv, SweepEnv)
	if err != nil {
		return nil, err
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("orders: AWS configuration: %w", err)
	}
	store, err := ddbstore.New(dynamodb.NewFromConfig(awsCfg), cfg.IdemTable)
	if err != nil {
		return nil, err
	}
	if err := store.CheckTable(ctx); err != nil {
		return nil, err
	}
	s := Sweeper{Store: store, Now: time.Now, Logger: NewLogger("idem-sweep")}
	return s.Run, nil
}

// Run sweeps the table once; the event is the schedule's, and unused.
func (s Sweeper) Run(ctx context.Context, _ events.EventBridgeEvent) (SweepReport, error) {
	margin := s.Margin
	if margin <= 0 {
		margin = DefaultSweepMargin
	}
	var r SweepReport
	err := s.pages(ctx, &r, margin)
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelError
	}
	s.Logger.Log(ctx, level, "idem sweep", slog.Int("found", r.Found), slog.Int("deleted", r.Deleted), slog.Int("left", r.Left),
		slog.Int("scanned", r.Scanned), slog.Float64("consumed_rcu", r.ConsumedRCU), slog.String("next", r.Next), slog.Any("error", err))
	return r, err
}

// pages sweeps page by page until the table's end, or until margin before
// ctx's deadline.
func (s Sweeper) pages(ctx context.Context, r *SweepReport, margin time.Duration) error {
	for {
		page, err := s.Store.ScanExpired(ctx, ddbstore.ListInput{Next: r.Next}, s.Now())
		if err != nil {
			return err
		}
		r.Next, r.Scanned, r.ConsumedRCU = page.Next, r.Scanned+page.Scanned, r.ConsumedRCU+page.ConsumedRCU
		for _, e := range page.Items {
			r.Found++
			switch err := s.Store.DeleteExpired(ctx, e, s.Now()); {
			case errors.Is(err, idem.ErrRecordChanged):
				r.Left++
			case err != nil:
				return err
			default:
				r.Deleted++
			}
		}
		if d, ok := ctx.Deadline(); r.Next == "" || ok && s.Now().Add(margin).After(d) {
			return nil
		}
	}
}
