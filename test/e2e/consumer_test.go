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
	held := s.waitInProgress("orders-consumer", key)
	checkLease(t, held, start, functionTimeout*time.Second)

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
	rec, err := s.storeOf("orders-consumer").Get(t.Context(), key, time.Now())
	if err != nil || rec.Status != "succeeded" || rec.Attempts != 2 {
		t.Errorf("record = %v, %v; want succeeded after 2 attempts", rec, err)
	}
}
