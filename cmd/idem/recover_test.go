package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/examples/orders"
	"github.com/idemgo/idem/internal/esm"
	"github.com/idemgo/idem/internal/fakeclock"
	idemlambda "github.com/idemgo/idem/lambda"
)

// outageLedger is the consumer's ledger behind a downstream outage: while down, an
// event's append fails as its id says (permanently, an expired credential's 403;
// transiently, a 503; or with an ordinary error), and every append is counted by event.
type outageLedger struct {
	orders.MemoryTables
	down    atomic.Bool
	mu      sync.Mutex
	appends map[string]int // successful appends by event id
}

func (l *outageLedger) Append(ctx context.Context, e orders.Entry) error {
	if l.down.Load() {
		switch outageKind(e.EventID) {
		case 0:
			return core.MarkPermanent(errors.New("ledger: 403 the service account's credentials expired"))
		case 1:
			return core.MarkTransient(errors.New("ledger: 503 unavailable"))
		default:
			return errors.New("ledger: connection pool exhausted")
		}
	}
	if err := l.MemoryTables.Append(ctx, e); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.appends[e.EventID]++
	return nil
}

func (l *outageLedger) counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.appends)
}

// outageKind is how event id's append fails during the outage: 0, 1 or 2 (its number
// modulo 3).
func outageKind(id string) int {
	var n int
	_, _ = fmt.Sscanf(id, "evt_out_%d", &n)
	return n % 3
}

// outageFixture is the example consumer (orders.NewConsumer, keyed by the body's event_id)
// on a dynalite table, fed by the event source mapping's stand-in from a moto queue whose
// redrive policy moves a message to the dead-letter queue after 2 receives; its runner
// bounds a key's attempts at 2 and retries nothing in-process.
type outageFixture struct {
	*fixture
	client *sqs.Client
	q      esm.Queues
	ledger *outageLedger
	poller *esm.Poller
}

const outageTimeout = 3 * time.Second // the function's timeout and the queue's visibility timeout

func newOutageFixture(t *testing.T) *outageFixture {
	t.Helper()
	f := &outageFixture{fixture: newFixture(t), ledger: &outageLedger{appends: map[string]int{}}}
	var q esm.Queues
	f.client, q = sqsFixtureWith(t, esm.QueueConfig{VisibilityTimeout: outageTimeout, MaxReceiveCount: 2})
	f.q = q
	handler, err := orders.NewConsumer(orders.Deps{
		Store: f.store, Ledger: f.ledger, Logger: slog.New(slog.DiscardHandler),
		RunnerOptions: []idem.Option{idem.WithMaxAttempts(2), idem.WithRetry(1, time.Millisecond, time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.poller, err = esm.New(t.Context(), f.client, q.URL, esm.Handler(handler), esm.WithReportBatchItemFailures(), esm.WithFunctionTimeout(outageTimeout))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// pollUntil polls the consumer until done reports true, at most n polls (each waits up
// to a second for messages).
func (f *outageFixture) pollUntil(t *testing.T, n int, done func(esm.Batch) bool) {
	t.Helper()
	for range n {
		b, err := f.poller.PollOnce(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if b.InvokeErr != nil {
			t.Fatalf("invocation failed: %v", b.InvokeErr)
		}
		if done(b) {
			return
		}
	}
	t.Fatalf("condition not reached after %d polls", n)
}

func (f *outageFixture) sendEvents(t *testing.T, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("evt_out_%03d", i)
		body := fmt.Sprintf(`{"type":"OrderPlaced","event_id":%q,"order_id":"ord_%03d","customer_id":"c-1","amount_cents":%d}`, ids[i], i, 1000+i)
		if _, err := f.client.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(f.q.URL), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// TestRecoverAfterOutage is the operator's night: a downstream outage sends 100 events
// to the dead-letter queue with records that no delivery runs again (permanent failures,
// retries exhausted); one command, after its dry run, brings every message back, each
// runs once more and is acknowledged, and the dead-letter queue is empty.
func TestRecoverAfterOutage(t *testing.T) {
	t.Parallel()
	f := newOutageFixture(t)
	const n = 100
	f.ledger.down.Store(true)
	start := time.Now()
	ids := f.sendEvents(t, n)
	// Each message: received twice and reported, then moved by the redrive policy at the
	// third receive. Each poll takes up to 10 messages or waits a second.
	f.pollUntil(t, 120, func(esm.Batch) bool {
		visible, inFlight := queueHolds(t, f.client, f.q.DLQURL)
		return visible+inFlight == n
	})
	if got := f.ledger.counts(); len(got) != 0 {
		t.Fatalf("appends during the outage: %v", got)
	}
	states := map[string]int{}
	for _, id := range ids {
		rec := f.record(t, id)
		states[stateOf(rec, time.Now())]++
	}
	t.Logf("records after the outage (%v): %v", time.Since(start).Round(time.Millisecond), states)
	if states[stateFailedPermanent]+states[stateFailedRetryable] != n {
		t.Fatalf("records after the outage: %v, want %d failed", states, n)
	}

	redrive := []string{"dlq", "redrive", "--queue-url", f.q.DLQURL, "--table", f.table,
		"--key-source", "body:event_id", "--action", orders.LedgerAction, "--max-attempts", "2"}
	dry := decodeJSON[redriveView](t, mustCmd(t, exitOK, time.Now(), nil, append(redrive, "--dry-run", "--json")...).stdout)
	if dry.Received != n || dry.Moved != 0 || dry.Released != 0 || dry.Left != 0 || len(dry.Messages) != n || dry.To != f.q.URL {
		t.Fatalf("dry run = %+v, want %d messages received, nothing done", dry, n)
	}
	for _, m := range dry.Messages {
		if m.Action != actionRelease || m.Done || m.KeyHash == "" || !core.IsDerivedKey(m.Key) {
			t.Errorf("dry run: message %+v, want a release not done, with its key", m)
		}
	}
	if visible, inFlight := queueHolds(t, f.client, f.q.DLQURL); visible != n || inFlight != 0 {
		t.Fatalf("after the dry run the dead-letter queue holds %d visible, %d in flight; want %d visible", visible, inFlight, n)
	}
	for _, id := range ids {
		if st := stateOf(f.record(t, id), time.Now()); st != stateFailedPermanent && st != stateFailedRetryable {
			t.Fatalf("the dry run changed the record of %s: %s", id, st)
		}
	}

	t.Logf("dry run done (%v)", time.Since(start).Round(time.Millisecond))
	f.ledger.down.Store(false) // the downstream is back
	r := mustCmd(t, exitOK, time.Now(), nil, redrive...)
	if want := fmt.Sprintf("moved %d messages from %s to %s (released %d records first); left 0 in %s\n", n, f.q.DLQURL, f.q.URL, n, f.q.DLQURL); !strings.HasSuffix(r.stdout, want) {
		t.Errorf("redrive printed:\n%s\nwant it to end with %q", r.stdout, want)
	}
	t.Logf("redrive done (%v)", time.Since(start).Round(time.Millisecond))
	if visible, inFlight := queueHolds(t, f.client, f.q.DLQURL); visible+inFlight != 0 {
		t.Errorf("after the redrive the dead-letter queue holds %d messages", visible+inFlight)
	}
	var reported []string
	f.pollUntil(t, 40, func(b esm.Batch) bool {
		reported = append(reported, b.Reported...)
		visible, inFlight := queueHolds(t, f.client, f.q.URL)
		return visible+inFlight == 0 && len(f.ledger.counts()) == n
	})
	t.Logf("consumed (%v)", time.Since(start).Round(time.Millisecond))
	if len(reported) != 0 {
		t.Errorf("after the redrive the consumer reported %v, want every message acknowledged", reported)
	}
	for _, id := range ids {
		if got := f.ledger.counts()[id]; got != 1 {
			t.Errorf("%s ran %d times after the redrive, want once", id, got)
		}
		if rec := f.record(t, id); rec.Status != core.StatusSucceeded {
			t.Errorf("%s: record %s after the redrive, want succeeded", id, stateOf(rec, time.Now()))
		}
	}
	if visible, inFlight := queueHolds(t, f.client, f.q.DLQURL); visible+inFlight != 0 {
		t.Errorf("the dead-letter queue holds %d messages at the end", visible+inFlight)
	}
}

// record reads the consumer's record of event id.
func (f *outageFixture) record(t *testing.T, id string) core.Record {
	t.Helper()
	key, err := idemlambda.EventKey(id, orders.LedgerAction)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := f.store.Get(t.Context(), key, time.Now())
	if err != nil {
		t.Fatalf("record of %s: %v", id, err)
	}
	return rec
}

// write writes key's record at now: attempts executions, each but the last a
// retryable failure, the last ending in status (in progress: under a live lease of
// ten minutes; failed: retryable or not).
func (f *fixture) write(t *testing.T, key, fingerprint string, now time.Time, attempts int, status core.Status, retryable bool) core.Record {
	t.Helper()
	ctx := context.Background()
	var prev *core.Record
	for i := 1; i <= attempts; i++ {
		rec := core.Reserve(key, fingerprint, fmt.Sprintf("tok-%d-%d", now.UnixNano(), i), prev, now, now.Add(10*time.Minute), 24*time.Hour)
		if err := f.store.Reserve(ctx, rec, prev, now); err != nil {
			t.Fatalf("Reserve(%s) = %v", key, err)
		}
		switch {
		case i == attempts && status == core.StatusInProgress:
			return rec
		case i < attempts:
			rec = core.Fail(rec, errors.New("ledger busy"), true, now, 24*time.Hour)
		case status == core.StatusSucceeded:
			rec = core.Succeed(rec, []byte(`"ok"`), now, 24*time.Hour)
		default:
			rec = core.Fail(rec, errors.New("ledger refused"), retryable, now, 24*time.Hour)
		}
		stored, err := f.store.Complete(ctx, rec)
		if err != nil {
			t.Fatalf("Complete(%s) = %v", key, err)
		}
		prev = &stored
	}
	return *prev
}

// TestRedriveDispositions: the redrive releases only the records no delivery runs
// again (a permanent failure, retries exhausted), moves the messages whose records run
// again, replay or wait as they are, and leaves in the dead-letter queue, visible, a
// message without a key and one whose record changed between the read and the
// release (the release is fenced: nothing is deleted). The dry run says so and changes
// nothing; the exit code says that messages were left.
func TestRedriveDispositions(t *testing.T) {
	f := newFixture(t)
	client, q := sqsFixture(t)
	now := time.Now()
	const action = "append-ledger"
	key := func(id string) string {
		k, err := idemlambda.EventKey(id, action)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	body := func(ev string) string { return fmt.Sprintf(`{"event_id":%q}`, ev) }
	fingerprint := func(ev string) string {
		f, err := core.Fingerprint([]byte(body(ev)))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f.write(t, key("evt_perm"), fingerprint("evt_perm"), now, 1, core.StatusFailed, false)
	f.write(t, key("evt_exhausted"), fingerprint("evt_exhausted"), now, 3, core.StatusFailed, true)
	f.write(t, key("evt_retry"), fingerprint("evt_retry"), now, 1, core.StatusFailed, true)
	f.write(t, key("evt_done"), fingerprint("evt_done"), now, 1, core.StatusSucceeded, false)
	f.write(t, key("evt_live"), fingerprint("evt_live"), now, 1, core.StatusInProgress, false)
	f.write(t, key("evt_reused"), fp, now, 1, core.StatusFailed, false) // another payload's
	changed := f.write(t, key("evt_changed"), fingerprint("evt_changed"), now, 1, core.StatusFailed, false)
	ids := map[string]string{} // message id → its event
	for _, ev := range []string{"evt_perm", "evt_exhausted", "evt_retry", "evt_done", "evt_live", "evt_reused", "evt_changed", "evt_none", ""} {
		b := body(ev)
		if ev == "" {
			b = `{"eventId":"evt_typo"}`
		}
		out, err := client.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(q.DLQURL), MessageBody: aws.String(b)})
		if err != nil {
			t.Fatal(err)
		}
		ids[aws.ToString(out.MessageId)] = ev
	}
	want := map[string]struct{ action, why string }{
		"evt_perm":      {actionRelease, whyPermanent},
		"evt_exhausted": {actionRelease, whyExhausted},
		"evt_retry":     {actionMove, whyRetryable},
		"evt_done":      {actionMove, whySucceeded},
		"evt_live":      {actionMove, whyInProgress},
		"evt_reused":    {actionLeave, whyReused},
		"evt_changed":   {actionRelease, whyPermanent},
		"evt_none":      {actionMove, whyNoRecord},
		"":              {actionLeave, whyNoKey},
	}
	redrive := []string{"dlq", "redrive", "--queue-url", q.DLQURL, "--table", f.table, "--key-source", "body:event_id", "--action", action,
		"--max-attempts", "3", "--json"}

	dry := decodeJSON[redriveView](t, mustCmd(t, exitLeftBehind, now, nil, append(redrive, "--dry-run")...).stdout)
	if dry.Received != 9 || dry.Left != 2 || dry.Moved != 0 || dry.Released != 0 {
		t.Errorf("dry run = %+v, want 9 received, 2 to leave, nothing done", dry)
	}
	for _, m := range dry.Messages {
		if w := want[ids[m.MessageID]]; m.Action != w.action || m.Why != w.why || m.Done {
			t.Errorf("dry run, %s: %+v, want %s (%s), not done", ids[m.MessageID], m, w.action, w.why)
		}
	}
	if visible, inFlight := queueHolds(t, client, q.DLQURL); visible != 9 || inFlight != 0 {
		t.Fatalf("after the dry run: %d visible, %d in flight; want the 9 messages visible", visible, inFlight)
	}

	// Between the redrive's read of evt_changed's record and its release, a delivery
	// releases and runs the key again.
	proxy := newDynamoProxy(t)
	var once sync.Once
	proxy.before = func(op string, body []byte) {
		if op == "DeleteItem" && strings.Contains(string(body), key("evt_changed")) {
			once.Do(func() {
				if err := f.store.Release(context.Background(), changed); err != nil {
					t.Errorf("changing the record: %v", err)
				}
				f.write(t, key("evt_changed"), fingerprint("evt_changed"), now.Add(time.Second), 1, core.StatusFailed, false)
			})
		}
	}
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", proxy.URL)
	r := mustCmd(t, exitLeftBehind, now, nil, redrive...)
	if !strings.Contains(r.stderr, "3 messages left in "+q.DLQURL) {
		t.Errorf("stderr: %s", r.stderr)
	}
	v := decodeJSON[redriveView](t, r.stdout)
	if v.Received != 9 || v.Moved != 6 || v.Released != 2 || v.Left != 3 {
		t.Errorf("redrive = %+v, want 9 received, 6 moved, 2 released, 3 left", v)
	}
	want["evt_changed"] = struct{ action, why string }{actionLeave, whyChanged}
	for _, m := range v.Messages {
		w := want[ids[m.MessageID]]
		if m.Action != w.action || m.Why != w.why || m.Done != (w.action != actionLeave) {
			t.Errorf("%s: %+v, want %s (%s)", ids[m.MessageID], m, w.action, w.why)
		}
	}
	if visible, inFlight := queueHolds(t, client, q.DLQURL); visible != 3 || inFlight != 0 {
		t.Errorf("the dead-letter queue holds %d visible, %d in flight; want the 3 messages left, visible", visible, inFlight)
	}
	if visible, _ := queueHolds(t, client, q.URL); visible != 6 {
		t.Errorf("the queue holds %d visible messages, want the 6 moved", visible)
	}
	for ev, present := range map[string]bool{"evt_perm": false, "evt_exhausted": false, "evt_retry": true, "evt_done": true, "evt_live": true, "evt_reused": true, "evt_changed": true} {
		rec, err := f.store.Get(t.Context(), key(ev), now.Add(2*time.Second))
		if (err == nil) != present {
			t.Errorf("%s: record %+v, %v; want present %v", ev, rec, err, present)
		}
	}
	r = mustCmd(t, exitLeftBehind, now, nil, append(redrive, "--dry-run", "--max", "1")...)
	if v := decodeJSON[redriveView](t, r.stdout); v.Received != 1 || v.Stopped != "max" || !strings.Contains(r.stderr, "stopped at --max 1") {
		t.Errorf("--max 1: %+v, stderr %s", v, r.stderr)
	}
}

// TestDispose: recovery releases exactly the records no delivery runs again, by
// core.Decide with the runner's bound, and says why it leaves the others.
func TestDispose(t *testing.T) {
	t.Parallel()
	now := t0.Add(time.Hour)
	rec := func(status core.Status, retryable bool, attempts int, leaseUntil time.Time) *core.Record {
		return &core.Record{Key: "evt:k1:act", Fingerprint: fp, LeaseToken: "tok", Status: status, Retryable: retryable,
			Attempts: attempts, LeaseUntil: leaseUntil, ExpiresAt: now.Add(time.Hour)}
	}
	tests := []struct {
		name    string
		rec     *core.Record
		release bool
		why     string
	}{
		{"no record", nil, false, whyNoRecord},
		{"permanent failure", rec(core.StatusFailed, false, 1, time.Time{}), true, whyPermanent},
		{"retries exhausted", rec(core.StatusFailed, true, 3, time.Time{}), true, whyExhausted},
		{"attempts left", rec(core.StatusFailed, true, 2, time.Time{}), false, whyRetryable},
		{"succeeded", rec(core.StatusSucceeded, false, 1, time.Time{}), false, whySucceeded},
		{"live lease", rec(core.StatusInProgress, false, 1, now.Add(time.Minute)), false, whyInProgress},
		{"stuck", rec(core.StatusInProgress, false, 1, now.Add(-time.Minute)), false, whyStuck},
		{"stuck, attempts used up", rec(core.StatusInProgress, false, 3, now.Add(-time.Minute)), true, whyExhausted},
		{"with a store's prefix", &core.Record{Key: "orders#evt:k1:act", Fingerprint: fp, LeaseToken: "tok", Status: core.StatusFailed, Attempts: 1, ExpiresAt: now.Add(time.Hour)}, true, whyPermanent},
	}
	for _, tc := range tests {
		if got := dispose(tc.rec, now, 3); got.release != tc.release || got.why != tc.why {
			t.Errorf("%s: dispose = %+v, want release %v (%s)", tc.name, got, tc.release, tc.why)
		}
	}
}

// TestPacer: a rate of 4 a second spaces actions 250 ms apart by the command's clock,
// from the first; none waits without a rate.
func TestPacer(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(t0)
	var waits []time.Duration
	c := &cli{now: clock.Now, sleep: func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		clock.Advance(d)
		return ctx.Err()
	}}
	p := c.newPacer(4)
	for i := range 4 {
		if i == 2 {
			clock.Advance(100 * time.Millisecond) // work between two actions counts
		}
		if err := p.wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if want := []time.Duration{250 * time.Millisecond, 150 * time.Millisecond, 250 * time.Millisecond}; !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
	if got := clock.Now().Sub(t0); got != 750*time.Millisecond {
		t.Errorf("4 actions took %v, want 750ms", got)
	}
	waits = nil
	none := c.newPacer(0)
	for range 3 {
		_ = none.wait(context.Background())
	}
	if len(waits) != 0 {
		t.Errorf("no rate: waits %v", waits)
	}
}
