package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"gopkg.in/yaml.v3"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/examples/orders"
	"github.com/idemgo/idem/internal/devserver"
	"github.com/idemgo/idem/internal/esm"
	idemlambda "github.com/idemgo/idem/lambda"
)

// templateMaxReceiveCount is the redrive policy's maxReceiveCount of template.yaml's orders
// queue.
func templateMaxReceiveCount(t *testing.T) int {
	t.Helper()
	root, err := devserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	n := &doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, k := range []string{"Resources", "OrdersQueue", "Properties", "RedrivePolicy", "maxReceiveCount"} {
		n = mapValue(n, k)
		if n == nil {
			t.Fatalf("template.yaml has no %s on the path to the orders queue's maxReceiveCount", k)
		}
	}
	count, err := strconv.Atoi(n.Value)
	if err != nil || count < 1 {
		t.Fatalf("template.yaml's maxReceiveCount %q: %v", n.Value, err)
	}
	return count
}

// mapValue is the value of key in the mapping node n, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// receive is what one receive of a message did, from the consumer's log: the verdict of its
// call, its level and attempt, and the handler's runs (the call's, and its in-process retries).
type receive struct {
	verdict, level string
	attempt, runs  int
}

// receivesOf reads, from the consumer's log, what each receive of the message id did, in order.
// An in-process retry's record ("idem retry") precedes its call's record.
func receivesOf(log, id, key string) []receive {
	var out []receive
	retries := 0
	for _, rec := range jsonLines(log) {
		switch {
		case rec["message"] == "idem retry" && rec["key_hash"] == idem.HashKey(key):
			retries++
		case rec["message_id"] == id && rec["verdict"] != nil:
			attempt, _ := rec["attempt"].(float64)
			r := receive{verdict: fmt.Sprint(rec["verdict"]), level: fmt.Sprint(rec["level"]), attempt: int(attempt), runs: retries}
			if idemVerdict(r.verdict).Ran() || retries > 0 {
				r.runs++ // the call's first try
			}
			out, retries = append(out, r), 0
		}
	}
	return out
}

// idemVerdict is the verdict named name.
func idemVerdict(name string) idem.Verdict {
	for _, v := range idem.Verdicts() {
		if v.String() == name {
			return v
		}
	}
	return idem.VerdictUnknown
}

// The source's limit is the limit, end to end: the example consumer as it is (no option), fed
// by the event source mapping from a queue with template.yaml's redrive policy. An outage (the
// warehouse answering 503) through all receives but the last ends with the last receive running
// and succeeding; an outage past the limit leaves the message in the dead-letter queue having run
// on every receive; an ordinary error the same, once per receive, logged at ERROR; a key the key
// source cannot find is reported on every receive without running. The outages last a number of
// receives the test sets (the message's ApproximateReceiveCount), whatever the machine's speed.
func TestQueueTheSourcesLimitIsTheLimit(t *testing.T) {
	t.Parallel()
	limit := templateMaxReceiveCount(t)
	s := newQueuedWith(t, queueTimeout, limit)
	fn, p := s.consumer(true)

	bodies := map[string]string{
		"recovers": event("evt_recovers", fmt.Sprintf(`,"outage_receives":%d`, limit-1)),
		"outage":   event("evt_outage", fmt.Sprintf(`,"outage_receives":%d`, limit)),
		"error":    event("evt_error", `,"fail":"error"`),
		"typo":     `{"type":"OrderPlaced","eventId":"evt_typo","order_id":"ord_typo","customer_id":"c-1","amount_cents":2500}`,
	}
	ids := map[string]string{} // case → message id
	for name, body := range bodies {
		ids[name] = s.send(body)
	}
	// Each receive, then up to a visibility timeout of empty one-second polls, until the
	// queue has deleted or moved every message.
	s.pollUntil(p, (limit+1)*(queueTimeout+2), func(esm.Batch) bool { return s.held(s.q.URL) == 0 })
	if n := s.held(s.q.DLQURL); n != 3 {
		t.Errorf("the dead-letter queue holds %d messages, want 3: the outage past the limit, the ordinary error, the typo", n)
	}
	if n := s.ledgerByEvent(); !maps.Equal(n, map[string]int{"evt_recovers": 1}) {
		t.Errorf("ledger = %v, want one entry, for evt_recovers", n)
	}

	log := fn.Log()
	metrics := map[string]int{} // EMF documents per verdict: one per call
	for _, doc := range emfDocuments(log) {
		metrics[fmt.Sprint(doc["Verdict"])]++
	}
	if want := map[string]int{"executed": 1, "failed_transiently": 2*limit - 1, "failed_unclassified": limit, "missing_key": limit}; !maps.Equal(metrics, want) {
		t.Errorf("EMF documents per verdict = %v, want %v", metrics, want)
	}
	for name, body := range bodies {
		key, _ := idemlambda.SQSKey(idemlambda.KeyFromBodyField("event_id"), orders.LedgerAction, events.SQSMessage{Body: body})
		got := receivesOf(log, ids[name], key)
		if len(got) != limit {
			t.Errorf("%s: %d receives logged, want %d (maxReceiveCount): %v", name, len(got), limit, got)
			continue
		}
		t.Logf("%s: receives %+v", name, got)
		for i, r := range got {
			checkReceive(t, name, i+1, limit, r)
		}
		if name == "typo" {
			continue
		}
		rec, err := s.storeOf("orders-consumer").Get(t.Context(), key, time.Now())
		wantStatus := core.StatusFailed
		if name == "recovers" {
			wantStatus = core.StatusSucceeded
		}
		if err != nil || rec.Status != wantStatus || rec.Attempts != limit || (wantStatus == core.StatusFailed && !rec.Retryable) {
			t.Errorf("%s: record %v, %v; want %s after %d attempts, one per receive (retryable if failed)", name, rec, err, wantStatus, limit)
		}
	}
}

// checkReceive checks the n-th of limit receives of a case: what it logged and how often the
// handler ran.
func checkReceive(t *testing.T, name string, n, limit int, r receive) {
	t.Helper()
	var ok bool
	switch name {
	case "recovers":
		if n < limit {
			ok = r.verdict == "failed_transiently" && r.runs >= 1
		} else {
			ok = r.verdict == "executed" && r.runs >= 1
		}
	case "outage":
		ok = r.verdict == "failed_transiently" && r.level == "WARN" && r.runs >= 1
	case "error":
		ok = r.verdict == "failed_unclassified" && r.level == "ERROR" && r.runs == 1
	case "typo":
		ok = r.verdict == "missing_key" && r.runs == 0
	}
	if name != "typo" && r.attempt != n {
		ok = false
	}
	if !ok {
		t.Errorf("%s, receive %d of %d: %+v", name, n, limit, r)
	}
}
