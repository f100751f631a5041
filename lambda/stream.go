package idemlambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/idemgo/idem"
)

// The stream wrappers (Kinesis, DynamoDBStream) share this adapter over the
// batch engine. Records of a shard form one ordered lane: they run in the
// order of the event, and the lane stops at its first record that must be
// retried, whose sequence number is reported as the shard's checkpoint.
// Lambda then redelivers from that record: nothing after it is lost, and
// nothing before it is delivered again (and if it is, after a bisection or a
// whole-batch retry, it replays from the store).

// streamSource is what a stream adapter tells the stream wrapper about its
// record type R.
type streamSource[R any] struct {
	wrapper string                  // the logs' wrapper name
	key     func(R) (string, error) // the stored key
	payload func(R) ([]byte, error) // the fingerprinted payload
	lane    func(R) string          // the shard
	seq     func(R) string          // the sequence number: the checkpoint
	attrs   func(R) []slog.Attr     // what names the record in the logs
}

type streamWrapper[R any] struct {
	runner  *idem.Runner
	action  string
	src     streamSource[R]
	handler func(context.Context, R) ([]byte, error)
	cfg     config
}

// newStreamWrapper checks the arguments every stream constructor takes.
func newStreamWrapper[R any](runner *idem.Runner, action string, handler func(context.Context, R) ([]byte, error), opts []BatchOption, src streamSource[R]) (*streamWrapper[R], error) {
	if runner == nil {
		return nil, errors.New("idemlambda: nil runner")
	}
	if handler == nil {
		return nil, errors.New("idemlambda: nil handler")
	}
	if _, err := EventKey("probe", action); err != nil {
		return nil, fmt.Errorf("idemlambda: action %q: %w", action, err)
	}
	cfg, err := configure(opts, BatchOption.applyBatch)
	if err != nil {
		return nil, err
	}
	return &streamWrapper[R]{runner: runner, action: action, src: src, handler: handler, cfg: cfg}, nil
}

// checkpoints processes recs, each shard in order, and returns the sequence
// numbers to report: one per shard that stopped, that of its first record
// that must be retried ("" if that record has none, which Lambda takes as a
// failure of the whole batch).
func (w *streamWrapper[R]) checkpoints(ctx context.Context, recs []R) []string {
	keys := make([]string, len(recs))
	keyErrs := make([]error, len(recs))
	items := make([]batchItem, len(recs))
	ctx = withTenant(ctx, lambdaTenant(ctx))
	for i, r := range recs {
		keys[i], keyErrs[i] = w.src.key(r)
		if keyErrs[i] == nil {
			keys[i], _, keyErrs[i] = tenantScoped(ctx, keys[i])
		}
		items[i] = batchItem{key: keys[i], lane: w.src.lane(r)}
	}
	pol := batchPolicy{concurrency: w.cfg.concurrency, safetyMargin: w.cfg.safetyMargin, ordered: true, now: w.cfg.now}
	states := runBatch(ctx, items, pol, func(ctx context.Context, i int) bool {
		return w.one(ctx, recs[i], keys[i], keyErrs[i])
	}, func(i int, v idem.Verdict, reason error) {
		w.runner.Report(w.annotate(ctx, recs[i]), keys[i], idem.Outcome{Verdict: v}, reason)
	})
	seqs := []string{}
	for _, i := range laneCheckpoints(items, states) {
		seqs = append(seqs, w.src.seq(recs[i]))
	}
	return seqs
}

// one processes a record and reports whether it must be retried: in an
// ordered lane, the first such record is its shard's checkpoint.
func (w *streamWrapper[R]) one(ctx context.Context, rec R, key string, keyErr error) (report bool) {
	ctx = w.annotate(ctx, rec)
	if keyErr != nil {
		v := keyVerdict(keyErr)
		w.runner.Report(ctx, "", idem.Outcome{Verdict: v}, keyErr)
		return w.cfg.ack.reports(v)
	}
	payload, err := w.src.payload(rec)
	if err != nil {
		w.runner.Report(ctx, key, idem.Outcome{Verdict: idem.InvalidPayload}, err)
		return w.cfg.ack.reports(idem.InvalidPayload)
	}
	out := runRecord(ctx, w.runner, key, payload, func(ctx context.Context) ([]byte, error) {
		return w.handler(ctx, rec)
	})
	return w.cfg.ack.reports(out.Verdict)
}

// annotate names rec in the log record of its call, and says whether it was
// reported: whether it is its shard's checkpoint. A record after the
// checkpoint (idem.Blocked) is not reported itself: Lambda redelivers it
// with the checkpoint.
func (w *streamWrapper[R]) annotate(ctx context.Context, rec R) context.Context {
	return idem.WithAnnotation(ctx, func(out idem.Outcome, _ error) idem.Annotation {
		attrs := append([]slog.Attr{
			slog.String("wrapper", w.src.wrapper),
			slog.String("action", w.action),
			slog.String("sequence_number", w.src.seq(rec)),
		}, w.src.attrs(rec)...)
		reported := out.Verdict != idem.Blocked && w.cfg.ack.reports(out.Verdict)
		return idem.Annotation{Attrs: append(attrs, slog.Bool("reported", reported))}
	})
}
