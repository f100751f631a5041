package sim

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	idemlambda "github.com/idemgo/idem/lambda"
)

// Batch services deliver their messages through a batch wrapper of package
// lambda (Service.Batch): a task is one invocation with a batch of records,
// run one at a time (WithConcurrency(1)) on the task's thread. An ordered
// batch (a FIFO message group, a Kinesis shard) is one lane: the service
// keeps its pending records in order, and after a batch the records it
// reported go back to the head of the lane.

// batchHandler runs t's records through the sandbox's wrapper and returns
// the records it reported for redelivery.
type batchHandler func(t *task) (reported map[*call]bool)

// wrap makes the sandbox's batch wrapper, for a batch service.
func (b *sandbox) wrap() error {
	sv := b.sv
	opts := []idemlambda.BatchOption{idemlambda.WithConcurrency(1), idemlambda.WithClock(b.clock)}
	if sv.Selection {
		opts = append(opts, idemlambda.WithFingerprintSelection(core.IgnoreFields("sent_at")))
	}
	if sv.GroupTenant {
		opts = append(opts, idemlambda.WithMessageGroupTenant())
	}
	switch sv.Batch {
	case 0:
		return nil
	case SQSStandard, SQSFIFO:
		h, err := idemlambda.SQS(b.runner, batchAction, idemlambda.KeyFromBodyField("id"),
			func(ctx context.Context, m events.SQSMessage) ([]byte, error) {
				return byID(ctx, m.MessageId).handle(ctx)
			}, opts...)
		if err != nil {
			return err
		}
		b.batch = func(t *task) map[*call]bool {
			resp, _ := h(t.ctx, sqsEvent(t))
			return reportedBy(t, len(resp.BatchItemFailures), func(i int) string { return resp.BatchItemFailures[i].ItemIdentifier })
		}
	case Kinesis:
		h, err := idemlambda.Kinesis(b.runner, batchAction, idemlambda.KinesisKeyFromDataField("id"),
			func(ctx context.Context, r events.KinesisEventRecord) ([]byte, error) {
				return byID(ctx, r.Kinesis.SequenceNumber).handle(ctx)
			}, opts...)
		if err != nil {
			return err
		}
		b.batch = func(t *task) map[*call]bool {
			resp, _ := h(t.ctx, kinesisEvent(t))
			return checkpointed(t, resp)
		}
	}
	return nil
}

// recordID is the message id (SQS) or sequence number (Kinesis) of a
// call's record.
func (c *call) recordID() string { return fmt.Sprintf("%020d", c.d.id) }

// byID returns the call of ctx's task whose record is id.
func byID(ctx context.Context, id string) *call {
	t := taskOf(ctx)
	for _, c := range t.calls {
		if c.recordID() == id {
			return c
		}
	}
	panic("sim: a batch record the simulation did not send: " + id)
}

func sqsEvent(t *task) events.SQSEvent {
	arn := "arn:aws:sqs:us-east-1:000000000000:" + t.sv.Name
	var ev events.SQSEvent
	for _, c := range t.calls {
		m := events.SQSMessage{MessageId: c.recordID(), Body: string(c.d.payload()), EventSourceARN: arn,
			Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(c.d.gen + 1)}}
		if t.sv.Batch == SQSFIFO {
			m.EventSourceARN += ".fifo"
		}
		if t.sv.Batch == SQSFIFO || t.sv.GroupTenant {
			m.Attributes["MessageGroupId"] = simGroup
		}
		ev.Records = append(ev.Records, m)
	}
	return ev
}

func kinesisEvent(t *task) events.KinesisEvent {
	var ev events.KinesisEvent
	for _, c := range t.calls {
		ev.Records = append(ev.Records, events.KinesisEventRecord{
			EventID: "shardId-000000000000:" + c.recordID(), EventSourceArn: "arn:aws:kinesis:us-east-1:000000000000:stream/" + t.sv.Name,
			Kinesis: events.KinesisRecord{Data: c.d.payload(), PartitionKey: c.ks.name, SequenceNumber: c.recordID()},
		})
	}
	return ev
}

// reportedBy returns the calls whose records the n identifiers id(i) name.
func reportedBy(t *task, n int, id func(int) string) map[*call]bool {
	out := make(map[*call]bool, n)
	for i := range n {
		for _, c := range t.calls {
			if c.recordID() == id(i) {
				out[c] = true
			}
		}
	}
	return out
}

// checkpointed returns the records a stream redelivers after resp: its
// checkpoint and every record after it.
func checkpointed(t *task, resp events.KinesisEventResponse) map[*call]bool {
	out := map[*call]bool{}
	if len(resp.BatchItemFailures) == 0 {
		return out
	}
	from := len(t.calls)
	for i, c := range t.calls {
		if c.recordID() == resp.BatchItemFailures[0].ItemIdentifier {
			from = i
		}
	}
	for _, c := range t.calls[from:] {
		out[c] = true
	}
	return out
}

// lane is an ordered lane of a batch service: its pending records, in
// order, delivered one batch at a time.
type lane struct {
	sv      *service
	pending []*delivery
	busy    bool // a batch of it is in flight
	polled  bool // its next batch is scheduled
}

// arriveBatch delivers new messages of a batch service: a batch of them
// (with copies of some, now and then) for a standard queue, or records
// added to the service's lane.
func (s *simulation) arriveBatch(sv *service) {
	n := 1 + s.rng.IntN(max(sv.BatchMax/2, 1))
	var ds []*delivery
	for range n {
		d := s.newDelivery(sv)
		ds = append(ds, d)
		if s.chance(sv.Burst) {
			ds = append(ds, d)
		}
	}
	if !sv.Batch.ordered() {
		s.spawnBatch(sv, ds, nil)
		return
	}
	if len(sv.lanes) == 0 {
		sv.lanes = []*lane{{sv: sv}}
	}
	l := sv.lanes[0]
	l.pending = append(l.pending, ds...)
	s.poll(l, s.between(0, 100*time.Millisecond))
}

// poll schedules the lane's next batch after d, unless one is in flight or
// scheduled.
func (s *simulation) poll(l *lane, d time.Duration) {
	if l.busy || l.polled || len(l.pending) == 0 {
		return
	}
	l.polled = true
	s.after(d, func() {
		l.polled = false
		if l.busy || len(l.pending) == 0 {
			return
		}
		n := min(len(l.pending), l.sv.BatchMax)
		ds := slices.Clone(l.pending[:n])
		l.pending = l.pending[n:]
		l.busy = true
		s.spawnBatch(l.sv, ds, l)
	})
}

// spawnBatch starts an invocation of sv's wrapper with a copy of each of
// ds (as many as the run's deliveries allow).
func (s *simulation) spawnBatch(sv *service, ds []*delivery, l *lane) {
	if s.halted() {
		return
	}
	ds = ds[:max(min(len(ds), s.cfg.Deliveries-s.spawned), 0)] // (a service with Copies may have made more)
	if len(ds) == 0 {
		if l != nil {
			l.busy = false
		}
		return
	}
	t := s.newTask(sv, sv.sandboxes[s.rng.IntN(len(sv.sandboxes))])
	t.lane = l
	for _, d := range ds {
		s.sentN++
		d.sent = s.sentN
		t.addCall(d)
	}
	s.stats.Batches++
	s.start(t, func() {
		if reported := t.sb.batch(t); t.ended == 0 {
			s.finishBatch(t, reported)
		}
	})
}

// recordEnded checks the verdict of a batch record as its call ended: a
// documented one that agrees with the store, and, in an ordered lane, a
// record run only after every earlier one of its batch succeeded.
func (s *simulation) recordEnded(c *call, o idem.Observation) {
	v, ks := o.Verdict, c.ks
	if notStarted(v) {
		s.stats.Blocked++
		return
	}
	if c.t.sv.Batch.ordered() {
		for _, e := range c.t.calls {
			if e == c {
				break
			}
			if e.obs == nil || !succeeded(*e.obs) {
				s.violate(Batch, ks, "delivery %d ran (verdict %s) after delivery %d of its ordered lane did not succeed (%s)",
					c.d.id, v, e.d.id, verdictString(e.obs))
			}
		}
	}
	cl := classify(o.Err)
	switch {
	case v == idem.Executed && c.success == "":
		s.violate(Outcome, ks, "delivery %d was executed, but the store accepted no success from it", c.d.id)
	case v == idem.Replayed:
		cl = outReplay
	case cl == outOther:
		s.violate(Outcome, ks, "delivery %d ended with an undocumented error: %v", c.d.id, o.Err)
	}
	s.stats.count(cl, idem.Outcome{TookOver: o.TookOver, Waited: o.Waited})
	s.hist(c, hEnd, core.Record{}, o.Err)
	ks.note(v.String())
}

// notStarted reports a verdict the wrapper reached without running the
// record.
func notStarted(v idem.Verdict) bool {
	return v == idem.NotStarted || v == idem.Blocked || v == idem.Panicked
}

// succeeded reports a verdict the wrapper acknowledges by default.
func succeeded(v idem.Verdict) bool {
	return v == idem.Executed || v == idem.Replayed || v == idem.OutcomeNotRecorded
}

func verdictString(v *idem.Verdict) string {
	if v == nil {
		return "no verdict"
	}
	return v.String()
}

// finishBatch checks what the wrapper reported (every record that did not
// succeed, and only those) and redelivers the reported records as the
// source would.
func (s *simulation) finishBatch(t *task, reported map[*call]bool) {
	var back []*delivery
	for _, c := range t.calls {
		ok := c.obs != nil && succeeded(*c.obs)
		if ok == reported[c] {
			s.violate(Batch, c.ks, "delivery %d ended with verdict %s, and the wrapper reported it %t", c.d.id, verdictString(c.obs), reported[c])
		}
		if reported[c] {
			s.stats.BatchReported++
			back = append(back, c.d)
		}
	}
	s.requeue(t, back)
}

// batchCrashed redelivers every record of a batch whose process died.
func (s *simulation) batchCrashed(t *task) {
	var back []*delivery
	for _, c := range t.calls {
		s.hist(c, hEnd, core.Record{}, nil)
		c.ks.note(classNames[outCrash])
		back = append(back, c.d)
	}
	s.requeue(t, back)
}

// requeue delivers ds again later: each alone from a standard queue, or at
// the head of the ordered lane. A record redelivered too often is dropped
// (to the dead-letter queue, or the failure destination).
func (s *simulation) requeue(t *task, ds []*delivery) {
	sv := t.sv
	var keep []*delivery
	for _, d := range ds {
		if d.gen >= sv.Redeliveries || s.halted() {
			continue
		}
		s.stats.Redeliveries++
		next := *d
		next.gen++
		keep = append(keep, &next)
	}
	if l := t.lane; l != nil {
		delay := s.between(0, 100*time.Millisecond)
		if len(ds) > 0 {
			delay = s.between(sv.RedeliverMin, sv.RedeliverMax)
		}
		l.pending, l.busy = append(keep, l.pending...), false
		s.poll(l, delay)
		return
	}
	for _, d := range keep {
		s.after(s.between(sv.RedeliverMin, sv.RedeliverMax), func() { s.spawnBatch(sv, []*delivery{d}, nil) })
	}
}
