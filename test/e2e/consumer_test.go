package e2e

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/examples/orders"
	idemlambda "github.com/idemgo/idem/lambda"
)

// Duplicates within a batch and across batches (a redelivery and a second
// send of the same event) give one ledger entry per event.
func TestConsumerDuplicates(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	fn := s.start("orders-consumer")

	got := s.sqsBatch(fn,
		record("m-1", event("evt_a", ""), 1),
		record("m-2", event("evt_b", ""), 1),
		record("m-3", event("evt_a", ""), 1), // the same event sent twice, in one batch
		record("m-4", event("evt_c", ""), 1),
	)
	if len(got) != 0 {
		t.Fatalf("batch 1 failures = %v, want none", got)
	}
	got = s.sqsBatch(fn,
		record("m-2", event("evt_b", ""), 2), // redelivered after a visibility timeout
		record("m-5", event("evt_c", ""), 1), // sent again
		record("m-6", event("evt_d", ""), 1),
		record("m-7", event("evt_d", ""), 1),
	)
	if len(got) != 0 {
		t.Fatalf("batch 2 failures = %v, want none", got)
	}
	want := map[string]int{"evt_a": 1, "evt_b": 1, "evt_c": 1, "evt_d": 1}
	if n := s.ledgerByEvent(); !maps.Equal(n, want) {
		t.Errorf("ledger entries per event = %v, want %v", n, want)
	}
}

// A poison message is reported (for the DLQ) while the others succeed; a
// transient failure is reported and succeeds on its redelivery.
func TestConsumerPoisonAndTransient(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	fn := s.start("orders-consumer")

	got := s.sqsBatch(fn,
		record("ok-1", event("evt_ok", ""), 1),
		record("poison-1", event("evt_poison", `,"fail":"poison"`), 1),
		record("flaky-1", event("evt_flaky", `,"fail":"transient_once"`), 1),
		record("bad-1", `{"type":"OrderPlaced","order_id":"ord_x"}`, 1), // no event_id: no key
	)
	slices.Sort(got)
	if want := []string{"bad-1", "flaky-1", "poison-1"}; !slices.Equal(got, want) {
		t.Fatalf("batch 1 failures = %v, want %v", got, want)
	}
	if n := s.ledgerByEvent(); !maps.Equal(n, map[string]int{"evt_ok": 1}) {
		t.Fatalf("ledger after batch 1 = %v", n)
	}
	got = s.sqsBatch(fn,
		record("flaky-1", event("evt_flaky", `,"fail":"transient_once"`), 2),
		record("poison-1", event("evt_poison", `,"fail":"poison"`), 2),
	)
	if want := []string{"poison-1"}; !slices.Equal(got, want) {
		t.Fatalf("redelivery failures = %v, want %v (the poison message replayed, on its way to the DLQ)", got, want)
	}
	if n := s.ledgerByEvent(); !maps.Equal(n, map[string]int{"evt_ok": 1, "evt_flaky": 1}) {
		t.Errorf("ledger after redelivery = %v", n)
	}
	// The poison message's handler ran once: its failure was replayed.
	if log := fn.Log(); strings.Count(log, "poison message (test hook)\"") < 1 || !strings.Contains(log, `"verdict":"replayed_failure"`) {
		t.Errorf("log lacks the permanent failure and its replay:\n%s", log)
	}
}

// An invocation killed by its timeout in the middle of the handler holds the
// key until its lease ends: a redelivery before then is reported; one after
// takes the key over and writes exactly one entry.
func TestConsumerTimeoutTakeover(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	a := s.start("orders-consumer")
	b := s.start("orders-consumer") // a second sandbox, as Lambda would use

	body := event("evt_slow", `,"sleep_ms":5000`)
	key, err := idemlambda.SQSKey(idemlambda.KeyFromBodyField("event_id"), orders.LedgerAction, record("slow-1", body, 1))
	if err != nil {
		t.Fatal(err)
	}
	timedOut := make(chan string, 1)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, out, err := a.Invoke(ctx, mustJSON(t, eventOf(record("slow-1", body, 1))))
		if err != nil {
			timedOut <- err.Error()
			return
		}
		timedOut <- string(out)
	}()
	held := s.waitInProgress(key)
	if d := held.LeaseUntil.Sub(start); d < functionTimeout*time.Second || d > functionTimeout*time.Second+leaseMargin+time.Second {
		t.Errorf("lease ends %v after the invoke, want about the timeout (%ds) plus the margin (%v)", d, functionTimeout, leaseMargin)
	}

	if got := s.sqsBatch(b, record("slow-1", body, 2)); !slices.Equal(got, []string{"slow-1"}) {
		t.Fatalf("redelivery during the lease: failures = %v, want [slow-1]", got)
	}
	if out := <-timedOut; !strings.Contains(out, "Task timed out") {
		t.Fatalf("first invocation answered %q, want a timeout", out)
	}
	if n := s.ledgerByEvent(); len(n) != 0 {
		t.Fatalf("ledger = %v, want nothing: the first invocation was killed before writing", n)
	}

	// The one real wait of these tests: the dead sandbox's lease must end.
	time.Sleep(time.Until(held.LeaseUntil) + 50*time.Millisecond)
	if got := s.sqsBatch(b, record("slow-1", body, 3)); len(got) != 0 {
		t.Fatalf("redelivery after the lease: failures = %v, want none", got)
	}
	if n := s.ledgerByEvent(); !maps.Equal(n, map[string]int{"evt_slow": 1}) {
		t.Errorf("ledger = %v, want exactly one entry for evt_slow", n)
	}
	if log := b.Log(); !strings.Contains(log, `"lease_taken_over":true`) {
		t.Errorf("the second sandbox did not log a takeover:\n%s", log)
	}
	rec, err := s.store.Get(t.Context(), key, time.Now())
	if err != nil || rec.Status != "succeeded" || rec.Attempts != 2 {
		t.Errorf("record = %v, %v; want succeeded after 2 attempts", rec, err)
	}
}
